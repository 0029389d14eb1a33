//! RabbitMQ executors against the real broker (`CHATGATE_TEST_AMQP_URL`): commands published with
//! confirms to the Bloodbank topic exchange in Bloodbank's envelope, a test agent written against
//! Bloodbank's models and adapter ([`crate::bloodbank_agent`]: ack, result, error, an error without
//! an ack, its own dedupe by idempotency key, state events), and a broker restart while commands
//! are pending: nothing lost, nothing doubled.

use std::time::{Duration, Instant};

use lapin::{Connection, ConnectionProperties};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::bloodbank_agent::{self, Ledger};
use crate::helpers::{Backend, CUSTOMER, Meta, TestApp, TestDb, spawn_app_with};

const AMQP_ENV: &str = "CHATGATE_TEST_AMQP_URL";

/// The broker is shared by the tests of one run and one of them stops it: that one holds the lock
/// alone, every other test that talks to the broker holds it shared.
pub static BROKER: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

fn rabbitmqctl(args: &[&str]) {
    let status = std::process::Command::new("rabbitmqctl").args(args).stdout(std::process::Stdio::null()).status();
    assert!(status.is_ok_and(|s| s.success()), "rabbitmqctl {args:?}");
}

pub async fn states(db: &TestDb) -> Vec<(String, String, Option<String>)> {
    let mut conn = db.raw().await;
    let rows =
        sqlx::query("SELECT args, state, reason_code FROM commands").fetch_all(&mut conn).await.expect("commands");
    rows.iter()
        .map(|row| {
            let args: String = sqlx::Row::try_get(row, 0).expect("args");
            let args: Value = serde_json::from_str(&args).expect("json");
            (
                args["order_id"].as_str().unwrap_or_default().to_owned(),
                sqlx::Row::try_get(row, 1).expect("state"),
                sqlx::Row::try_get(row, 2).expect("reason"),
            )
        })
        .collect()
}

