//! The HTTP skeleton over real HTTP: health, readiness, request ids, problem documents.

use reqwest::StatusCode;
use serde_json::Value;

use crate::helpers::{TestDb, on_both_backends, spawn_app};

on_both_backends!(
    health_and_readiness_answer_200,
    request_ids_are_echoed_or_generated,
    every_error_is_a_problem_document,
    readiness_is_503_while_the_database_is_gone,
    the_server_stops_when_told,
);

async fn health_and_readiness_answer_200(db: &TestDb) {
    let app = spawn_app(db).await;
    let health = app.client.get(app.url("/healthz")).send().await.expect("healthz");
    assert_eq!(health.status(), StatusCode::OK);
    assert_eq!(health.json::<Value>().await.expect("json")["status"], "ok");
    let ready = app.client.get(app.url("/readyz")).send().await.expect("readyz");
    assert_eq!(ready.status(), StatusCode::OK);
    let backend = if db.is_postgres() { "postgres" } else { "sqlite" };
    assert_eq!(ready.json::<Value>().await.expect("json")["database"], backend);
    app.stop().await.expect("clean stop");
}

async fn request_ids_are_echoed_or_generated(db: &TestDb) {
    let app = spawn_app(db).await;
    let echoed =
        app.client.get(app.url("/healthz")).header("x-request-id", "trace-abc-123").send().await.expect("send");
    assert_eq!(echoed.headers()["x-request-id"], "trace-abc-123");
    let generated = app.client.get(app.url("/healthz")).send().await.expect("send");
    let id = generated.headers()["x-request-id"].to_str().expect("ascii").to_owned();
    assert!(uuid::Uuid::parse_str(&id).is_ok(), "a generated id is a UUID: {id}");
    app.stop().await.expect("clean stop");
}

async fn assert_problem(response: reqwest::Response, status: StatusCode, code: &str) -> Value {
    assert_eq!(response.status(), status);
    assert_eq!(response.headers()["content-type"], "application/problem+json");
    let request_id = response.headers()["x-request-id"].to_str().expect("ascii").to_owned();
    let body: Value = response.json().await.expect("problem json");
    assert_eq!(body["status"], status.as_u16());
    assert_eq!(body["code"], code);
    assert_eq!(body["type"], format!("urn:chatgate:problem:{code}"));
    assert!(body["title"].as_str().is_some_and(|t| !t.is_empty()));
    assert_eq!(body["request_id"], request_id, "the problem names the request");
    body
}

