//! The hookd compatibility bridge over HTTP: OpenClaw's documented payloads unchanged, both auth
//! headers, refusals that store nothing, a mapped hook, `Idempotency-Key` replay, and the answer
//! arriving before a slow executor has answered.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fake_executor::{FakeExecutor, Fault};
use crate::helpers::{TestApp, TestDb, on_both_backends, spawn_app_with, tenant};

on_both_backends!(
    the_documented_payloads_are_admitted,
    bad_calls_are_refused_and_store_nothing,
    a_mapped_hook_and_an_idempotency_key,
    the_answer_comes_before_a_slow_executor_answers,
    the_bridge_listens_under_its_configured_base_path,
    a_hook_call_the_registry_describes_keeps_its_value_rules,
);

const TOKEN: &str = "demo-hooks-token-change-me";

pub(crate) async fn call(
    app: &TestApp,
    path: &str,
    body: Value,
    auth: Option<(&str, String)>,
    key: Option<&str>,
) -> (StatusCode, Value, Option<String>) {
    let mut request = app.client.post(app.url(path)).json(&body);
    if let Some((name, value)) = auth {
        request = request.header(name, value);
    }
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    let response = request.send().await.expect("request");
    let location = response.headers().get("location").and_then(|v| v.to_str().ok()).map(str::to_owned);
    (response.status(), response.json().await.unwrap_or(Value::Null), location)
}

pub(crate) fn bearer() -> Option<(&'static str, String)> {
    Some(("authorization", format!("Bearer {TOKEN}")))
}

async fn state_of(db: &TestDb, id: &str) -> String {
    let command =
        db.store.commands().get(&tenant("demo"), id.parse().expect("uuid")).await.expect("read").expect("command");
    command.lifecycle.state.to_string()
}

