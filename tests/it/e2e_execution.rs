//! Execution under faults, with the real binary: an executor that fails on a schedule, a gateway
//! killed (SIGKILL) in the middle of dispatching and started again, two gateways sharing one
//! PostgreSQL. Every command must end in a terminal state whose reason says what happened, and
//! every effect must happen exactly once.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::fake_executor::{FakeExecutor, Fault};
use crate::helpers::{Backend, CUSTOMER, DEMO_NUMBER, TestDb};

const BIN: &str = env!("CARGO_BIN_EXE_chatgate");
const APP_SECRET: &str = "demo-whatsapp-app-secret";

/// A `chatgate serve` process on its own port and configuration.
struct Gateway {
    child: Child,
    base: String,
    client: reqwest::Client,
}

impl Gateway {
    async fn start(folder: &Path, name: &str, database_url: &str, executor_url: &str) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR"));
        let config = format!(
            r#"
[server]
listen = "127.0.0.1:{port}"
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
[executors.orders]
url = "{executor_url}"
request_timeout_ms = 300
max_attempts = 6
backoff_initial_ms = 20
backoff_max_ms = 100
"#,
            commands = shipped.join("config/commands.toml").display(),
            directory = shipped.join("config/directory.toml").display(),
            templates = shipped.join("templates").display(),
        );
        let path = folder.join(format!("{name}.toml"));
        std::fs::write(&path, config).expect("config file");
        let mut command = Command::new(BIN);
        for (key, _) in std::env::vars().filter(|(k, _)| k.starts_with("CHATGATE_")) {
            command.env_remove(key);
        }
        let child = command
            .args(["--config", path.to_str().expect("utf-8 path"), "serve"])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chatgate starts");
        let gateway = Self { child, base: format!("http://127.0.0.1:{port}"), client: reqwest::Client::new() };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !gateway
            .client
            .get(format!("{}/healthz", gateway.base))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            assert!(Instant::now() < deadline, "the gateway did not become healthy");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        gateway
    }

    async fn ask(&self, id: &str, text: &str) {
        use chatgate::ingress::whatsapp::{signature, simulate};
        let body = simulate::notification(DEMO_NUMBER, vec![simulate::text(id, CUSTOMER, text)], vec![]).to_string();
        let signature = signature::sign(APP_SECRET.as_bytes(), body.as_bytes());
        let response = self
            .client
            .post(format!("{}/webhooks/whatsapp", self.base))
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
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
        n if n % 7 == 0 => Fault::SlowAfterWork(Duration::from_millis(700)),
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
