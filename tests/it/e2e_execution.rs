//! Execution under faults, with the real binary: an executor that fails on a schedule, a gateway
//! killed (SIGKILL) in the middle of dispatching and started again, two gateways sharing one
//! PostgreSQL. Every command must end in a terminal state whose reason says what happened, and
//! every effect must happen exactly once.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::fake_executor::{FakeExecutor, Fault};
use crate::helpers::{Backend, CUSTOMER, DEMO_NUMBER, TestDb};

const APP_SECRET: &str = "demo-whatsapp-app-secret";

/// A `chatgate serve` process with its own configuration, on a port it chooses.
struct Gateway {
    process: crate::process::Gateway,
    client: reqwest::Client,
}

impl Gateway {
    async fn start(folder: &Path, name: &str, database_url: &str, executor_url: &str) -> Self {
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR"));
        let config = format!(
            r#"
[server]
shutdown_grace_ms = 2000
[storage]
database_url = "{database_url}"
max_connections = 8
[registry]
commands = "{commands}"
directory = "{directory}"
templates = "{templates}"
[whatsapp.apps.default]
app_secret = "{APP_SECRET}"
verify_token = "demo-verify-token"
[outbound]
poll_interval_ms = 20
[rate_limits]
actor = {{ per_minute = 1000000, burst = 100000 }}
tenant = {{ per_minute = 1000000, burst = 100000 }}
[executors.gateway]
url = "builtin:gateway"
[executors.orders]
url = "{executor_url}"
request_timeout_ms = 500
max_attempts = 20
backoff_initial_ms = 20
backoff_max_ms = 100
"#,
            commands = shipped.join("config/commands.toml").display(),
            directory = shipped.join("config/directory.toml").display(),
            templates = shipped.join("templates").display(),
        );
        let path = folder.join(format!("{name}.toml"));
        std::fs::write(&path, config).expect("config file");
        Self { process: crate::process::start(&path, &[]).await, client: reqwest::Client::new() }
    }

    async fn ask(&self, id: &str, text: &str) {
        use chatgate::channels::whatsapp::signature;
        use chatgate::channels::whatsapp::simulate;
        let body = simulate::notification(DEMO_NUMBER, vec![simulate::text(id, CUSTOMER, text)], vec![]).to_string();
        let signature = signature::sign(APP_SECRET.as_bytes(), body.as_bytes());
        let response = self
            .client
            .post(self.process.url("/webhooks/whatsapp"))
            .header("x-hub-signature-256", signature)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("webhook");
        assert_eq!(response.status(), 200);
    }

    /// SIGKILL: no grace, no cleanup, leases left held.
    fn kill(mut self) {
        self.process.kill();
    }
}

/// Every command's (order id, state, reason, idempotency key), once all are terminal.
async fn settled(db: &TestDb, expected: usize) -> Vec<(String, String, Option<String>, String)> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let mut conn = db.raw().await;
        let rows = sqlx::query("SELECT args, state, reason_code, idempotency_key FROM commands")
            .fetch_all(&mut conn)
            .await
            .expect("commands");
        let all: Vec<(String, String, Option<String>, String)> = rows
            .iter()
            .map(|row| {
                let args: String = sqlx::Row::try_get(row, 0).expect("args");
                let args: Value = serde_json::from_str(&args).expect("json");
                (
                    args["order_id"].as_str().unwrap_or_default().to_owned(),
                    sqlx::Row::try_get(row, 1).expect("state"),
                    sqlx::Row::try_get(row, 2).expect("reason"),
                    sqlx::Row::try_get(row, 3).expect("key"),
                )
            })
            .collect();
        let terminal = all
            .iter()
            .filter(|(_, s, _, _)| ["executed", "failed", "rejected", "canceled"].contains(&s.as_str()))
            .count();
        if all.len() == expected && terminal == expected {
            return all;
        }
        assert!(Instant::now() < deadline, "{terminal} of {} commands terminal ({expected} expected)", all.len());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Each command ended as its order says, and each executed one had exactly one effect.