async fn the_documented_payloads_are_admitted(db: &TestDb) {
    let mut config = db.config.clone();
    config.outbound.poll_interval_ms = 20;
    let app = spawn_app_with(db, config).await;
    let (status, body, location) =
        call(&app, "/hooks/wake", json!({"text": "New email received", "mode": "now"}), bearer(), None).await;
    // OpenClaw answers a wake 200 `{"ok": true, "mode": ...}`.
    assert_eq!((status, &body["ok"], &body["mode"]), (StatusCode::OK, &json!(true), &json!("now")), "{body}");
    let id = body["command_id"].as_str().expect("command id").to_owned();
    assert_eq!(body["status_url"], format!("/v1/commands/{id}"));
    assert_eq!(location.as_deref(), Some(format!("/v1/commands/{id}").as_str()));

    let agent = json!({
        "message": "Summarize inbox", "name": "Email", "agentId": "orders", "sessionKey": "hook:email:msg-123",
        "wakeMode": "now", "deliver": true, "channel": "whatsapp", "to": "+15551234567",
        "model": "openai/gpt-5.2-mini", "thinking": "low", "timeoutSeconds": 120,
    });
    let (status, body, _) = call(&app, "/hooks/agent", agent, Some(("x-openclaw-token", TOKEN.to_owned())), None).await;
    // An agent run is accepted: 202, as hookd's bridge answers (and OpenClaw at 013c24e7).
    assert_eq!((status, &body["ok"]), (StatusCode::ACCEPTED, &json!(true)), "{body}");
    let agent_id = body["command_id"].as_str().expect("command id").to_owned();
    assert_eq!(body["runId"], agent_id.as_str(), "OpenClaw's run id is the command");
    let command = db
        .store
        .commands()
        .get(&tenant("demo"), agent_id.parse().expect("uuid"))
        .await
        .expect("read")
        .expect("command");
    assert_eq!(command.envelope.actor_id.as_str(), "hookd-bridge");
    assert_eq!(command.envelope.args["sessionKey"], "hook:email:msg-123");
    assert_eq!(command.envelope.conversation_id.as_str(), "hooks:hook:email:msg-123");
    // `120.0` is the same whole number of seconds as `120` (JSON does not tell them apart).
    let whole = json!({"message": "Summarize inbox", "timeoutSeconds": 120.0});
    let (status, body, _) = call(&app, "/hooks/agent", whole, bearer(), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let whole_id = body["command_id"].as_str().expect("command id").parse().expect("uuid");
    let command = db.store.commands().get(&tenant("demo"), whole_id).await.expect("read").expect("command");
    assert_eq!(command.envelope.args["timeoutSeconds"], 120);

    // They follow the normal pipeline: dispatched to the agent and executed.
    let deadline = Instant::now() + Duration::from_secs(20);
    while state_of(db, &id).await != "executed" || state_of(db, &agent_id).await != "executed" {
        assert!(Instant::now() < deadline, "the hooks' commands did not execute");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    app.stop().await.expect("stop");
}

/// (what, path, body, auth header, expected status, problem code)
type Case = (&'static str, &'static str, Value, Option<(&'static str, String)>, StatusCode, &'static str);

async fn bad_calls_are_refused_and_store_nothing(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let cases: Vec<Case> = vec![
        (
            "token in the query",
            "/hooks/wake?token=demo-hooks-token-change-me",
            json!({"text": "x"}),
            None,
            StatusCode::BAD_REQUEST,
            "token_in_query",
        ),
        ("no token", "/hooks/wake", json!({"text": "x"}), None, StatusCode::UNAUTHORIZED, "unauthorized"),
        (
            "wrong token",
            "/hooks/wake",
            json!({"text": "x"}),
            Some(("authorization", "Bearer nope".into())),
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
        (
            "wrong openclaw token",
            "/hooks/agent",
            json!({"message": "x"}),
            Some(("x-openclaw-token", "nope".into())),
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
        ("no text", "/hooks/wake", json!({"mode": "now"}), bearer(), StatusCode::BAD_REQUEST, "invalid_body"),
        ("text not a string", "/hooks/wake", json!({"text": 5}), bearer(), StatusCode::BAD_REQUEST, "invalid_body"),
        (
            "unknown mode",
            "/hooks/wake",
            json!({"text": "x", "mode": "later"}),
            bearer(),
            StatusCode::BAD_REQUEST,
            "invalid_body",
        ),
        ("no message", "/hooks/agent", json!({"name": "x"}), bearer(), StatusCode::BAD_REQUEST, "invalid_body"),
        (
            "a session key with a space",
            "/hooks/agent",
            json!({"message": "x", "sessionKey": "hook email"}),
            bearer(),
            StatusCode::BAD_REQUEST,
            "invalid_body",
        ),
        (
            "deliver not a boolean",
            "/hooks/agent",
            json!({"message": "x", "deliver": "yes"}),
            bearer(),
            StatusCode::BAD_REQUEST,
            "invalid_body",
        ),
        ("not an object", "/hooks/agent", json!(["message"]), bearer(), StatusCode::BAD_REQUEST, "invalid_body"),
        (
            "an unknown agent",
            "/hooks/agent",
            json!({"message": "x", "agentId": "nobody"}),
            bearer(),
            StatusCode::BAD_REQUEST,
            "unknown_agent",
        ),
        (
            "half a destination",
            "/hooks/agent",
            json!({"message": "x", "channel": "whatsapp"}),
            bearer(),
            StatusCode::BAD_REQUEST,
            "invalid_destination",
        ),
        ("unknown hook", "/hooks/nope", json!({}), bearer(), StatusCode::NOT_FOUND, "not_found"),
    ];
    for (name, path, body, auth, expected, code) in cases {
        let (status, problem, _) = call(&app, path, body, auth, None).await;
        assert_eq!((status, problem["code"].as_str()), (expected, Some(code)), "{name}: {problem}");
    }
    let not_json = app.client.post(app.url("/hooks/wake")).bearer_auth(TOKEN).body("{").send().await.expect("request");
    assert_eq!(not_json.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM commands WHERE actor_id = $1", "hookd-bridge").await,
        0,
        "nothing stored"
    );
    app.stop().await.expect("stop");
}

async fn a_mapped_hook_and_an_idempotency_key(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let shipped = json!({"order": {"id": "A-7", "carrier": "ups"}, "event": "shipped"});
    let (status, body, _) = call(&app, "/hooks/order-shipped", shipped.clone(), bearer(), Some("ship-A-7")).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let id = body["command_id"].as_str().expect("id").to_owned();
    let command =
        db.store.commands().get(&tenant("demo"), id.parse().expect("uuid")).await.expect("read").expect("command");
    assert_eq!(
        (command.envelope.intent.entity.as_str(), command.envelope.intent.action.as_str()),
        ("order", "shipped")
    );
    assert_eq!(Value::Object(command.envelope.args.clone()), json!({"order_id": "A-7"}));
    assert_eq!(command.envelope.idempotency_key.as_str(), "ship-A-7");

    // The same call with the same key: the same command.
    let (status, again, _) = call(&app, "/hooks/order-shipped", shipped, bearer(), Some("ship-A-7")).await;
    assert_eq!((status, again["command_id"].as_str()), (StatusCode::ACCEPTED, Some(id.as_str())));
    // The same key for another call: refused.
    let other = json!({"order": {"id": "B-8"}});
    let (status, problem, _) = call(&app, "/hooks/order-shipped", other, bearer(), Some("ship-A-7")).await;
    assert_eq!((status, problem["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("idempotency_key_reused")));
    // A field the mapping needs is missing.
    let (status, _, _) = call(&app, "/hooks/order-shipped", json!({"order": {}}), bearer(), None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(db.count("SELECT COUNT(*) FROM commands WHERE actor_id = $1", "hookd-bridge").await, 1);
    app.stop().await.expect("stop");
}

async fn a_hook_call_the_registry_describes_keeps_its_value_rules(db: &TestDb) {
    let mut config = db.config.clone();
    let refund = chatgate::config::HookMapping {
        agent: "orders".into(),
        entity: "order".into(),
        action: "refund".into(),
        args: [("order_id".to_owned(), "/order".to_owned()), ("amount".to_owned(), "/amount".to_owned())].into(),
    };
    config.hooks.mappings.insert("refund".into(), refund);
    let app = spawn_app_with(db, config).await;
    for amount in [json!(-25), json!("0"), json!(25.999), json!("10000.01"), json!(true)] {
        let (status, problem, _) =
            call(&app, "/hooks/refund", json!({"order": "1234", "amount": amount}), bearer(), None).await;
        assert_eq!((status, problem["code"].as_str()), (StatusCode::BAD_REQUEST, Some("invalid_value")), "{amount}");
    }
    assert_eq!(
        db.count("SELECT COUNT(*) FROM commands WHERE actor_id = $1", "hookd-bridge").await,
        0,
        "nothing stored"
    );
    let (status, body, _) = call(&app, "/hooks/refund", json!({"order": "1234", "amount": 25.5}), bearer(), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    app.stop().await.expect("stop");
}

pub(crate) fn always_slow(_: u64) -> Fault {
    Fault::SlowAfterWork(Duration::from_millis(1500))
}

async fn the_answer_comes_before_a_slow_executor_answers(db: &TestDb) {
    let executor = FakeExecutor::start(always_slow).await;
    let mut config = db.config.clone();
    config.outbound.poll_interval_ms = 20;
    let orders = config.executors.get_mut("orders").expect("orders");
    orders.url = executor.url.clone();
    orders.request_timeout_ms = 5_000;
    let app = spawn_app_with(db, config).await;
    let started = Instant::now();
    let (status, body, _) = call(&app, "/hooks/wake", json!({"text": "slow work"}), bearer(), None).await;
    let answered_in = started.elapsed();
    assert_eq!(status, StatusCode::OK);
    assert!(answered_in < Duration::from_millis(1000), "answered in {answered_in:?}");
    let id = body["command_id"].as_str().expect("id").to_owned();
    // The executor is still working when the caller already has its answer.
    let deadline = Instant::now() + Duration::from_secs(20);
    while executor.calls() == 0 {
        assert!(Instant::now() < deadline, "the executor was not called");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(state_of(db, &id).await, "started");
    while state_of(db, &id).await != "executed" {
        assert!(Instant::now() < deadline, "the command did not execute");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    app.stop().await.expect("stop");
}

async fn the_bridge_listens_under_its_configured_base_path(db: &TestDb) {
    let mut config = db.config.clone();
    config.hooks.base_path = "/legacy/openclaw".into();
    let app = spawn_app_with(db, config).await;
    let wake = json!({"text": "New email received"});
    let (status, body, _) = call(&app, "/legacy/openclaw/wake", wake.clone(), bearer(), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let mapped = json!({"order": {"id": "A-1"}});
    let (status, body, _) = call(&app, "/legacy/openclaw/order-shipped", mapped, bearer(), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    // The default path is not served any more.
    assert_eq!(call(&app, "/hooks/wake", wake, bearer(), None).await.0, StatusCode::NOT_FOUND);
    // The OpenAPI document describes the paths the bridge listens on.
    let document: Value =
        app.client.get(app.url("/openapi.json")).send().await.expect("openapi").json().await.expect("json");
    let paths = document["paths"].as_object().expect("paths");
    assert!(paths.contains_key("/legacy/openclaw/wake") && paths.contains_key("/legacy/openclaw/{name}"), "{paths:?}");
    assert!(!paths.keys().any(|p| p.starts_with("/hooks")), "{:?}", paths.keys());
}