/// The evidence and the delivery logs say what the agent said: the result's outcome and payload,
/// the error's code, the declined first attempt of order 17; the agent's state events moved the
/// agent machine.
async fn told_as_the_agent_said(db: &TestDb) {
    let mut conn = db.raw().await;
    let evidence = "SELECT COUNT(*) FROM evidence e JOIN commands c ON c.command_id = e.command_id \
        WHERE c.args LIKE $1 AND e.body LIKE $2";
    for (order, said) in [("1", "\"outcome\":\"success\""), ("19", "ttl_expired"), ("13", "no such order")] {
        let args = format!("%\"{order}\"%");
        let row = sqlx::query(evidence).bind(args).bind(format!("%{said}%")).fetch_one(&mut conn).await;
        let count: i64 = sqlx::Row::get(&row.expect("evidence"), 0);
        assert!(count >= 1, "order {order}: no evidence saying {said}");
    }
    let declined = "SELECT COUNT(*) FROM delivery_events d JOIN deliveries v ON v.id = d.delivery_id \
        JOIN commands c ON c.command_id = v.command_id \
        WHERE c.args LIKE '%\"17\"%' AND d.outcome = 'refused' AND d.detail LIKE '%invalid_state%'";
    let row = sqlx::query(declined).fetch_one(&mut conn).await.expect("delivery log");
    assert_eq!(sqlx::Row::try_get::<i64, _>(&row, 0).expect("count"), 1, "order 17 was declined once, then done");
    // The agent says `idle` after its last result: the commands may settle before that event is in.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let row = sqlx::query("SELECT state, version FROM agents WHERE name = 'orders'").fetch_one(&mut conn).await;
        let row = row.expect("the agent");
        let (state, version): (String, i64) = (sqlx::Row::get(&row, 0), sqlx::Row::get(&row, 1));
        if state == "idle" {
            assert!(version >= 2, "the agent's state events moved its machine (version {version})");
            return;
        }
        assert!(Instant::now() < deadline, "the agent still {state} after its last result");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn all_settled(db: &TestDb, expected: usize, within: Duration) -> Vec<(String, String, Option<String>)> {
    let deadline = Instant::now() + within;
    loop {
        let all = states(db).await;
        let done = all.iter().filter(|(_, s, _)| s == "executed" || s == "failed").count();
        if all.len() == expected && done == expected {
            return all;
        }
        assert!(Instant::now() < deadline, "{done} of {expected} commands settled: {all:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn ask(app: &TestApp, db: &TestDb, orders: std::ops::RangeInclusive<u32>) {
    let meta = Meta::new(app, db);
    for n in orders {
        assert_eq!(meta.text(&format!("wamid.Q{n}"), CUSTOMER, &format!("order status {n}")).await.status(), 200);
    }
}

/// A gateway whose `orders` executor is the bus, and the Bloodbank test agent serving it.
struct Rig {
    app: TestApp,
    ledger: Ledger,
    stopping: CancellationToken,
    agent: tokio::task::JoinHandle<()>,
    url: String,
    run: String,
}

impl Rig {
    async fn start(db: &TestDb, url: &str) -> Self {
        Self::start_with(db, url, None).await
    }

    /// With a registry of the test's own, if given.
    async fn start_with(db: &TestDb, url: &str, commands: Option<&str>) -> Self {
        let run = uuid::Uuid::now_v7().simple().to_string();
        let mut config = db.config.clone();
        config.outbound.poll_interval_ms = 20;
        let orders = config.executors.get_mut("orders").expect("orders");
        orders.url = url.to_owned();
        orders.exchange = Some(format!("test.bloodbank.{run}"));
        orders.queue = Some(format!("test.chatgate.{run}"));
        orders.max_attempts = Some(200);
        orders.backoff_initial_ms = 100;
        orders.backoff_max_ms = 500;
        let (ledger, stopping) = (Ledger::default(), CancellationToken::new());
        // The agent's queue exists before anything is published to it.
        let exchange = format!("test.bloodbank.{run}");
        let queue = format!("test.agent.orders.{run}");
        let agent =
            tokio::spawn(bloodbank_agent::run(url.to_owned(), exchange, queue, ledger.clone(), stopping.clone()));
        tokio::time::sleep(Duration::from_millis(500)).await;
        config.executors.get_mut("orders").expect("orders").preview_timeout_ms = 1_000;
        let app = match commands {
            Some(commands) => crate::helpers::spawn_app_with_registry(db, config, commands).await,
            None => spawn_app_with(db, config).await,
        };
        Self { app, ledger, stopping, agent, url: url.to_owned(), run }
    }

    /// Orders 1 to 20, in Bloodbank's format: every command completes or fails as the agent said.
    async fn round_trip(&self, db: &TestDb) {
        ask(&self.app, db, 1..=20).await;
        let settled = all_settled(db, 20, Duration::from_secs(30)).await;
        for (order, state, reason) in &settled {
            let expected = match order.as_str() {
                "13" => ("failed", Some("rejected")),
                "19" => ("failed", Some("ttl_expired")),
                _ => ("executed", None),
            };
            assert_eq!((state.as_str(), reason.as_deref()), expected, "order {order}");
        }
        assert_eq!(self.ledger.violations(), Vec::<String>::new(), "what chatgate published reads as Bloodbank's");
        assert_eq!(self.ledger.seen.lock().expect("lock").len(), 20);
        told_as_the_agent_said(db).await;
    }

    async fn stop(self) {
        self.stopping.cancel();
        let _ = self.agent.await;
        self.app.stop().await.expect("stop");
        // The broker is shared: leave nothing behind.
        let connection = Connection::connect(&self.url, ConnectionProperties::default()).await.expect("broker");
        let channel = connection.create_channel().await.expect("channel");
        for queue in [format!("test.agent.orders.{}", self.run), format!("test.chatgate.{}", self.run)] {
            let _ = channel.queue_delete(queue.as_str().into(), lapin::options::QueueDeleteOptions::default()).await;
        }
        let exchange = format!("test.bloodbank.{}", self.run);
        let _ =
            channel.exchange_delete(exchange.as_str().into(), lapin::options::ExchangeDeleteOptions::default()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn commands_round_trip_over_rabbitmq_and_survive_a_broker_restart() {
    let Ok(url) = std::env::var(AMQP_ENV) else {
        eprintln!("skipped: {AMQP_ENV} is not set");
        return;
    };
    let _alone = BROKER.write().await;
    let db = TestDb::new(Backend::Sqlite).await.expect("sqlite");
    let rig = Rig::start(&db, &url).await;
    rig.round_trip(&db).await;

    // The broker goes away with commands pending, and comes back.
    rabbitmqctl(&["stop_app"]);
    ask(&rig.app, &db, 21..=40).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        states(&db).await.iter().filter(|(_, s, _)| s == "started").count(),
        20,
        "pending while the broker is down"
    );
    rabbitmqctl(&["start_app"]);
    let settled = all_settled(&db, 40, Duration::from_secs(90)).await;
    assert_eq!(settled.iter().filter(|(_, s, _)| s == "executed").count(), 38, "nothing lost (13 and 19 refused)");
    let effects = rig.ledger.effects.lock().expect("lock").clone();
    let seen = rig.ledger.seen.lock().expect("lock").clone();
    assert_eq!(effects.len(), 38, "effects {effects:?} seen {seen:?}");
    assert_eq!(rig.ledger.violations(), Vec::<String>::new());
    assert!(effects.values().all(|n| *n == 1), "nothing done twice");
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bloodbank_agent_is_understood_on_postgres_too() {
    let (Ok(url), Some(db)) = (std::env::var(AMQP_ENV), TestDb::new(Backend::Postgres).await) else {
        eprintln!("skipped: {AMQP_ENV} or the PostgreSQL URL is not set");
        return;
    };
    let _shared = BROKER.read().await;
    let rig = Rig::start(&db, &url).await;
    rig.round_trip(&db).await;
    rig.stop().await;
    db.drop_database().await;
}

/// An agent that answers `.waiting` (chatgate's own, issue #46) is sent the same command again
/// once a supervisor approves, with the same idempotency key and the grant in `payload.approval`,
/// and does the work once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiting_agent_is_resumed_after_approval_over_rabbitmq() {
    let Ok(url) = std::env::var(AMQP_ENV) else {
        eprintln!("skipped: {AMQP_ENV} is not set");
        return;
    };
    let _shared = BROKER.read().await;
    let db = TestDb::new(Backend::Sqlite).await.expect("sqlite");
    let rig = Rig::start(&db, &url).await;
    ask(&rig.app, &db, 77..=77).await;
    let id = crate::helpers::command_of_message(&db, "wamid.Q77").await;
    crate::e2e_executor_approvals::supervisor_approves_the_wait(&db, &rig.app, id).await;
    let settled = all_settled(&db, 1, Duration::from_secs(30)).await;
    assert_eq!((settled[0].1.as_str(), settled[0].2.as_deref()), ("executed", None), "{settled:?}");
    let effects = rig.ledger.effects.lock().expect("lock").clone();
    assert_eq!(effects.values().copied().collect::<Vec<_>>(), [1], "one effect");
    assert_eq!(rig.ledger.violations(), Vec::<String>::new());
    let bodies = rig.ledger.bodies.lock().expect("lock").clone();
    let ours: Vec<&Value> = bodies.iter().filter(|b| b["payload"]["command_id"] == id.to_string()).collect();
    assert_eq!(ours.len(), 2, "handed over, then resumed");
    assert_eq!(ours[0]["payload"]["idempotency_key"], ours[1]["payload"]["idempotency_key"]);
    assert_eq!(ours[1]["payload"]["approval"]["approvers"][0]["approver"], "15550000003");
    rig.stop().await;
}

/// Previews over RabbitMQ (issue #47): a `.preview` request, the agent's `.previewed` answer shown
/// in the prompt and carried by the command once confirmed; a refusal told; an agent that does not
/// answer in time leaves a `required` preview refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn previews_over_rabbitmq_are_shown_refused_or_timed_out() {
    let Ok(url) = std::env::var(AMQP_ENV) else {
        eprintln!("skipped: {AMQP_ENV} is not set");
        return;
    };
    let _shared = BROKER.read().await;
    let db = TestDb::new(Backend::Sqlite).await.expect("sqlite");
    let rig = Rig::start_with(&db, &url, Some(&crate::e2e_previews::previewed("required"))).await;
    let meta = Meta::new(&rig.app, &db);
    for (id, text) in
        [("wamid.BP1", "refund 1234 25.00"), ("wamid.BP2", "refund 1266 5.00"), ("wamid.BP3", "refund 1299 5.00")]
    {
        assert_eq!(meta.text(id, CUSTOMER, text).await.status(), 200);
    }
    let (shown, _, code) = crate::helpers::confirmation_of(&db, "wamid.BP1").await;
    let told = crate::e2e_approvals::replies_to(&db, CUSTOMER).await;
    let (_, prompt) = told.iter().find(|(t, _)| t == "confirmation_prompt").expect("prompted");
    assert_eq!(prompt["preview"]["summary"], "Order 1234: refunding 25 of 80.00");
    let refused = crate::helpers::command_of_message(&db, "wamid.BP2").await;
    let silent = crate::helpers::command_of_message(&db, "wamid.BP3").await;
    assert_eq!(crate::helpers::settled(&db, refused).await, "rejected");
    assert_eq!(crate::e2e_approvals::state_and_reason(&db, refused).await.1.as_deref(), Some("preview_refused"));
    assert_eq!(crate::helpers::settled(&db, silent).await, "rejected");
    assert_eq!(crate::e2e_approvals::state_and_reason(&db, silent).await.1.as_deref(), Some("preview_unavailable"));

    assert_eq!(meta.text("wamid.BP1-yes", CUSTOMER, &format!("YES {code}")).await.status(), 200);
    assert_eq!(crate::helpers::settled(&db, shown).await, "executed");
    let bodies = rig.ledger.bodies.lock().expect("lock").clone();
    let handed = bodies.iter().find(|b| b["payload"]["command_id"] == shown.to_string()).expect("handed over");
    assert_eq!(handed["payload"]["preview"]["summary"], "Order 1234: refunding 25 of 80.00");
    assert_eq!(handed["payload"]["preview"]["digest"].as_str().map(str::len), Some(64));
    let previews = rig.ledger.previews.lock().expect("lock").clone();
    assert_eq!(previews.len(), 3, "each asked once");
    assert!(previews.iter().all(|p| p["event_type"].as_str().is_some_and(|t| t.ends_with(".preview"))));
    assert_eq!(rig.ledger.violations(), Vec::<String>::new());
    rig.stop().await;
}
