//! Issue 30.2: OpenClaw's newest hook contract, call by call, each with the status and the fields
//! the reference gives. Written from openclaw/openclaw `docs/gateway/config-hooks.md` at commit
//! 256572fd05f9467dad0e848fd0e756653401f085 ("Hook HTTP contract", "Hook agent payload", "Hook
//! retries and fan-out"), against a gateway set to answer as newest OpenClaw does
//! (`hooks.accepted_status = 200`; 202 by default, as hookd's bridge answers). Where chatgate
//! differs (a key reused for another call: 422, as its own idempotency promise says; `"channel":
//! "last"`, which earlier OpenClaw took, taken: `e2e_hook_callers`), docs/REFERENCE.md says so.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::e2e_hooks::{always_slow, bearer, call};
use crate::fake_executor::FakeExecutor;
use crate::helpers::{TestApp, TestDb, on_both_backends, spawn_app_with, tenant};

on_both_backends!(
    wakes_are_queued_or_coalesced_and_agent_runs_are_admitted_with_200,
    a_retry_under_any_replay_key_is_one_run,
    agent_destinations_and_timeouts_follow_the_payload_contract,
    wait_for_completion_answers_with_the_outcome,
    failed_authentications_are_throttled_after_twenty_in_a_minute,
);

/// The test database's configuration, answering accepted calls 200 as newest OpenClaw does.
fn newest(db: &TestDb) -> chatgate::config::Config {
    let mut config = db.config.clone();
    config.hooks.accepted_status = chatgate::config::AcceptedStatus::Ok;
    config
}

async fn commands(db: &TestDb) -> i64 {
    db.count("SELECT COUNT(*) FROM commands WHERE actor_id = $1", "hookd-bridge").await
}

/// A gateway whose default hook agent (`orders`) answers slowly, so that a wake still waits.
async fn slow_agent(db: &TestDb) -> (TestApp, FakeExecutor) {
    let executor = FakeExecutor::start(always_slow).await;
    let mut config = newest(db);
    let orders = config.executors.get_mut("orders").expect("orders");
    orders.url = executor.url.clone();
    orders.request_timeout_ms = 5_000;
    (spawn_app_with(db, config).await, executor)
}

async fn wakes_are_queued_or_coalesced_and_agent_runs_are_admitted_with_200(db: &TestDb) {
    let (app, _executor) = slow_agent(db).await;
    // `POST /hooks/wake` returns `200 { ok: true, mode, eventOutcome }`.
    let wake = json!({"text": "New email received", "mode": "now"});
    let (status, first, _) = call(&app, "/hooks/wake", wake.clone(), bearer(), None).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!((&first["ok"], &first["mode"], &first["eventOutcome"]), (&json!(true), &json!("now"), &json!("queued")));
    // The same wake while it is the most recent pending one: coalesced into it.
    let (status, again, _) = call(&app, "/hooks/wake", wake, bearer(), None).await;
    assert_eq!((status, &again["eventOutcome"]), (StatusCode::OK, &json!("coalesced")), "{again}");
    assert_eq!(again["runId"], first["runId"]);
    let (_, other, _) = call(&app, "/hooks/wake", json!({"text": "Another event"}), bearer(), None).await;
    assert_eq!(other["eventOutcome"], "queued");
    // `POST /hooks/agent`: `200 { ok: true, runId }` after admission.
    let (status, run, _) = call(&app, "/hooks/agent", json!({"message": "Summarize inbox"}), bearer(), None).await;
    assert_eq!((status, &run["ok"]), (StatusCode::OK, &json!(true)), "{run}");
    assert!(run["runId"].as_str().is_some_and(|id| id.parse::<uuid::Uuid>().is_ok()), "{run}");
    // `agentId` must name a configured agent when supplied directly: 400 before anything runs.
    let unknown = json!({"message": "hi", "agentId": "nobody"});
    let (status, problem, _) = call(&app, "/hooks/agent", unknown, bearer(), None).await;
    assert_eq!((status, problem["code"].as_str()), (StatusCode::BAD_REQUEST, Some("unknown_agent")));
    // A mapped hook: 200 with the run.
    let (status, mapped, _) = call(&app, "/hooks/order-shipped", json!({"order": {"id": "A-9"}}), bearer(), None).await;
    assert_eq!((status, &mapped["ok"]), (StatusCode::OK, &json!(true)), "{mapped}");
    assert_eq!(commands(db).await, 4, "two wakes, a run, a mapped hook");
    app.stop().await.expect("stop");
}