async fn every_error_is_a_problem_document(db: &TestDb) {
    let app = spawn_app(db).await;
    let missing = app.client.get(app.url("/no/such/path")).send().await.expect("send");
    assert_problem(missing, StatusCode::NOT_FOUND, "not_found").await;

    let wrong_method = app.client.delete(app.url("/healthz")).send().await.expect("send");
    assert!(wrong_method.headers().contains_key("allow"), "405 keeps its Allow header");
    assert_problem(wrong_method, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed").await;

    let limit = db.config.server.body_limit_bytes;
    let (head, body) = announce_a_body(&app.url(""), "/webhooks/whatsapp", limit + 1).await;
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    assert!(head.to_ascii_lowercase().contains("content-type: application/problem+json"), "{head}");
    assert_eq!(body["code"], "body_too_large");
    assert!(body["detail"].as_str().is_some_and(|d| d.contains("larger")));
    app.stop().await.expect("clean stop");
}

/// A POST that announces a body of `length` bytes and sends none of it: the answer to a body too
/// large comes from its length alone (a client still writing the body when the server answers
/// and closes would see a broken pipe instead of the answer). Its head, and its JSON body.
async fn announce_a_body(base: &str, path: &str, length: usize) -> (String, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = base.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = tokio::net::TcpStream::connect(address).await.expect("connect");
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\n\
         content-length: {length}\r\nconnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("read");
    let answer = String::from_utf8(answer).expect("utf-8");
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    (head.to_owned(), serde_json::from_str(body).expect("a JSON body"))
}

async fn readiness_is_503_while_the_database_is_gone(db: &TestDb) {
    let app = spawn_app(db).await;
    assert_eq!(app.client.get(app.url("/readyz")).send().await.expect("send").status(), StatusCode::OK);
    if db.is_postgres() {
        // The database disappears under the running server.
        db.drop_database().await;
    } else {
        // The file cannot disappear under an open SQLite handle; closing the pool is the loss.
        db.store.close().await;
    }
    let ready = app.client.get(app.url("/readyz")).send().await.expect("send");
    assert!(ready.headers().contains_key("retry-after"));
    assert_problem(ready, StatusCode::SERVICE_UNAVAILABLE, "not_ready").await;
    let alive = app.client.get(app.url("/healthz")).send().await.expect("send");
    assert_eq!(alive.status(), StatusCode::OK, "liveness does not depend on the database");
    app.stop().await.expect("clean stop");
}

async fn the_server_stops_when_told(db: &TestDb) {
    let app = spawn_app(db).await;
    let url = app.url("/healthz");
    let client = app.client.clone();
    assert_eq!(client.get(&url).send().await.expect("send").status(), StatusCode::OK);
    app.stop().await.expect("the server returns Ok after a graceful stop");
    assert!(client.get(&url).send().await.is_err(), "nothing listens after the stop");
}

#[tokio::test]
async fn the_openapi_document_describes_every_route() {
    let db = crate::helpers::TestDb::sqlite().await;
    let app = crate::helpers::spawn_app(&db).await;
    let response = app.client.get(app.url("/openapi.json")).send().await.expect("openapi");
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    let doc: serde_json::Value = response.json().await.expect("json");
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.1")), "{}", doc["openapi"]);
    let routes = [
        ("/healthz", "get"),
        ("/readyz", "get"),
        ("/metrics", "get"),
        ("/openapi.json", "get"),
        ("/webhooks/whatsapp", "get"),
        ("/webhooks/whatsapp", "post"),
        ("/webhooks/whatsapp/{app}", "get"),
        ("/webhooks/whatsapp/{app}", "post"),
        ("/webhooks/twilio", "post"),
        ("/webhooks/twilio/status", "post"),
        ("/webhooks/standard/{source}", "post"),
        ("/hooks/wake", "post"),
        ("/hooks/agent", "post"),
        ("/hooks/{name}", "post"),
        ("/v1/commands", "get"),
        ("/v1/commands/{id}", "get"),
        ("/v1/commands/{id}/evidence", "get"),
        ("/v1/commands/{id}/recovery", "post"),
        ("/v1/commands/{id}/step-up", "post"),
        ("/v1/commands/{id}/acks", "post"),
        ("/v1/executors/{executor}/commands/{id}/acks", "post"),
        ("/v1/audit/verify", "get"),
        ("/v1/traces/{correlation_id}", "get"),
        ("/v1/agents", "get"),
        ("/v1/agents/{agent}/pause", "post"),
        ("/v1/agents/{agent}/resume", "post"),
        ("/v1/events", "get"),
    ];
    for (path, method) in routes {
        let operation = &doc["paths"][path][method];
        assert!(operation.is_object(), "{method} {path} is not documented");
        // Every `/v1` route takes a bearer token but the one executors sign with their secret.
        if path.starts_with("/v1/") && !path.starts_with("/v1/executors/") {
            for status in ["401", "403", "429"] {
                let problem = &operation["responses"][status]["content"]["application/problem+json"];
                assert!(problem.is_object(), "{method} {path}: {status} problem document");
            }
            assert!(operation["security"][0]["bearer"].is_array(), "{method} {path}: bearer scopes");
        }
    }
    assert_eq!(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
    // Generated clients name a method per operation id: each is unique (openapi-spec-validator
    // refuses the document otherwise; CI runs it too).
    let mut ids: Vec<&str> = doc["paths"]
        .as_object()
        .expect("paths")
        .values()
        .flat_map(|operations| operations.as_object().into_iter().flat_map(|o| o.values()))
        .filter_map(|operation| operation["operationId"].as_str())
        .collect();
    let count = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), count, "operation ids repeat: {ids:?}");
    assert!(count >= routes.len(), "every operation has an id ({count})");
    app.stop().await.expect("stop");
}
