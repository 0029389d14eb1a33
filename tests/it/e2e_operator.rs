//! The operator surface over HTTP: status, list, evidence, audit, recovery — with tenant
//! isolation, a stable cursor, every recovery action from every state, and a retry end to end.

use std::time::Duration;

use chatgate::domain::lifecycle::State;
use chatgate::domain::lifecycle::recovery::allowed;
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::conformance::{drive, path_to};
use crate::fake_graph::FakeServer;
use crate::helpers::{CUSTOMER, Meta, TestApp, TestDb, on_both_backends, refund, spawn_app_with, tenant};

on_both_backends!(
    a_canceled_started_command_is_announced_to_its_executor,
    a_declined_refund_is_reprocessed_from_its_stored_message,
    a_refund_is_compensated_and_both_commands_link_to_each_other,
    every_recovery_action_from_every_state_is_done_or_refused_with_the_allowed_list,
    status_list_evidence_and_audit_stay_within_the_tenant,
    a_failed_command_retried_by_an_operator_executes_once,
);

/// A step-up proof of the operator `ops-1` for acting on `id` (the development issuer).
pub async fn operator_step_up(db: &TestDb, id: Uuid) -> String {
    let settings = chatgate::service::Settings::with_shipped_registry(db.config.clone()).expect("settings");
    let key =
        db.store.commands().get(&tenant("demo"), id).await.expect("read").expect("command").envelope.idempotency_key;
    settings.security.stepup.mint("ops-1", id, key.as_str(), time::OffsetDateTime::now_utc()).expect("mint")
}

fn token(db: &TestDb, tenant: &str, scope: &str) -> String {
    crate::helpers::api_token(db, tenant, "ops-1", scope)
}

const SCOPES: &str = "commands:read recovery:write audit:read";

async fn get(app: &TestApp, token: &str, path: &str) -> (StatusCode, Value) {
    let response = app.client.get(app.url(path)).bearer_auth(token).send().await.expect("request");
    (response.status(), response.json().await.unwrap_or(Value::Null))
}

async fn recover(app: &TestApp, token: &str, id: Uuid, body: Value, key: Option<&str>) -> (StatusCode, Value) {
    recover_with(app, token, id, body, key, None).await
}

/// A recovery request whose body is `body` as written.
async fn recover_raw(app: &TestApp, token: &str, id: Uuid, body: &str, key: &str) -> (StatusCode, Value) {
    let request = app.client.post(app.url(&format!("/v1/commands/{id}/recovery"))).bearer_auth(token);
    let request = request.header("idempotency-key", key).header("content-type", "application/json");
    let response = request.body(body.to_owned()).send().await.expect("recovery request");
    (response.status(), response.json().await.unwrap_or(Value::Null))
}

async fn recover_with(
    app: &TestApp,
    token: &str,
    id: Uuid,
    body: Value,
    key: Option<&str>,
    step_up: Option<&str>,
) -> (StatusCode, Value) {
    let mut request = app.client.post(app.url(&format!("/v1/commands/{id}/recovery"))).bearer_auth(token).json(&body);
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    if let Some(step_up) = step_up {
        request = request.header("step-up", step_up);
    }
    let response = request.send().await.expect("request");
    (response.status(), response.json().await.unwrap_or(Value::Null))
}