fn check_outcomes(commands: &[(String, String, Option<String>, String)], executor: &FakeExecutor) {
    let effects = executor.effects();
    for (order, state, reason, key) in commands {
        let expected: (&str, Option<&str>) = if order.ends_with("13") {
            ("failed", Some("unknown_order"))
        } else if order.ends_with("99") {
            ("failed", Some("DELIVERY_TIMEOUT"))
        } else {
            ("executed", None)
        };
        assert_eq!((state.as_str(), reason.as_deref()), expected, "order {order}");
        let effect = effects.get(key).copied().unwrap_or(0);
        assert_eq!(effect, u32::from(expected.0 == "executed"), "order {order}: effects");
    }
    assert!(effects.values().all(|n| *n == 1));
}

fn faulty(n: u64) -> Fault {
    match n {
        n if n % 11 == 0 => Fault::Drop,
        n if n % 7 == 0 => Fault::SlowAfterWork(Duration::from_millis(1200)),
        n if n % 5 == 0 => Fault::ServerError,
        _ => Fault::None,
    }
}

async fn exactly_once_under_faults_and_a_kill(db: &TestDb) {
    let executor = FakeExecutor::start(faulty).await;
    let folder = tempfile::tempdir().expect("tempdir");
    let first = Gateway::start(folder.path(), "first", &db.url, &executor.url).await;
    for n in 1..=200 {
        first.ask(&format!("wamid.F{n}"), &format!("order status {n}")).await;
    }
    // Killed in the middle of dispatching: rows claimed and calls under way are left as they are.
    let deadline = Instant::now() + Duration::from_secs(30);
    while executor.calls() < 60 {
        assert!(Instant::now() < deadline, "the executor was not called");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    first.kill();
    let second = Gateway::start(folder.path(), "second", &db.url, &executor.url).await;
    let commands = settled(db, 200).await;
    check_outcomes(&commands, &executor);
    assert!(executor.calls() > 200, "faults made the gateway retry ({} calls)", executor.calls());
    drop(second);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_once_effects_under_faults_and_a_killed_gateway_sqlite() {
    let db = TestDb::new(Backend::Sqlite).await.expect("sqlite");
    exactly_once_under_faults_and_a_kill(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_once_effects_under_faults_and_a_killed_gateway_postgres() {
    let Some(db) = TestDb::new(Backend::Postgres).await else { return };
    exactly_once_under_faults_and_a_kill(&db).await;
}

/// Only failures that do not leave a call running: a dispatch is never running twice at once.
fn failing_fast(n: u64) -> Fault {
    match n {
        n if n % 11 == 0 => Fault::Drop,
        n if n % 5 == 0 => Fault::ServerError,
        _ => Fault::None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_gateways_on_one_postgres_dispatch_each_command_once() {
    let Some(db) = TestDb::new(Backend::Postgres).await else { return };
    let executor = FakeExecutor::start(failing_fast).await;
    let folder = tempfile::tempdir().expect("tempdir");
    let a = Gateway::start(folder.path(), "a", &db.url, &executor.url).await;
    let b = Gateway::start(folder.path(), "b", &db.url, &executor.url).await;
    let (ga, gb) = (&a, &b);
    tokio::join!(
        async {
            for n in (1..=500).step_by(2) {
                ga.ask(&format!("wamid.A{n}"), &format!("order status {n}")).await;
            }
        },
        async {
            for n in (2..=500).step_by(2) {
                gb.ask(&format!("wamid.B{n}"), &format!("order status {n}")).await;
            }
        }
    );
    let commands = settled(&db, 500).await;
    check_outcomes(&commands, &executor);
    assert_eq!(executor.max_in_flight_per_key(), 1, "no command was dispatched twice at the same time");
}

mod acks {
    //! The ACK API and the durable timers, in process: the seed's ACK rules over HTTP.

    use std::time::Duration;

    use reqwest::StatusCode;
    use serde_json::{Value, json};
    use uuid::Uuid;

    use crate::fake_graph::FakeServer;
    use crate::helpers::{
        CUSTOMER, Meta, TestApp, TestDb, command_of_message, on_both_backends, respawn_app_with, spawn_app_with,
        standard_signature, tenant,
    };

    on_both_backends!(
        an_http_dispatch_is_signed_and_keyed_and_acks_follow_the_seed_rules,
        a_4xx_fails_the_command_without_a_retry,
        an_execution_timeout_fires_after_a_restart,
        an_executor_acknowledges_with_its_own_signature,
    );

    fn executor_token(db: &TestDb, scope: &str) -> String {
        crate::helpers::api_token(db, "demo", "orders-executor", scope)
    }

    async fn with_executor(db: &TestDb, executor: &FakeServer) -> TestApp {
        let mut config = db.config.clone();
        config.outbound.poll_interval_ms = 20;
        config.outbound.confirmation_sweep_ms = 50;
        let orders = config.executors.get_mut("orders").expect("orders");
        orders.url = executor.url.clone();
        orders.backoff_initial_ms = 20;
        orders.backoff_max_ms = 50;
        spawn_app_with(db, config).await
    }

    async fn ack(app: &TestApp, token: &str, id: Uuid, body: Value) -> (StatusCode, Value) {
        let response = app
            .client
            .post(app.url(&format!("/v1/commands/{id}/acks")))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .expect("ack");
        (response.status(), response.json().await.unwrap_or(Value::Null))
    }

    /// Waits until the command's one delivery is `delivered` (the executor answered 202).
    async fn delivered(db: &TestDb, id: Uuid) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while db.store.deliveries().of_command(id).await.expect("deliveries").first().map(|d| d.state.as_str())
            != Some("delivered")
        {
            assert!(std::time::Instant::now() < deadline, "not delivered");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn state(db: &TestDb, id: Uuid) -> (String, Option<String>) {
        let command = db.store.commands().get(&tenant("demo"), id).await.expect("read").expect("command");
        (command.lifecycle.state.to_string(), command.reason_code)
    }

    async fn an_http_dispatch_is_signed_and_keyed_and_acks_follow_the_seed_rules(db: &TestDb) {
        let executor = FakeServer::executor().await;
        let app = with_executor(db, &executor).await;
        Meta::new(&app, db).text("wamid.K1", CUSTOMER, "order status 41").await;
        let id = command_of_message(db, "wamid.K1").await;
        let call = executor.wait_for(1, Duration::from_secs(10)).await.remove(0);

        // The envelope, its idempotency key, a correlation id and a Standard Webhooks signature.
        let command = db.store.commands().get(&tenant("demo"), id).await.expect("read").expect("command");
        assert_eq!(call.headers["idempotency-key"], command.envelope.idempotency_key.as_str());
        assert_eq!(call.headers["x-correlation-id"], command.envelope.correlation_id.as_str());
        assert_eq!(call.body["command_id"], id.to_string());
        let secret = db.config.executors["orders"].secret.as_ref().expect("secret").expose().to_owned();
        let key = {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.decode(secret.trim_start_matches("whsec_")).expect("base64")
        };
        let timestamp: i64 = call.headers["webhook-timestamp"].parse().expect("timestamp");
        let expected = chatgate::domain::standard_webhooks::sign(
            &key,
            &call.headers["webhook-id"],
            timestamp,
            call.raw.as_bytes(),
        );
        assert_eq!(call.headers["webhook-signature"], expected, "the signature verifies");

        let token = executor_token(db, "executions:write");
        delivered(db, id).await;
        // 202 was the delivery ACK: a second one is a duplicate and changes nothing.
        assert_eq!(
            ack(&app, &token, id, json!({"type": "delivery"})).await,
            (StatusCode::OK, json!({"command_id": id, "delivery_state": "delivered", "duplicate": true}))
        );
        let (status, body) = ack(&app, &token, id, json!({"type": "execution", "status": "in_progress"})).await;
        assert_eq!((status, body["duplicate"].clone()), (StatusCode::OK, json!(false)), "in progress may repeat");
        let (status, _) =
            ack(&app, &token, id, json!({"type": "execution", "status": "succeeded", "result": {"eta": "today"}}))
                .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(state(db, id).await, ("executed".into(), None));
        // Terminal: the same result again is a duplicate; a different one changes nothing either.
        let (status, body) =
            ack(&app, &token, id, json!({"type": "execution", "status": "failed", "error": {"code": "late"}})).await;
        assert_eq!((status, body["duplicate"].clone()), (StatusCode::OK, json!(true)));
        assert_eq!(state(db, id).await, ("executed".into(), None));

        // Bad requests and callers.
        assert_eq!(ack(&app, &token, id, json!({"type": "execution"})).await.0, StatusCode::BAD_REQUEST);
        let unknown_status = json!({"type": "delivery", "status": "done"});
        assert_eq!(ack(&app, &token, id, unknown_status).await.0, StatusCode::BAD_REQUEST);
        assert_eq!(ack(&app, &token, Uuid::now_v7(), json!({"type": "delivery"})).await.0, StatusCode::NOT_FOUND);
        assert_eq!(
            ack(&app, &executor_token(db, "commands:read"), id, json!({"type": "delivery"})).await.0,
            StatusCode::FORBIDDEN
        );
        let log = db
            .store
            .deliveries()
            .log(db.store.deliveries().of_command(id).await.expect("deliveries")[0].id)
            .await
            .expect("log");
        let outcomes: Vec<String> = log.iter().map(|(e, o)| format!("{e}:{o}")).collect();
        assert_eq!(
            outcomes,
            [
                "validate_ok:moved",
                "route_ok:moved",
                "delivery_ack:moved",
                "delivery_ack:duplicate",
                "execution_ack_in_progress:moved",
                "execution_ack_success:moved",
                "execution_ack_failure:duplicate",
            ]
        );
        app.stop().await.expect("stop");
    }

    /// An ACK signed the Standard Webhooks way by `executor` with `secret`, `age_secs` old.
    async fn signed_ack(
        app: &TestApp,
        executor: &str,
        secret: &str,
        age_secs: i64,
        id: Uuid,
        body: Value,
    ) -> (StatusCode, Value) {
        let raw = body.to_string();
        let timestamp = time::OffsetDateTime::now_utc().unix_timestamp() - age_secs;
        let webhook_id = format!("ack_{}", Uuid::now_v7());
        let response = app
            .client
            .post(app.url(&format!("/v1/executors/{executor}/commands/{id}/acks")))
            .header("content-type", "application/json")
            .header("webhook-id", &webhook_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", standard_signature(secret, &webhook_id, timestamp, &raw))
            .body(raw)
            .send()
            .await
            .expect("ack");
        (response.status(), response.json().await.unwrap_or(Value::Null))
    }

    async fn an_executor_acknowledges_with_its_own_signature(db: &TestDb) {
        let executor = FakeServer::executor().await;
        let app = with_executor(db, &executor).await;
        Meta::new(&app, db).text("wamid.S1", CUSTOMER, "order status 44").await;
        let id = command_of_message(db, "wamid.S1").await;
        executor.wait_for(1, Duration::from_secs(10)).await;
        delivered(db, id).await;
        let secret = db.config.executors["orders"].secret.as_ref().expect("secret").expose().to_owned();
        let other = "whsec_c29tZWJvZHktZWxzZXMtc2VjcmV0LXZhbHVl";
        let done = json!({"type": "execution", "status": "succeeded", "result": {"eta": "today"}});

        // Refused, and nothing changes: another secret, a stale timestamp, no signature, an
        // executor without a secret or unknown, another executor's delivery.
        let (status, body) = signed_ack(&app, "orders", other, 0, id, done.clone()).await;
        assert_eq!((status, body["code"].clone()), (StatusCode::UNAUTHORIZED, json!("invalid_signature")));
        let (status, body) = signed_ack(&app, "orders", &secret, 600, id, done.clone()).await;
        assert_eq!((status, body["code"].clone()), (StatusCode::UNAUTHORIZED, json!("stale_timestamp")));
        let unsigned = app
            .client
            .post(app.url(&format!("/v1/executors/orders/commands/{id}/acks")))
            .json(&done)
            .send()
            .await
            .expect("ack");
        assert_eq!(unsigned.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(signed_ack(&app, "gateway", &secret, 0, id, done.clone()).await.0, StatusCode::NOT_FOUND);
        assert_eq!(signed_ack(&app, "nobody", &secret, 0, id, done.clone()).await.0, StatusCode::NOT_FOUND);
        let elsewhere = json!({"type": "execution", "status": "succeeded", "target": "billing"});
        assert_eq!(signed_ack(&app, "orders", &secret, 0, id, elsewhere).await.0, StatusCode::BAD_REQUEST);
        assert_eq!(signed_ack(&app, "orders", &secret, 0, Uuid::now_v7(), done.clone()).await.0, StatusCode::NOT_FOUND);
        assert_eq!(state(db, id).await.0, "started", "nothing changed");

        // Signed with the executor's secret (computed here from the specification): applied once.
        let (status, body) = signed_ack(&app, "orders", &secret, 0, id, done.clone()).await;
        assert_eq!(
            (status, body),
            (StatusCode::OK, json!({"command_id": id, "delivery_state": "executed", "duplicate": false}))
        );
        assert_eq!(state(db, id).await, ("executed".into(), None));
        let (status, body) = signed_ack(&app, "orders", &secret, 0, id, done).await;
        assert_eq!((status, body["duplicate"].clone()), (StatusCode::OK, json!(true)));
        app.stop().await.expect("stop");
    }

    async fn a_4xx_fails_the_command_without_a_retry(db: &TestDb) {
        let executor = FakeServer::executor().await;
        executor.answer_next(422, json!({"error": {"code": "order_locked", "message": "try tomorrow"}}), None);
        let app = with_executor(db, &executor).await;
        Meta::new(&app, db).text("wamid.Q1", CUSTOMER, "order status 42").await;
        let id = command_of_message(db, "wamid.Q1").await;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while state(db, id).await.0 != "failed" {
            assert!(std::time::Instant::now() < deadline, "the command did not fail");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(state(db, id).await.1.as_deref(), Some("order_locked"), "the executor's reason");
        executor.exactly(1).await;
        // An execution ACK for the closed dispatch is a duplicate of its end, never a new end.
        let token = executor_token(db, "executions:write");
        let (status, body) = ack(&app, &token, id, json!({"type": "execution", "status": "succeeded"})).await;
        assert_eq!((status, body["duplicate"].clone()), (StatusCode::OK, json!(true)));
        assert_eq!(state(db, id).await.0, "failed");
        app.stop().await.expect("stop");
    }

    async fn an_execution_timeout_fires_after_a_restart(db: &TestDb) {
        let executor = FakeServer::executor().await;
        let app = with_executor(db, &executor).await;
        Meta::new(&app, db).text("wamid.X1", CUSTOMER, "order status 43").await;
        let id = command_of_message(db, "wamid.X1").await;
        executor.wait_for(1, Duration::from_secs(10)).await;
        delivered(db, id).await;
        app.stop().await.expect("stop");
        // While the gateway is down, the execution deadline passes.
        let mut conn = db.raw().await;
        sqlx::query("UPDATE deliveries SET execution_deadline = 1 WHERE command_id = $1")
            .bind(id.to_string())
            .execute(&mut conn)
            .await
            .expect("deadline");
        let mut config = db.config.clone();
        config.outbound.confirmation_sweep_ms = 50;
        let again = respawn_app_with(config.clone()).await;
        let store = chatgate::store::Store::connect(&config.storage).await.expect("store");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let command = again_state(db, id).await;
            if command.0 == "failed" {
                assert_eq!(command.1.as_deref(), Some("EXECUTION_TIMEOUT"));
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the timer did not fire: {command:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // A late ACK for the closed dispatch is refused (409) and kept in its log.
        let token = executor_token(db, "executions:write");
        let (status, body) = ack(&again, &token, id, json!({"type": "execution", "status": "succeeded"})).await;
        assert_eq!((status, body["code"].clone()), (StatusCode::CONFLICT, json!("ack_out_of_order")));
        let delivery = store.deliveries().of_command(id).await.expect("deliveries").remove(0);
        assert_eq!((delivery.state.as_str(), delivery.failure_class.as_deref()), ("closed", Some("EXECUTION_TIMEOUT")));
        let log = store.deliveries().log(delivery.id).await.expect("log");
        assert_eq!(log.last().map(|(e, o)| (e.as_str(), o.as_str())), Some(("execution_ack_success", "refused")));
        again.stop().await.expect("stop");
    }

    /// The command's state through a fresh connection (the first app's store is closed).
    async fn again_state(db: &TestDb, id: Uuid) -> (String, Option<String>) {
        let mut conn = db.raw().await;
        let row = sqlx::query("SELECT state, reason_code FROM commands WHERE command_id = $1")
            .bind(id.to_string())
            .fetch_one(&mut conn)
            .await
            .expect("command");
        (sqlx::Row::try_get(&row, 0).expect("state"), sqlx::Row::try_get(&row, 1).expect("reason"))
    }
}

mod agents {
    //! Agents over HTTP: pause and resume with versioned compare-and-swap; a paused agent's
    //! commands wait, go out on resume, or expire by TTL into `canceled`.

    use std::time::Duration;

    use reqwest::StatusCode;
    use serde_json::Value;

    use crate::helpers::{CUSTOMER, Meta, TestApp, TestDb, on_both_backends, spawn_app_with};

    on_both_backends!(a_paused_agent_holds_its_commands_until_resumed_or_expired);

    fn token(db: &TestDb, scope: &str) -> String {
        crate::helpers::api_token(db, "demo", "ops", scope)
    }

    async fn post(app: &TestApp, token: &str, path: &str) -> (StatusCode, Value) {
        let response = app.client.post(app.url(path)).bearer_auth(token).send().await.expect("request");
        (response.status(), response.json().await.unwrap_or(Value::Null))
    }

    async fn state_of(db: &TestDb, message: &str) -> (String, Option<String>) {
        let mut conn = db.raw().await;
        let row = sqlx::query(
            "SELECT c.state, c.reason_code FROM commands c JOIN inbound_messages m ON m.command_id = c.command_id
             WHERE m.provider_message_id = $1",
        )
        .bind(message)
        .fetch_one(&mut conn)
        .await
        .expect("command");
        (sqlx::Row::try_get(&row, 0).expect("state"), sqlx::Row::try_get(&row, 1).expect("reason"))
    }

    async fn until(db: &TestDb, message: &str, state: &str) -> Option<String> {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let (now, reason) = state_of(db, message).await;
            if now == state {
                return reason;
            }
            assert!(std::time::Instant::now() < deadline, "{message} is {now}, not {state}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn a_paused_agent_holds_its_commands_until_resumed_or_expired(db: &TestDb) {
        let mut config = db.config.clone();
        config.outbound.poll_interval_ms = 20;
        config.outbound.confirmation_sweep_ms = 50;
        let app = spawn_app_with(db, config).await;
        let (writer, reader) = (token(db, "agents:admin"), token(db, "agents:read"));
        assert_eq!(post(&app, &reader, "/v1/agents/orders/pause").await.0, StatusCode::FORBIDDEN);
        assert_eq!(post(&app, &writer, "/v1/agents/nobody/pause").await.0, StatusCode::NOT_FOUND);
        let (status, body) = post(&app, &writer, "/v1/agents/orders/pause").await;
        assert_eq!((status, body["state"].as_str()), (StatusCode::OK, Some("paused")));
        assert_eq!(post(&app, &writer, "/v1/agents/orders/pause").await.0, StatusCode::CONFLICT, "already paused");
        let listed: Value = app
            .client
            .get(app.url("/v1/agents"))
            .bearer_auth(&reader)
            .send()
            .await
            .expect("list")
            .json()
            .await
            .expect("json");
        let orders = listed["agents"].as_array().and_then(|a| a.iter().find(|a| a["agent"] == "orders")).cloned();
        assert_eq!(orders.map(|o| o["state"].clone()), Some(Value::from("paused")));

        // Waits while paused, goes out on resume.
        let meta = Meta::new(&app, db);
        meta.text("wamid.P1", CUSTOMER, "order status 50").await;
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(state_of(db, "wamid.P1").await.0, "started", "held while the agent is paused");
        let (status, body) = post(&app, &writer, "/v1/agents/orders/resume").await;
        assert_eq!((status, body["state"].as_str()), (StatusCode::OK, Some("idle")));
        until(db, "wamid.P1", "executed").await;

        // Expires by TTL while paused: canceled with the reason, and the person is told.
        assert_eq!(post(&app, &writer, "/v1/agents/orders/pause").await.0, StatusCode::OK);
        meta.text("wamid.P2", CUSTOMER, "order status 51").await;
        let mut conn = db.raw().await;
        sqlx::query("UPDATE commands SET expires_at = 1 WHERE state = 'started'")
            .execute(&mut conn)
            .await
            .expect("expire");
        assert_eq!(until(db, "wamid.P2", "canceled").await.as_deref(), Some("TTL_EXPIRED"));
        let told = db
            .outbox()
            .await
            .into_iter()
            .any(|(_, p)| p["template"] == "canceled" && p["vars"]["reason"] == "TTL_EXPIRED");
        assert!(told, "the person hears why");

        // Two operators at once: one move wins, the other is told it lost.
        let (a, b) = tokio::join!(
            post(&app, &writer, "/v1/agents/orders/resume"),
            post(&app, &writer, "/v1/agents/orders/resume")
        );
        let mut statuses = [a.0, b.0];
        statuses.sort();
        assert_eq!(statuses, [StatusCode::OK, StatusCode::CONFLICT]);
        assert_eq!(db.store.agents().get("orders").await.expect("agent").state.as_str(), "idle");
        app.stop().await.expect("stop");
    }
}

mod several_targets {
    //! A command with several targets: it ends when all have executed (or one has failed), once.

    use std::time::Duration;

    use chatgate::config::ExecutorConfig;

    use crate::helpers::{CUSTOMER, Meta, TestApp, TestDb, on_both_backends, spawn_app_with_registry};

    on_both_backends!(
        all_targets_succeeding_execute_the_command_once,
        one_target_failing_fails_the_command_with_its_reason,
    );

    const REGISTRY: &str = r#"
[commands.sync_order]
entity = "order"
action = "sync"
target = "order_id"
patterns = ["sync order {order_id:id}"]
kind = "read"
scopes = ["orders:read"]
executor = "orders"
also_executors = ["ledger"]
timeout = "30s"
ttl = "5m"
"#;

    async fn start(db: &TestDb, ledger_url: &str) -> TestApp {
        let mut config = db.config.clone();
        config.outbound.poll_interval_ms = 20;
        let mut ledger: ExecutorConfig = config.executors["orders"].clone();
        ledger.url = ledger_url.to_owned();
        config.executors.insert("ledger".into(), ledger);
        spawn_app_with_registry(db, config, REGISTRY).await
    }

    async fn settled(db: &TestDb, message: &str) -> (String, Option<String>, uuid::Uuid) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let mut conn = db.raw().await;
            let row = sqlx::query(
                "SELECT c.state, c.reason_code, c.command_id FROM commands c
                 JOIN inbound_messages m ON m.command_id = c.command_id WHERE m.provider_message_id = $1",
            )
            .bind(message)
            .fetch_one(&mut conn)
            .await
            .expect("command");
            let state: String = sqlx::Row::try_get(&row, 0).expect("state");
            let id: String = sqlx::Row::try_get(&row, 2).expect("id");
            if state != "started" {
                return (state, sqlx::Row::try_get(&row, 1).expect("reason"), id.parse().expect("uuid"));
            }
            assert!(std::time::Instant::now() < deadline, "{message} still started");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn all_targets_succeeding_execute_the_command_once(db: &TestDb) {
        let app = start(db, "builtin:echo").await;
        Meta::new(&app, db).text("wamid.M1", CUSTOMER, "sync order 7").await;
        let (state, _, id) = settled(db, "wamid.M1").await;
        assert_eq!(state, "executed");
        let deliveries = db.store.deliveries().of_command(id).await.expect("deliveries");
        assert_eq!(deliveries.iter().map(|d| d.target.as_str()).collect::<Vec<_>>(), ["ledger", "orders"]);
        let succeeded = db
            .store
            .commands()
            .transitions(id)
            .await
            .expect("moves")
            .iter()
            .filter(|m| m.event.as_str() == "succeed")
            .count();
        assert_eq!(succeeded, 1);
        app.stop().await.expect("stop");
    }

    async fn one_target_failing_fails_the_command_with_its_reason(db: &TestDb) {
        let app = start(db, "builtin:fail:ledger_down").await;
        Meta::new(&app, db).text("wamid.M2", CUSTOMER, "sync order 8").await;
        let (state, reason, _) = settled(db, "wamid.M2").await;
        assert_eq!((state.as_str(), reason.as_deref()), ("failed", Some("ledger_down")));
        app.stop().await.expect("stop");
    }
}
