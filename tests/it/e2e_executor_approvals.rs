//! Executor-requested approvals (issue #46, workflow seed §6.10), on both backends: an HTTP
//! executor answers that the execution waits for approval — in its answer to the dispatch, or
//! later in an ACK —, the delivery waits while the command stays `started`, a supervisor approves
//! and the same executor is called again with the grant, under the same idempotency key and
//! delivery, and does the work once; a denial fails the command as `approval_rejected` without a
//! second call. The stand-in below does what a well-behaved executor does: it keeps each key's
//! waiting execution and finishes it only when the grant comes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::e2e_approvals::{decide, listed, replies_to, state_and_reason};
use crate::e2e_security::token_as;
use crate::helpers::{CUSTOMER, Meta, TestApp, TestDb, on_both_backends, settled, spawn_app_with, tenant};

on_both_backends!(
    an_executor_waiting_for_approval_is_resumed_with_the_same_key_and_delivery,
    a_denied_execution_fails_as_approval_rejected_without_another_call,
    a_waiting_ack_asks_for_approval_and_a_bad_one_changes_nothing,
    an_executor_that_gives_up_waiting_fails_the_command_and_closes_its_approval,
);

const SUPERVISOR: &str = "15550000003";
const DECIDE: &str = "approvals:read approvals:decide";

/// One call the stand-in received.
#[derive(Debug, Clone)]
struct Call {
    path: String,
    body: Value,
    key: String,
    delivery: String,
    webhook_id: String,
    approval: Value,
}

#[derive(Default)]
struct Ledger {
    calls: Vec<Call>,
    effects: BTreeMap<String, u32>,
}

/// An executor that waits for approval before any refund: `answer_waiting` says whether it says
/// so in its answer (else it answers 202 and the test ACKs).
#[derive(Clone)]
struct WaitingExecutor {
    url: String,
    ledger: Arc<Mutex<Ledger>>,
}

#[derive(Clone)]
struct Behaviour {
    ledger: Arc<Mutex<Ledger>>,
    answer_waiting: bool,
}