async fn every_recovery_action_from_every_state_is_done_or_refused_with_the_allowed_list(db: &TestDb) {
    let mut config = db.config.clone();
    config.outbound.poll_interval_ms = 20;
    let app = spawn_app_with(db, config).await;
    let ops = token(db, "demo", SCOPES);
    let mut n = 0;
    for state in State::ALL.iter().filter(|s| **s != State::Received) {
        for action in ["retry", "cancel", "compensate", "reprocess"] {
            n += 1;
            let id = drive(db, refund("demo", &format!("r{n}"), "1.00", &format!("m{n}")), path_to(*state)).await;
            // Compensating a refund runs `refund_reversal`, a high-risk command: a step-up proof.
            let proof = operator_step_up(db, id).await;
            let step_up = (action == "compensate").then_some(proof.as_str());
            let body = json!({"action": action, "reason": "test"});
            let (status, body) = recover_with(&app, &ops, id, body, None, step_up).await;
            // A refund is compensable: the registry declares `refund_reversal`.
            // Driven through the engine, they carry no stored message: nothing to reprocess.
            let offered: Vec<&str> = allowed(*state, true, false).iter().map(|a| a.as_str()).collect();
            if offered.contains(&action) {
                assert_eq!(status, StatusCode::CREATED, "{action} from {state}: {body}");
                assert_eq!(body["target_command_id"], id.to_string());
                let after = db.store.commands().get(&tenant("demo"), id).await.expect("read").expect("command");
                match action {
                    "cancel" => assert_eq!(after.lifecycle.state, State::Canceled, "{state}"),
                    "retry" => assert_eq!(after.lifecycle.state, State::Failed, "a failed command stays failed"),
                    _ => {
                        // Compensated once the compensation has executed (the demo executor runs it).
                        let deadline = std::time::Instant::now() + Duration::from_secs(10);
                        while db
                            .store
                            .commands()
                            .get(&tenant("demo"), id)
                            .await
                            .expect("read")
                            .expect("c")
                            .lifecycle
                            .state
                            != State::Compensated
                        {
                            assert!(std::time::Instant::now() < deadline, "{state} was not compensated");
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                }
                let recovery: Uuid = body["recovery_command_id"].as_str().expect("id").parse().expect("uuid");
                let made = db.store.commands().get(&tenant("demo"), recovery).await.expect("read").expect("recovery");
                assert_eq!(made.envelope.target_command_id, Some(id), "it names its target");
            } else {
                assert_eq!(status, StatusCode::CONFLICT, "{action} from {state}");
                assert_eq!(body["code"], "recovery_not_allowed");
                assert_eq!(body["allowed"], json!(offered), "{action} from {state}");
            }
        }
    }
    let (status, body) = recover(&app, &ops, Uuid::now_v7(), json!({"action": "cancel"}), None).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")));
    let id = drive(db, refund("demo", "bad", "1.00", "mbad"), path_to(State::Started)).await;
    assert_eq!(recover(&app, &ops, id, json!({"action": "explode"}), None).await.0, StatusCode::BAD_REQUEST);
    app.stop().await.expect("stop");
}

async fn status_list_evidence_and_audit_stay_within_the_tenant(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let meta = Meta::new(&app, db);
    meta.text("wamid.L0", CUSTOMER, "refund 77 5").await;
    for n in 1..=3 {
        meta.text(&format!("wamid.L{n}"), CUSTOMER, &format!("order status {n}")).await;
    }
    let ops = token(db, "demo", SCOPES);
    let (_, page) = get(&app, &ops, "/v1/commands?command=refund").await;
    let refund_id = page["commands"][0]["command_id"].as_str().expect("the refund").to_owned();

    let (status, doc) = get(&app, &ops, &format!("/v1/commands/{refund_id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(doc["state"], "confirmation_required");
    assert_eq!(doc["terminal"], false);
    assert_eq!(doc["recovery_actions"], json!(["cancel"]));
    assert_eq!(doc["envelope"]["actor_id"], "*******0001", "personal data masked");
    assert!(!doc.to_string().contains(CUSTOMER), "the phone number appears nowhere");
    assert_eq!(doc["links"]["evidence"], format!("/v1/commands/{refund_id}/evidence"));
    assert!(doc["last_transition_at"].is_string() && doc["transitions"].is_array() && doc["deliveries"].is_array());

    // Another tenant sees nothing, everywhere.
    let stranger = token(db, "other", SCOPES);
    assert_eq!(get(&app, &stranger, &format!("/v1/commands/{refund_id}")).await.0, StatusCode::NOT_FOUND);
    assert_eq!(get(&app, &stranger, &format!("/v1/commands/{refund_id}/evidence")).await.0, StatusCode::NOT_FOUND);
    let id: Uuid = refund_id.parse().expect("uuid");
    assert_eq!(recover(&app, &stranger, id, json!({"action": "cancel"}), None).await.0, StatusCode::NOT_FOUND);
    assert_eq!(get(&app, &stranger, "/v1/commands").await.1["commands"], json!([]));
    let ack = app
        .client
        .post(app.url(&format!("/v1/commands/{id}/acks")))
        .bearer_auth(token(db, "other", "executions:write"))
        .json(&json!({"type": "delivery"}))
        .send()
        .await
        .expect("ack");
    assert_eq!(ack.status(), StatusCode::NOT_FOUND, "another tenant's executor cannot acknowledge it");

    // Pages stay stable while commands arrive.
    let (status, first) = get(&app, &ops, "/v1/commands?limit=2").await;
    assert_eq!(status, StatusCode::OK);
    let cursor = first["next_cursor"].as_str().expect("more").to_owned();
    for n in 4..=5 {
        meta.text(&format!("wamid.L{n}"), CUSTOMER, &format!("order status {n}")).await;
    }
    let (_, second) = get(&app, &ops, &format!("/v1/commands?limit=2&cursor={cursor}")).await;
    let ids = |page: &Value| {
        page["commands"]
            .as_array()
            .expect("items")
            .iter()
            .map(|c| c["command_id"].as_str().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
    };
    let (a, b) = (ids(&first), ids(&second));
    assert_eq!((a.len(), b.len()), (2, 2));
    assert!(a.iter().all(|id| !b.contains(id)), "no item twice");
    assert!(second["next_cursor"].is_null(), "the four older commands fill two pages exactly");
    let (_, newest) = get(&app, &ops, "/v1/commands?limit=2").await;
    assert!(ids(&newest).iter().all(|id| !a.contains(id)), "the new ones come first, on a new first page");

    // Filters, and bad ones.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while get(&app, &ops, "/v1/commands?state=executed").await.1["commands"].as_array().map(Vec::len) != Some(5) {
        assert!(std::time::Instant::now() < deadline, "the reads did not execute");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A state nothing has matches nothing; a malformed cursor or time is refused.
    assert_eq!(get(&app, &ops, "/v1/commands?state=nonsense").await.1["commands"], json!([]));
    assert_eq!(get(&app, &ops, "/v1/commands?cursor=nonsense").await.0, StatusCode::BAD_REQUEST);
    assert_eq!(get(&app, &ops, "/v1/commands?since=yesterday").await.0, StatusCode::BAD_REQUEST);
    assert_eq!(get(&app, &ops, "/v1/commands?limit=0").await.0, StatusCode::BAD_REQUEST);
    assert_eq!(get(&app, &ops, "/v1/commands?surprise=1").await.0, StatusCode::BAD_REQUEST);

    // Evidence and audit.
    let (status, evidence) = get(&app, &ops, &format!("/v1/commands/{refund_id}/evidence")).await;
    assert_eq!(status, StatusCode::OK);
    let kinds: Vec<&str> =
        evidence["artifacts"].as_array().expect("artifacts").iter().filter_map(|a| a["kind"].as_str()).collect();
    assert_eq!(kinds[..2], ["command.accepted", "command.confirmation.requested"]);
    let (status, audit) = get(&app, &ops, "/v1/audit/verify").await;
    assert_eq!((status, audit["intact"].clone()), (StatusCode::OK, json!(true)));
    assert_eq!(get(&app, &token(db, "demo", "commands:read"), "/v1/audit/verify").await.0, StatusCode::FORBIDDEN);
    app.stop().await.expect("stop");
}

async fn a_failed_command_retried_by_an_operator_executes_once(db: &TestDb) {
    let executor = FakeServer::executor().await;
    executor.answer_next(422, json!({"error": {"code": "order_locked"}}), None);
    executor.answer_next(200, json!({"status": "succeeded", "result": {"state": "shipped"}}), None);
    let mut config = db.config.clone();
    config.outbound.poll_interval_ms = 20;
    config.executors.get_mut("orders").expect("orders").url = executor.url.clone();
    let app = spawn_app_with(db, config).await;
    Meta::new(&app, db).text("wamid.F1", CUSTOMER, "order status 9").await;
    let ops = token(db, "demo", SCOPES);
    let wait_for = |path: String, state: &'static str| {
        let (app, ops) = (&app, &ops);
        async move {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            loop {
                let (_, doc) = get(app, ops, &path).await;
                if doc["state"] == state {
                    return doc;
                }
                assert!(std::time::Instant::now() < deadline, "{path} is {}", doc["state"]);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    let (_, page) = get(&app, &ops, "/v1/commands").await;
    let id = page["commands"][0]["command_id"].as_str().expect("the command").to_owned();
    let failed = wait_for(format!("/v1/commands/{id}"), "failed").await;
    assert_eq!(
        (failed["reason_code"].as_str(), failed["recovery_actions"].clone()),
        (Some("order_locked"), json!(["retry", "reprocess"]))
    );

    let target: Uuid = id.parse().expect("uuid");
    let (status, first) =
        recover(&app, &ops, target, json!({"action": "retry", "reason": "unlocked"}), Some("retry-9")).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    // The same request again: the same answer, nothing new.
    let (status, again) =
        recover(&app, &ops, target, json!({"action": "retry", "reason": "unlocked"}), Some("retry-9")).await;
    assert_eq!((status, &again), (StatusCode::CREATED, &first));
    // The same request written otherwise (spacing, member order): the same request, replayed.
    let respelled = r#"{ "reason" : "unlocked",  "action":"retry" }"#;
    let (status, again) = recover_raw(&app, &ops, target, respelled, "retry-9").await;
    assert_eq!((status, &again), (StatusCode::CREATED, &first), "the same request, not another");
    // The same key for another request: refused.
    let (status, other) = recover(&app, &ops, target, json!({"action": "cancel"}), Some("retry-9")).await;
    assert_eq!((status, other["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("idempotency_key_reused")));

    let retry = first["recovery_command_id"].as_str().expect("retry id").to_owned();
    wait_for(format!("/v1/commands/{retry}"), "executed").await;
    let calls = executor.exactly(2).await;
    assert_eq!(
        calls[0].headers["idempotency-key"], calls[1].headers["idempotency-key"],
        "the executor saw the same key"
    );
    let (_, target_doc) = get(&app, &ops, &format!("/v1/commands/{id}")).await;
    assert_eq!(target_doc["state"], "failed", "the failed command stays failed");
    assert_eq!(target_doc["recovery_commands"], json!([retry]));
    let (_, evidence) = get(&app, &ops, &format!("/v1/commands/{id}/evidence")).await;
    let linked =
        evidence["artifacts"].as_array().expect("artifacts").iter().any(|a| {
            a["kind"] == "recovery.requested" && a["body"]["decision"]["recovery_command_id"] == retry.as_str()
        });
    assert!(linked, "the failed command links to its retry");
    let (_, retry_doc) = get(&app, &ops, &format!("/v1/commands/{retry}")).await;
    assert_eq!(retry_doc["target_command_id"], id.as_str(), "and the retry to it");

    // The trace: the message, both commands, their moves and dispatches, in time order.
    let correlation = target_doc["envelope"]["correlation_id"].as_str().expect("correlation").to_owned();
    let (status, trace) = get(&app, &ops, &format!("/v1/traces/{correlation}")).await;
    assert_eq!(status, StatusCode::OK);
    let nodes = trace["nodes"].as_array().expect("nodes");
    let count = |kind: &str| nodes.iter().filter(|n| n["kind"] == kind).count();
    assert_eq!((count("message"), count("command"), count("delivery")), (1, 2, 2), "{trace}");
    assert!(count("transition") >= 8 && count("delivery_event") >= 6, "{trace}");
    let retry_node = nodes.iter().find(|n| n["id"] == format!("command:{retry}")).expect("the retry node");
    assert_eq!(retry_node["caused_by"], format!("command:{id}"), "the retry was caused by the failed command");
    let rfc3339 = &time::format_description::well_known::Rfc3339;
    let times: Vec<time::OffsetDateTime> = nodes
        .iter()
        .filter_map(|n| n["at"].as_str())
        .map(|t| time::OffsetDateTime::parse(t, rfc3339).expect("a time"))
        .collect();
    assert_eq!(times.len(), nodes.len());
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "a timeline");
    assert!(trace["edges"].as_array().is_some_and(|e| e.len() + 1 >= nodes.len()));
    let stranger = token(db, "other", SCOPES);
    assert_eq!(get(&app, &stranger, &format!("/v1/traces/{correlation}")).await.0, StatusCode::NOT_FOUND);
    app.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_metrics_scrape_parses_as_prometheus_text() {
    let db = TestDb::new(crate::helpers::Backend::Sqlite).await.expect("sqlite");
    let mut config = db.config.clone();
    config.outbound.poll_interval_ms = 20;
    let app = spawn_app_with(&db, config).await;
    let meta = Meta::new(&app, &db);
    meta.text("wamid.MX1", CUSTOMER, "order status 1").await;
    assert_eq!(meta.post_raw(b"{}".to_vec(), Some("sha256=00".into())).await.status(), StatusCode::UNAUTHORIZED);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while db.count("SELECT COUNT(*) FROM commands WHERE state = $1", "executed").await < 1 {
        assert!(std::time::Instant::now() < deadline, "the read did not execute");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let text = app.client.get(app.url("/metrics")).send().await.expect("scrape").text().await.expect("body");
    let scrape =
        prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).expect("Prometheus text format");
    let has = |name: &str, label: Option<(&str, &str)>| {
        scrape.samples.iter().any(|s| s.metric == name && label.is_none_or(|(k, v)| s.labels.get(k) == Some(v)))
    };
    for (name, label) in [
        ("chatgate_webhooks_total", Some(("outcome", "accepted"))),
        ("chatgate_webhooks_total", Some(("outcome", "bad_signature"))),
        ("chatgate_inbound_messages_total", Some(("outcome", "command"))),
        ("chatgate_transitions_total", Some(("to", "executed"))),
        ("chatgate_dispatch_attempts_total", Some(("executor", "orders"))),
        ("chatgate_outbox_pending", Some(("kind", "dispatch"))),
        ("chatgate_outbox_oldest_age_seconds", Some(("kind", "message"))),
        ("chatgate_agents", Some(("state", "paused"))),
        ("chatgate_deliveries", Some(("state", "executed"))),
        ("chatgate_completeness_ack_ratio", None),
        ("chatgate_completeness_result_ratio", None),
        ("chatgate_completeness_error_ratio", None),
        ("chatgate_orphaned_commands", None),
        ("chatgate_ack_latency_seconds_count", None),
        ("chatgate_result_latency_seconds_count", None),
    ] {
        assert!(has(name, label), "{name} {label:?} missing from the scrape");
    }
    let ack_rate =
        scrape.samples.iter().find(|s| s.metric == "chatgate_completeness_ack_ratio").map(|s| format!("{:?}", s.value));
    assert!(
        ack_rate.as_deref().is_some_and(|v| v.contains('1')),
        "one command dispatched and acknowledged: {ack_rate:?}"
    );
    app.stop().await.expect("stop");
}

/// Reads an SSE response until `n` events came (or the deadline passes): (id, data) pairs.
pub(crate) async fn read_events(response: &mut reqwest::Response, n: usize) -> Vec<(i64, Value)> {
    let mut buffer = String::new();
    let mut events = vec![];
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while events.len() < n {
        let remaining = deadline.saturating_duration_since(std::time::Instant::now());
        let chunk = tokio::time::timeout(remaining, response.chunk()).await.expect("events in time").expect("chunk");
        let Some(chunk) = chunk else { break };
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let field = |name: &str| block.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_owned());
            if let (Some(id), Some(data)) = (field("id:"), field("data:")) {
                events.push((id.parse().expect("numeric id"), serde_json::from_str(&data).expect("json data")));
            }
        }
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transitions_stream_as_server_sent_events_and_resume_from_the_last_id() {
    let db = TestDb::new(crate::helpers::Backend::Sqlite).await.expect("sqlite");
    let mut config = db.config.clone();
    config.outbound.poll_interval_ms = 20;
    let app = spawn_app_with(&db, config).await;
    let ops = token(&db, "demo", "commands:read");
    let mut stream = app.client.get(app.url("/v1/events")).bearer_auth(&ops).send().await.expect("stream");
    assert_eq!(stream.status(), StatusCode::OK);
    assert!(stream.headers()["content-type"].to_str().expect("ascii").starts_with("text/event-stream"));
    let mut stranger = app
        .client
        .get(app.url("/v1/events"))
        .bearer_auth(token(&db, "other", "commands:read"))
        .send()
        .await
        .expect("stream");

    Meta::new(&app, &db).text("wamid.EV1", CUSTOMER, "order status 1").await;
    // canonicalize, submit, allow, start, succeed
    let events = read_events(&mut stream, 5).await;
    let states: Vec<&str> = events.iter().filter_map(|(_, d)| d["transition"]["to"].as_str()).collect();
    assert_eq!(states, ["canonicalized", "authz_pending", "authorized", "started", "executed"]);
    assert!(events.windows(2).all(|w| w[0].0 < w[1].0), "ids only grow");

    // Reconnecting after the second event gets the rest, and nothing twice.
    let mut resumed = app
        .client
        .get(app.url("/v1/events"))
        .bearer_auth(&ops)
        .header("last-event-id", events[1].0.to_string())
        .send()
        .await
        .expect("stream");
    let rest = read_events(&mut resumed, 3).await;
    assert_eq!(
        rest.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        events[2..].iter().map(|(id, _)| *id).collect::<Vec<_>>()
    );

    // Another tenant's stream carries none of it.
    let nothing = tokio::time::timeout(Duration::from_millis(500), stranger.chunk()).await;
    assert!(
        nothing.is_err()
            || nothing
                .is_ok_and(|c| c.ok().flatten().is_none_or(|c| !String::from_utf8_lossy(&c).contains("transition")))
    );
    assert_eq!(
        app.client
            .get(app.url("/v1/events"))
            .bearer_auth(&ops)
            .header("last-event-id", "yesterday")
            .send()
            .await
            .expect("bad")
            .status(),
        StatusCode::BAD_REQUEST
    );
    // Open streams end when the server stops (no waiting out the grace period).
    let started = std::time::Instant::now();
    app.stop().await.expect("stop");
    assert!(started.elapsed() < Duration::from_secs(5), "stopped in {:?}", started.elapsed());
}

async fn a_refund_is_compensated_and_both_commands_link_to_each_other(db: &TestDb) {
    let mut config = db.config.clone();
    config.outbound.poll_interval_ms = 20;
    let app = spawn_app_with(db, config).await;
    let meta = Meta::new(&app, db);
    meta.text("wamid.CP1", CUSTOMER, "refund 1234 25.00").await;
    meta.text("wamid.CP2", CUSTOMER, "yes").await;
    let ops = token(db, "demo", SCOPES);
    let (_, page) = get(&app, &ops, "/v1/commands?command=refund").await;
    let id = page["commands"][0]["command_id"].as_str().expect("the refund").to_owned();
    let wait = |id: String, state: &'static str| {
        let (app, ops) = (&app, &ops);
        async move {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            loop {
                let (_, doc) = get(app, ops, &format!("/v1/commands/{id}")).await;
                if doc["state"] == state {
                    return doc;
                }
                assert!(std::time::Instant::now() < deadline, "{id} is {}", doc["state"]);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    let executed = wait(id.clone(), "executed").await;
    assert_eq!(executed["recovery_actions"], json!(["compensate"]));

    let target: Uuid = id.parse().expect("uuid");
    // The reversal is high risk: without a step-up proof, an RFC 9470 challenge.
    let response = app
        .client
        .post(app.url(&format!("/v1/commands/{target}/recovery")))
        .bearer_auth(&ops)
        .json(&json!({"action": "compensate"}))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    let challenge = response.headers()["www-authenticate"].to_str().expect("ascii").to_owned();
    assert!(challenge.contains("insufficient_user_authentication") && challenge.contains("acr_values="), "{challenge}");
    let proof = operator_step_up(db, target).await;
    let body = json!({"action": "compensate", "reason": "refunded twice"});
    let (status, made) = recover_with(&app, &ops, target, body.clone(), None, Some(&proof)).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    // The proof is used up: recorded as consumed in the step that started the compensation. (A
    // second request with it cannot show that reliably: once the dispatcher has run the
    // compensation, the target is `compensated` and the request is refused for its state first;
    // e2e_security proves a reused proof is refused.)
    assert_eq!(db.count("SELECT COUNT(*) FROM consumed_tokens WHERE jti <> $1", "").await, 1);
    let (status, again) = recover_with(&app, &ops, target, body, None, Some(&proof)).await;
    assert!(status.is_client_error(), "a second compensation with the same proof is refused: {again}");
    let compensation = made["recovery_command_id"].as_str().expect("id").to_owned();
    let done = wait(compensation.clone(), "executed").await;
    assert_eq!(done["envelope"]["intent"]["action"], "reverse_refund");
    assert_eq!(done["target_command_id"], id.as_str());
    let original = wait(id.clone(), "compensated").await;
    assert_eq!(original["recovery_actions"], json!([]), "nothing more to do");

    // Both chains linked: the original names its compensation, the compensation its target.
    let (_, evidence) = get(&app, &ops, &format!("/v1/commands/{id}/evidence")).await;
    let artifacts = evidence["artifacts"].as_array().expect("artifacts");
    let requested = artifacts.iter().find(|a| a["kind"] == "recovery.requested").expect("recovery.requested");
    assert_eq!(requested["body"]["decision"]["recovery_command_id"], compensation.as_str());
    let compensated =
        artifacts.iter().find(|a| a["kind"] == "compensation.compensated").expect("compensation.compensated");
    assert_eq!(compensated["body"]["decision"]["compensated_by"], compensation.as_str());
    let (_, theirs) = get(&app, &ops, &format!("/v1/commands/{compensation}/evidence")).await;
    let accepted = &theirs["artifacts"][0];
    assert_eq!(accepted["kind"], "command.accepted");
    let linked = theirs["artifacts"]
        .as_array()
        .expect("artifacts")
        .iter()
        .any(|a| a["body"]["decision"]["target_command_id"] == id.as_str());
    assert!(linked, "the compensation's evidence names its target");
    // Compensating again is one compensation: not allowed any more.
    let fresh = operator_step_up(db, target).await;
    let again = recover_with(&app, &ops, target, json!({"action": "compensate"}), None, Some(&fresh)).await;
    assert_eq!(again.0, StatusCode::CONFLICT);
    app.stop().await.expect("stop");
}

async fn a_declined_refund_is_reprocessed_from_its_stored_message(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let meta = Meta::new(&app, db);
    meta.text("wamid.RP1", CUSTOMER, "refund 55 9.99").await;
    meta.text("wamid.RP2", CUSTOMER, "no").await;
    let ops = token(db, "demo", SCOPES);
    let (_, page) = get(&app, &ops, "/v1/commands?command=refund").await;
    let id = page["commands"][0]["command_id"].as_str().expect("the refund").to_owned();
    let (_, doc) = get(&app, &ops, &format!("/v1/commands/{id}")).await;
    assert_eq!((doc["state"].as_str(), doc["recovery_actions"].clone()), (Some("canceled"), json!(["reprocess"])));

    let target: Uuid = id.parse().expect("uuid");
    let (status, made) =
        recover(&app, &ops, target, json!({"action": "reprocess", "reason": "asked again"}), None).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(made["state"], "confirmation_required", "interpreted again: a refund, to be confirmed again");
    let again = made["recovery_command_id"].as_str().expect("id").to_owned();
    let (_, new_doc) = get(&app, &ops, &format!("/v1/commands/{again}")).await;
    assert_eq!(new_doc["target_command_id"], id.as_str());
    assert_eq!(new_doc["envelope"]["args"], json!({"amount": "9.99", "order_id": "55"}));
    let prompts = db.outbox().await.into_iter().filter(|(_, p)| p["template"] == "confirmation_prompt").count();
    assert_eq!(prompts, 2, "the person is asked again");
    // While it runs, no second reprocess.
    assert_eq!(recover(&app, &ops, target, json!({"action": "reprocess"}), None).await.0, StatusCode::CONFLICT);
    app.stop().await.expect("stop");
}

async fn a_canceled_started_command_is_announced_to_its_executor(db: &TestDb) {
    let executor = FakeServer::executor().await;
    let mut config = db.config.clone();
    config.outbound.poll_interval_ms = 20;
    let orders = config.executors.get_mut("orders").expect("orders");
    orders.url = executor.url.clone();
    orders.cancel_url = Some(format!("{}/cancel", executor.url));
    let app = spawn_app_with(db, config).await;
    Meta::new(&app, db).text("wamid.CN1", CUSTOMER, "order status 3").await;
    executor.wait_for(1, Duration::from_secs(20)).await;
    let ops = token(db, "demo", SCOPES);
    let (_, page) = get(&app, &ops, "/v1/commands").await;
    let id: Uuid = page["commands"][0]["command_id"].as_str().expect("id").parse().expect("uuid");
    let (status, made) = recover(&app, &ops, id, json!({"action": "cancel", "reason": "customer called"}), None).await;
    assert_eq!((status, made["target_state"].as_str()), (StatusCode::CREATED, Some("canceled")), "{made}");
    let calls = executor.wait_for(2, Duration::from_secs(20)).await;
    assert_eq!(calls[1].path, "/cancel");
    assert_eq!(calls[1].body["command_id"], id.to_string());
    assert_eq!(calls[1].body["reason"], "customer called");
    assert_eq!(calls[1].headers["idempotency-key"], calls[0].headers["idempotency-key"]);
    assert!(calls[1].headers["webhook-signature"].starts_with("v1,"));
    app.stop().await.expect("stop");
}