async fn a_retry_under_any_replay_key_is_one_run(db: &TestDb) {
    let app = spawn_app_with(db, newest(db)).await;
    let run = json!({"message": "Ship order 7"});
    // `Idempotency-Key`, then `X-OpenClaw-Idempotency-Key`, then the body's `idempotencyKey`.
    let send = |headers: Vec<(&'static str, &'static str)>, body: Value| {
        let mut request =
            app.client.post(app.url("/hooks/agent")).bearer_auth("demo-hooks-token-change-me").json(&body);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request.send()
    };
    let mut runs = vec![];
    for _ in 0..2 {
        let answer = send(vec![("x-openclaw-idempotency-key", "oc-7")], run.clone()).await.expect("call");
        assert_eq!(answer.status(), StatusCode::OK);
        runs.push(answer.json::<Value>().await.expect("json")["runId"].clone());
    }
    assert_eq!(runs[0], runs[1], "X-OpenClaw-Idempotency-Key replays the run");
    let keyed = json!({"message": "Ship order 8", "idempotencyKey": "body-8"});
    let one = send(vec![], keyed.clone()).await.expect("call").json::<Value>().await.expect("json");
    // A retry may change `waitForCompletion` and still replay.
    let mut waiting = keyed.clone();
    waiting["waitForCompletion"] = json!(false);
    let two = send(vec![], waiting).await.expect("call").json::<Value>().await.expect("json");
    assert_eq!(one["runId"], two["runId"], "the body's idempotencyKey replays the run");
    assert_eq!(commands(db).await, 2);
    // A key too long to be one is ignored: every call runs.
    let long = json!({"message": "Ship order 9", "idempotencyKey": "k".repeat(257)});
    send(vec![], long.clone()).await.expect("call");
    send(vec![], long).await.expect("call");
    assert_eq!(commands(db).await, 4);
    app.stop().await.expect("stop");
}

async fn agent_destinations_and_timeouts_follow_the_payload_contract(db: &TestDb) {
    let app = spawn_app_with(db, newest(db)).await;
    // A direct destination is `channel` with `to`; `accountId` needs both.
    for (body, what) in [
        (json!({"message": "m", "channel": "whatsapp"}), "a channel without its to"),
        (json!({"message": "m", "to": "+15551234567"}), "a to without its channel"),
        (json!({"message": "m", "accountId": "work"}), "an account without a destination"),
    ] {
        let (status, problem, _) = call(&app, "/hooks/agent", body, bearer(), None).await;
        assert_eq!(
            (status, problem["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some("invalid_destination")),
            "{what}"
        );
    }
    assert_eq!(commands(db).await, 0, "refused before dispatch: nothing stored");
    let whole = json!({"message": "m", "channel": "whatsapp", "to": "+15551234567"});
    assert_eq!(call(&app, "/hooks/agent", whole, bearer(), None).await.0, StatusCode::OK);
    let undelivered = json!({"message": "m", "to": "+15551234567", "deliver": false});
    assert_eq!(call(&app, "/hooks/agent", undelivered, bearer(), None).await.0, StatusCode::OK);
    // `timeoutSeconds`: floored; a non-positive or non-numeric one is ignored.
    for (timeout, kept) in [(json!(2.7), Some(json!(2))), (json!(0), None), (json!(-3), None), (json!("30"), None)] {
        let (status, body, _) =
            call(&app, "/hooks/agent", json!({"message": "t", "timeoutSeconds": timeout}), bearer(), None).await;
        assert_eq!(status, StatusCode::OK, "{timeout}: {body}");
        let id = body["runId"].as_str().expect("run").parse().expect("uuid");
        let command = db.store.commands().get(&tenant("demo"), id).await.expect("read").expect("command");
        assert_eq!(command.envelope.args.get("timeoutSeconds").cloned(), kept, "{timeout}");
    }
    app.stop().await.expect("stop");
}

async fn wait_for_completion_answers_with_the_outcome(db: &TestDb) {
    let mut config = db.config.clone();
    config.outbound.poll_interval_ms = 20;
    let app = spawn_app_with(db, config).await;
    let started = Instant::now();
    let waiting = json!({"message": "Ship order 3", "waitForCompletion": true});
    let (status, body, _) = call(&app, "/hooks/agent", waiting, bearer(), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["completion"], json!({"status": "ok", "state": "executed"}), "{body}");
    assert!(started.elapsed() < Duration::from_secs(30));
    // Its agent paused (it holds the command until resumed): answered at once, `pending`, and
    // (with the default `hooks.accepted_status`) 202: taken, not done.
    let admin = crate::helpers::api_token(db, "demo", "ops", "agents:admin");
    let paused = app.client.post(app.url("/v1/agents/orders/pause")).bearer_auth(admin).send().await.expect("pause");
    assert_eq!(paused.status(), StatusCode::OK);
    let started = Instant::now();
    let held = json!({"message": "Ship order 4", "waitForCompletion": true});
    let (status, body, _) = call(&app, "/hooks/agent", held, bearer(), None).await;
    assert_eq!((status, &body["completion"]["status"]), (StatusCode::ACCEPTED, &json!("pending")), "{body}");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    app.stop().await.expect("stop");
}

async fn failed_authentications_are_throttled_after_twenty_in_a_minute(db: &TestDb) {
    let app = spawn_app_with(db, newest(db)).await;
    let wrong = || Some(("authorization", "Bearer not-the-token".to_owned()));
    for attempt in 1..=20 {
        let (status, _, _) = call(&app, "/hooks/wake", json!({"text": "x"}), wrong(), None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "attempt {attempt}");
    }
    let throttled = app
        .client
        .post(app.url("/hooks/wake"))
        .bearer_auth("not-the-token")
        .json(&json!({"text": "x"}))
        .send()
        .await
        .expect("call");
    assert_eq!(throttled.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = throttled.headers()["retry-after"].to_str().expect("ascii").parse().expect("seconds");
    assert!((1..=60).contains(&wait), "{wait}");
    // A valid token is not throttled, and clears the count.
    assert_eq!(call(&app, "/hooks/wake", json!({"text": "x"}), bearer(), None).await.0, StatusCode::OK);
    assert_eq!(call(&app, "/hooks/wake", json!({"text": "x"}), wrong(), None).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(commands(db).await, 1);
    app.stop().await.expect("stop");
}