impl WaitingExecutor {
    async fn start(answer_waiting: bool) -> Self {
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let behaviour = Behaviour { ledger: ledger.clone(), answer_waiting };
        let app = Router::new().fallback(handle).with_state(behaviour);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let addr = listener.local_addr().expect("address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url: format!("http://{addr}/execute"), ledger }
    }

    /// The calls that handed a command over (or resumed it), not the notices.
    fn calls(&self) -> Vec<Call> {
        self.ledger.lock().expect("lock").calls.iter().filter(|c| c.path == "/execute").cloned().collect()
    }

    /// The notices of a canceled execution it was sent.
    fn cancels(&self) -> Vec<Value> {
        let calls = self.ledger.lock().expect("lock").calls.clone();
        calls.into_iter().filter(|c| c.path == "/cancel").map(|c| c.body).collect()
    }

    fn effects(&self) -> BTreeMap<String, u32> {
        self.ledger.lock().expect("lock").effects.clone()
    }
}

async fn handle(
    State(behaviour): State<Behaviour>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let envelope: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let call = Call {
        path: uri.path().to_owned(),
        body: envelope.clone(),
        key: header("idempotency-key"),
        delivery: header("x-chatgate-delivery-id"),
        webhook_id: header("webhook-id"),
        approval: envelope["approval"].clone(),
    };
    let mut ledger = behaviour.ledger.lock().expect("lock");
    ledger.calls.push(call.clone());
    if call.path == "/cancel" {
        return (StatusCode::OK, axum::Json(json!({})));
    }
    if call.approval["decision"] == "approved" {
        // Finished once per key, however often the grant comes.
        *ledger.effects.entry(call.key).or_default() += 1;
        let done = json!({"status": "succeeded", "result": {"refunded": envelope["args"]["amount"]}});
        return (StatusCode::OK, axum::Json(done));
    }
    if behaviour.answer_waiting {
        let waiting = json!({"status": "waiting", "waiting": {
            "reason": "over_daily_limit", "message": "over the shop's daily refund limit", "roles": ["supervisor"]}});
        return (StatusCode::OK, axum::Json(waiting));
    }
    (StatusCode::ACCEPTED, axum::Json(json!({})))
}

async fn with_executor(db: &TestDb, executor: &WaitingExecutor) -> TestApp {
    let mut config = db.config.clone();
    config.outbound.poll_interval_ms = 20;
    config.outbound.confirmation_sweep_ms = 50;
    let orders = config.executors.get_mut("orders").expect("orders");
    orders.url = executor.url.clone();
    orders.cancel_url = Some(executor.url.replace("/execute", "/cancel"));
    spawn_app_with(db, config).await
}

/// The customer's refund of 40.00 (within their own limit: no policy approval), confirmed.
async fn refund_confirmed(db: &TestDb, app: &TestApp) -> Uuid {
    let meta = Meta::new(app, db);
    assert_eq!(meta.text("wamid.X1", CUSTOMER, "refund 1234 40.00").await.status(), 200);
    let (id, _, code) = crate::helpers::confirmation_of(db, "wamid.X1").await;
    assert_eq!(meta.text("wamid.X1-yes", CUSTOMER, &format!("YES {code}")).await.status(), 200);
    id
}

/// Waits (20 s at most) until the command's delivery to `orders` is `want`; returns its state.
pub async fn delivery_reaches(db: &TestDb, id: Uuid, want: &str) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let delivery = db.store.deliveries().get(id, "orders").await.expect("read");
        let state = delivery.map(|d| d.state.to_string()).unwrap_or_default();
        if state == want || std::time::Instant::now() > deadline {
            return state;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

async fn an_executor_waiting_for_approval_is_resumed_with_the_same_key_and_delivery(db: &TestDb) {
    let executor = WaitingExecutor::start(true).await;
    let app = with_executor(db, &executor).await;
    let id = refund_confirmed(db, &app).await;
    assert_eq!(delivery_reaches(db, id, "waiting").await, "waiting");
    assert_eq!(state_and_reason(db, id).await.0, "started", "the command stays within the SMCL's states");
    // The requester is told by whom it waits; each supervisor is asked, with the executor's reason.
    let told = replies_to(db, CUSTOMER).await;
    assert!(told.iter().any(|(t, v)| t == "approval_required" && v["roles"] == json!(["supervisor"])), "{told:?}");
    let asked = replies_to(db, SUPERVISOR).await;
    let (_, request) = asked.iter().find(|(t, _)| t == "approval_request").expect("the supervisor is asked");
    assert_eq!(request["rules"], json!(["over the shop's daily refund limit"]));

    let supervisor = token_as(&db.config, SUPERVISOR, DECIDE);
    let approval = listed(&app, &supervisor, id).await;
    assert_eq!(approval["asked_by"]["origin"], "executor", "{approval}");
    assert_eq!(approval["asked_by"]["wait"]["reason"], "over_daily_limit");
    let (status, answer) = decide(&app, &supervisor, &approval, "approve").await;
    assert_eq!((status, answer["outcome"].as_str()), (StatusCode::OK, Some("approved")), "{answer}");
    assert_eq!(settled(db, id).await, "executed");

    // Called twice: the hand-over and the resume, the same key and delivery, two messages.
    let calls = executor.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!((&calls[0].key, &calls[0].delivery), (&calls[1].key, &calls[1].delivery));
    assert!(!calls[0].delivery.is_empty());
    assert_ne!(calls[0].webhook_id, calls[1].webhook_id, "the resume is a message of its own");
    assert_eq!(calls[1].approval["approvers"][0]["approver"], SUPERVISOR);
    assert_eq!(calls[1].approval["approval_id"], approval["approval_id"]);
    assert_eq!(executor.effects().into_values().collect::<Vec<_>>(), [1], "one effect");
    let told: Vec<String> = replies_to(db, CUSTOMER).await.into_iter().map(|(t, _)| t).collect();
    assert!(told.contains(&"executed".to_owned()), "{told:?}");
    // The delivery's log: waiting, then resumed, then executed; the chain holds and verifies.
    let log = db.store.deliveries().log(calls_delivery(db, id).await).await.expect("log");
    let events: Vec<&str> = log.iter().map(|(event, _)| event.as_str()).collect();
    assert!(events.windows(2).any(|w| w == ["execution_ack_waiting", "approval_granted"]), "{events:?}");
    let kinds: Vec<String> =
        db.store.evidence().for_command("demo", id).await.expect("evidence").into_iter().map(|a| a.kind).collect();
    assert!(kinds.contains(&"approval.requested".to_owned()) && kinds.contains(&"approval.decided".to_owned()));
    assert!(db.store.evidence().verify().await.expect("audit").first_break.is_none());
    app.stop().await.expect("stop");
}

/// A bus agent's waiting execution of `id`, approved by a supervisor over the API: what a test of
/// each transport does between the agent's `waiting` and its resumed command.
pub async fn supervisor_approves_the_wait(db: &TestDb, app: &TestApp, id: Uuid) {
    assert_eq!(delivery_reaches(db, id, "waiting").await, "waiting");
    assert_eq!(state_and_reason(db, id).await.0, "started");
    let supervisor = token_as(&db.config, SUPERVISOR, DECIDE);
    let approval = listed(app, &supervisor, id).await;
    assert_eq!(approval["asked_by"]["origin"], "executor", "{approval}");
    let (status, answer) = decide(app, &supervisor, &approval, "approve").await;
    assert_eq!((status, answer["outcome"].as_str()), (StatusCode::OK, Some("approved")), "{answer}");
}

async fn calls_delivery(db: &TestDb, id: Uuid) -> Uuid {
    db.store.deliveries().get(id, "orders").await.expect("read").expect("delivery").id
}

async fn a_denied_execution_fails_as_approval_rejected_without_another_call(db: &TestDb) {
    let executor = WaitingExecutor::start(true).await;
    let app = with_executor(db, &executor).await;
    let id = refund_confirmed(db, &app).await;
    assert_eq!(delivery_reaches(db, id, "waiting").await, "waiting");
    let supervisor = token_as(&db.config, SUPERVISOR, DECIDE);
    let approval = listed(&app, &supervisor, id).await;
    let (status, answer) = decide(&app, &supervisor, &approval, "deny").await;
    assert_eq!((status, answer["outcome"].as_str()), (StatusCode::OK, Some("denied")), "{answer}");
    assert_eq!(settled(db, id).await, "failed");
    assert_eq!(state_and_reason(db, id).await.1.as_deref(), Some("approval_rejected"));
    assert_eq!(executor.calls().len(), 1, "never resumed");
    assert!(executor.effects().is_empty());
    // Told, as of a cancel, so that it drops the execution it kept.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while executor.cancels().is_empty() {
        assert!(std::time::Instant::now() < deadline, "the executor was never told");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let notice = &executor.cancels()[0];
    assert_eq!(
        (notice["command_id"].as_str(), notice["reason"].as_str()),
        (Some(id.to_string().as_str()), Some("approval_rejected"))
    );
    let told = replies_to(db, CUSTOMER).await;
    assert!(told.iter().any(|(t, _)| t == "failed"), "{told:?}");
    // A decision after the end changes nothing.
    let late = decide(&app, &token_as(&db.config, "15550000004", DECIDE), &approval, "approve").await;
    assert_eq!(late.0, StatusCode::CONFLICT);
    app.stop().await.expect("stop");
}

async fn ack(db: &TestDb, app: &TestApp, id: Uuid, body: Value) -> (StatusCode, Value) {
    let token = crate::helpers::api_token(db, "demo", "orders-executor", "executions:write");
    let url = app.url(&format!("/v1/commands/{id}/acks"));
    let response = app.client.post(url).bearer_auth(token).json(&body).send().await.expect("ack");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn a_waiting_ack_asks_for_approval_and_a_bad_one_changes_nothing(db: &TestDb) {
    let executor = WaitingExecutor::start(false).await;
    let app = with_executor(db, &executor).await;
    let id = refund_confirmed(db, &app).await;
    assert_eq!(delivery_reaches(db, id, "delivered").await, "delivered");
    // A `waiting` that does not read is refused whole: 400, nothing moved.
    let (status, _) =
        ack(db, &app, id, json!({"type": "execution", "status": "waiting", "waiting": {"role": "x"}})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(delivery_reaches(db, id, "delivered").await, "delivered");
    // The seed's `waiting("approval_required")`: the command's own approvers are asked. A whole
    // float is an integer to JSON Schema, so `86400.0` is read as the `within_secs` it is.
    let waiting = json!({"type": "execution", "status": "waiting", "waiting": {"within_secs": 86400.0}});
    let (status, answer) = ack(db, &app, id, waiting).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(delivery_reaches(db, id, "waiting").await, "waiting");
    let (status, answer) = ack(db, &app, id, json!({"type": "execution", "status": "waiting"})).await;
    assert_eq!((status, answer["duplicate"].as_bool()), (StatusCode::OK, Some(true)), "{answer}");
    assert_eq!(db.count("SELECT COUNT(*) FROM approvals WHERE origin = $1", "executor").await, 1, "asked once");
    let supervisor = token_as(&db.config, SUPERVISOR, DECIDE);
    let approval = listed(&app, &supervisor, id).await;
    assert_eq!(approval["asked_by"]["wait"]["reason"], "approval_required");
    assert_eq!(approval["asked_by"]["wait"]["within_secs"], 86400);
    assert_eq!(decide(&app, &supervisor, &approval, "approve").await.0, StatusCode::OK);
    assert_eq!(delivery_reaches(db, id, "executed").await, "executed");
    assert_eq!(settled(db, id).await, "executed");
    assert_eq!(executor.effects().into_values().collect::<Vec<_>>(), [1]);
    app.stop().await.expect("stop");
}

async fn an_executor_that_gives_up_waiting_fails_the_command_and_closes_its_approval(db: &TestDb) {
    let executor = WaitingExecutor::start(true).await;
    let app = with_executor(db, &executor).await;
    let id = refund_confirmed(db, &app).await;
    assert_eq!(delivery_reaches(db, id, "waiting").await, "waiting");
    // It may not succeed before the grant; it may give up.
    let early = json!({"type": "execution", "status": "succeeded", "result": {}});
    assert_eq!(ack(db, &app, id, early).await.0, StatusCode::CONFLICT);
    let gave_up = json!({"type": "execution", "status": "failed", "error": {"code": "order_locked"}});
    assert_eq!(ack(db, &app, id, gave_up).await.0, StatusCode::OK);
    assert_eq!(settled(db, id).await, "failed");
    assert_eq!(state_and_reason(db, id).await.1.as_deref(), Some("order_locked"));
    let approval = db.store.approvals().of_command(&tenant("demo"), id).await.expect("read").expect("approval");
    assert_eq!(approval.status.as_str(), "closed", "nothing waits for it any more");
    app.stop().await.expect("stop");
}
