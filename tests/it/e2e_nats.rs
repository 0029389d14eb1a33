//! NATS JetStream executors against a real `nats-server -js` (`CHATGATE_TEST_NATS_URL`; `.ci/run`
//! starts one): each command published as Bloodbank's `invocation.start` CloudEvent and validated
//! against Bloodbank's schemas by a test agent written from Bloodbank's contract
//! ([`crate::nats_agent`]), which starts, completes, fails with a code, declines for now, repeats
//! its events and answers out of order; every command ends as the agent said, once, on both
//! backends. And a server of the test's own, restarted while commands are pending: nothing lost,
//! nothing done twice, on both backends too.

use std::time::{Duration, Instant};

use serde_json::json;

use tokio_util::sync::CancellationToken;

use crate::e2e_amqp::{all_settled, ask, states};
use crate::helpers::{Backend, TestApp, TestDb, spawn_app_with};
use crate::nats_agent::{self, Ledger};

const NATS_ENV: &str = "CHATGATE_TEST_NATS_URL";

/// A gateway whose `orders` executor is Bloodbank on NATS, and the test agent serving it, on
/// subjects of their own (`t{run}.bloodbank.…`) so that tests sharing a server never meet.
struct Rig {
    app: TestApp,
    ledger: Ledger,
    stopping: CancellationToken,
    agent: tokio::task::JoinHandle<()>,
    url: String,
    prefix: String,
}

impl Rig {
    async fn start(db: &TestDb, url: &str) -> Self {
        Self::start_with(db, url, None).await
    }

    /// With a registry of the test's own, if given.
    async fn start_with(db: &TestDb, url: &str, commands: Option<&str>) -> Self {
        let prefix = format!("t{}.bloodbank", uuid::Uuid::now_v7().simple());
        let mut config = db.config.clone();
        config.outbound.poll_interval_ms = 20;
        let orders = config.executors.get_mut("orders").expect("orders");
        orders.url = url.to_owned();
        orders.subject_prefix = Some(prefix.clone());
        orders.request_timeout_ms = 2_000;
        orders.max_attempts = Some(500);
        orders.backoff_initial_ms = 100;
        orders.backoff_max_ms = 500;
        let (ledger, stopping) = (Ledger::default(), CancellationToken::new());
        let agent = tokio::spawn(nats_agent::run(
            url.to_owned(),
            prefix.clone(),
            "orders".into(),
            ledger.clone(),
            stopping.clone(),
        ));
        config.executors.get_mut("orders").expect("orders").preview_timeout_ms = 1_000;
        let app = match commands {
            Some(commands) => crate::helpers::spawn_app_with_registry(db, config, commands).await,
            None => spawn_app_with(db, config).await,
        };
        Self { app, ledger, stopping, agent, url: url.to_owned(), prefix }
    }

    /// Every command ended as the agent said: 13 with its code, 19 denied with its code, the rest
    /// executed (17 after one decline, 11 and 15 whatever the order and number of their events).
    fn check(&self, settled: &[(String, String, Option<String>)]) {
        for (order, state, reason) in settled {
            let expected = match order.as_str() {
                o if o.ends_with("13") => ("failed", Some("ORDER_LOCKED")),
                o if o.ends_with("19") => ("failed", Some("ROUTE_DENIED")),
                _ => ("executed", None),
            };
            assert_eq!((state.as_str(), reason.as_deref()), expected, "order {order}");
        }
        assert_eq!(self.ledger.violations(), Vec::<String>::new(), "every command validates as Bloodbank's");
        let effects = self.ledger.effects.lock().expect("lock").clone();
        let executed = settled.iter().filter(|(_, s, _)| s == "executed").count();
        assert_eq!(effects.len(), executed, "one effect per executed command: {effects:?}");
        assert!(effects.values().all(|n| *n == 1), "nothing done twice");
    }

    async fn stop(self) {
        self.stopping.cancel();
        let _ = self.agent.await;
        self.app.stop().await.expect("stop");
        // The server is shared: leave nothing behind.
        if let Ok(client) = async_nats::connect(self.url.as_str()).await {
            let context = async_nats::jetstream::new(client);
            let name = self.prefix.to_uppercase().replace(['.', '-'], "_");
            for suffix in ["COMMANDS", "EVENTS"] {
                let _ = context.delete_stream(format!("{name}_{suffix}")).await;
            }
        }
    }
}

/// The delivery log of order 17 holds the decline; those of 11 and 15 the repeated and the late
/// events, kept without moving anything (CMB §8: duplicates create no transition, out-of-order ACKs
/// are rejected and logged); the evidence of 13 and 19 holds their codes.
async fn told_as_the_agent_said(db: &TestDb) {
    let mut conn = db.raw().await;
    let kept = "SELECT COUNT(*) FROM delivery_events d JOIN deliveries v ON v.id = d.delivery_id \
        JOIN commands c ON c.command_id = v.command_id WHERE c.args LIKE $1 AND d.outcome <> 'moved'";
    for order in ["11", "15"] {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let row = sqlx::query(kept).bind(format!("%\"{order}\"%")).fetch_one(&mut conn).await.expect("log");
            if sqlx::Row::get::<i64, _>(&row, 0) >= 1 {
                break;
            }
            assert!(Instant::now() < deadline, "order {order}: the repeated or late event is not in the delivery log");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let declined = "SELECT COUNT(*) FROM delivery_events d JOIN deliveries v ON v.id = d.delivery_id \
        JOIN commands c ON c.command_id = v.command_id \
        WHERE c.args LIKE '%\"17\"%' AND d.outcome = 'refused' AND d.detail LIKE '%AGENT_BUSY%'";
    let row = sqlx::query(declined).fetch_one(&mut conn).await.expect("delivery log");
    assert_eq!(sqlx::Row::try_get::<i64, _>(&row, 0).expect("count"), 1, "order 17 was declined once, then done");
    let evidence = "SELECT COUNT(*) FROM evidence e JOIN commands c ON c.command_id = e.command_id \
        WHERE c.args LIKE $1 AND e.body LIKE $2";
    for (order, said) in [("13", "the order is locked"), ("19", "no route to orders"), ("1", "shipped")] {
        let row = sqlx::query(evidence).bind(format!("%\"{order}\"%")).bind(format!("%{said}%")).fetch_one(&mut conn);
        let count: i64 = sqlx::Row::get(&row.await.expect("evidence"), 0);
        assert!(count >= 1, "order {order}: no evidence saying {said}");
    }
}

/// Issue 44.11: an `invocation.failed`'s `error_message` is on the command, beside its code,
/// where `GET /v1/commands/{id}` shows the reason (and on its delivery).
async fn the_api_shows_what_the_agent_said(app: &TestApp, db: &TestDb) {
    let mut conn = db.raw().await;
    let row = sqlx::query("SELECT command_id FROM commands WHERE args LIKE '%\"19\"%'").fetch_one(&mut conn).await;
    let id: String = sqlx::Row::get(&row.expect("order 19"), 0);
    let token = crate::helpers::api_token(db, "demo", "ops", "commands:read");
    let view: serde_json::Value = app
        .client
        .get(app.url(&format!("/v1/commands/{id}")))
        .bearer_auth(token)
        .send()
        .await
        .expect("GET the command")
        .json()
        .await
        .expect("json");
    assert_eq!((&view["reason_code"], &view["reason_message"]), (&json!("ROUTE_DENIED"), &json!("no route to orders")));
    assert_eq!(view["deliveries"][0]["error_message"], "no route to orders", "{view}");
}

/// Issue 44.11: where Bloodbank's streams are not there yet, the gateway makes them with every
/// subject `compose/nats/streams.json` (59bee5d) declares: the replies in `…_COMMANDS`, the v2
/// maintenance failure beside the v1 events in `…_EVENTS`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_streams_the_gateway_makes_hold_every_subject_bloodbank_declares() {
    let Ok(url) = std::env::var(NATS_ENV) else {
        eprintln!("skipped: {NATS_ENV} is not set");
        return;
    };
    let prefix = format!("t{}.bloodbank", uuid::Uuid::now_v7().simple());
    let jetstream = chatgate::executors::jetstream::JetStream::new(&url, &prefix, "chatgate", Duration::from_secs(5));
    jetstream.consumer().await.expect("the streams made and the gateway's consumer on them");
    let context = async_nats::jetstream::new(async_nats::connect(url.as_str()).await.expect("NATS"));
    let name = prefix.to_uppercase().replace(['.', '-'], "_");
    let p = &prefix;
    for (suffix, subjects) in [
        ("COMMANDS", vec![format!("{p}.cmd.v1.>"), format!("{p}.rpy.v1.>")]),
        ("EVENTS", vec![format!("{p}.evt.v1.>"), format!("{p}.evt.v2.repo.maintenance.failed")]),
    ] {
        let mut stream = context.get_stream(format!("{name}_{suffix}")).await.expect("the stream");
        let subjects_made = stream.info().await.expect("its configuration").config.subjects.clone();
        let _ = context.delete_stream(format!("{name}_{suffix}")).await;
        assert_eq!(subjects_made, subjects, "{suffix}");
    }
}

/// The NATS server's URL and a fresh database of `backend`, or `None` (said) when either is not
/// configured.
async fn nats_and_database(backend: Backend) -> Option<(String, TestDb)> {
    let Ok(url) = std::env::var(NATS_ENV) else {
        eprintln!("skipped: {NATS_ENV} is not set");
        return None;
    };
    let Some(db) = TestDb::new(backend).await else {
        eprintln!("skipped: no {backend:?} database");
        return None;
    };
    Some((url, db))
}

async fn drop_database(db: TestDb, backend: Backend) {
    if backend == Backend::Postgres {
        db.drop_database().await;
    }
}

async fn round_trip(backend: Backend) {
    let Some((url, db)) = nats_and_database(backend).await else { return };
    let rig = Rig::start(&db, &url).await;
    ask(&rig.app, &db, 1..=20).await;
    let settled = all_settled(&db, 20, Duration::from_secs(30)).await;
    rig.check(&settled);
    told_as_the_agent_said(&db).await;
    the_api_shows_what_the_agent_said(&rig.app, &db).await;
    rig.stop().await;
    drop_database(db, backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn commands_round_trip_over_nats_jetstream_on_sqlite() {
    round_trip(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn commands_round_trip_over_nats_jetstream_on_postgres() {
    round_trip(Backend::Postgres).await;
}

/// An agent whose invocation waits for people's approval (chatgate's `invocation.waiting`, issue
/// #46) is asked again, once a supervisor approves, with the same command and idempotency key and
/// the grant in `data.context.approval`, and completes once.
async fn waiting_invocation(backend: Backend) {
    let Some((url, db)) = nats_and_database(backend).await else { return };
    let rig = Rig::start(&db, &url).await;
    ask(&rig.app, &db, 77..=77).await;
    let id = crate::helpers::command_of_message(&db, "wamid.Q77").await;
    crate::e2e_executor_approvals::supervisor_approves_the_wait(&db, &rig.app, id).await;
    let settled = all_settled(&db, 1, Duration::from_secs(30)).await;
    assert_eq!(settled[0].1, "executed", "{settled:?}");
    rig.check(&settled);
    let bodies = rig.ledger.bodies.lock().expect("lock").clone();
    let ours: Vec<&serde_json::Value> = bodies.iter().filter(|b| b["command_id"] == id.to_string()).collect();
    assert_eq!(ours.len(), 2, "handed over, then resumed");
    assert_eq!(ours[0]["idempotency_key"], ours[1]["idempotency_key"]);
    assert_ne!(ours[0]["id"], ours[1]["id"], "the resume is an event of its own");
    assert_eq!(ours[1]["data"]["context"]["approval"]["approvers"][0]["approver"], "15550000003");
    rig.stop().await;
    drop_database(db, backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiting_invocation_is_resumed_after_approval_on_sqlite() {
    waiting_invocation(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiting_invocation_is_resumed_after_approval_on_postgres() {
    waiting_invocation(Backend::Postgres).await;
}

/// Previews over NATS (issue #47): an `invocation.preview` request, the agent's
/// `invocation.previewed` shown in the prompt and carried by the invocation once confirmed; a
/// refusal told; no answer in time leaves a `required` preview refused.
async fn previews(backend: Backend) {
    let Some((url, db)) = nats_and_database(backend).await else { return };
    let rig = Rig::start_with(&db, &url, Some(&crate::e2e_previews::previewed("required"))).await;
    let meta = crate::helpers::Meta::new(&rig.app, &db);
    let customer = crate::helpers::CUSTOMER;
    for (id, text) in
        [("wamid.NP1", "refund 1234 25.00"), ("wamid.NP2", "refund 1266 5.00"), ("wamid.NP3", "refund 1299 5.00")]
    {
        assert_eq!(meta.text(id, customer, text).await.status(), 200);
    }
    let (shown, _, code) = crate::helpers::confirmation_of(&db, "wamid.NP1").await;
    let told = crate::e2e_approvals::replies_to(&db, customer).await;
    let (_, prompt) = told.iter().find(|(t, _)| t == "confirmation_prompt").expect("prompted");
    assert_eq!(prompt["preview"]["summary"], "Order 1234: refunding 25 of 80.00");
    for (message, reason) in [("wamid.NP2", "preview_refused"), ("wamid.NP3", "preview_unavailable")] {
        let id = crate::helpers::command_of_message(&db, message).await;
        assert_eq!(crate::helpers::settled(&db, id).await, "rejected");
        assert_eq!(crate::e2e_approvals::state_and_reason(&db, id).await.1.as_deref(), Some(reason));
    }
    assert_eq!(meta.text("wamid.NP1-yes", customer, &format!("YES {code}")).await.status(), 200);
    assert_eq!(crate::helpers::settled(&db, shown).await, "executed");
    let bodies = rig.ledger.bodies.lock().expect("lock").clone();
    let handed = bodies.iter().find(|b| b["command_id"] == shown.to_string()).expect("handed over");
    assert_eq!(handed["data"]["context"]["preview"]["summary"], "Order 1234: refunding 25 of 80.00");
    assert_eq!(rig.ledger.previews.lock().expect("lock").len(), 3, "each asked once");
    assert_eq!(rig.ledger.violations(), Vec::<String>::new());
    rig.stop().await;
    drop_database(db, backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn previews_over_nats_on_sqlite() {
    previews(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn previews_over_nats_on_postgres() {
    previews(Backend::Postgres).await;
}

/// A `nats-server -js` of the test's own, on a port and a store directory it keeps across a restart.
struct OwnServer {
    port: u16,
    store: tempfile::TempDir,
    process: std::process::Child,
}

impl OwnServer {
    fn start(port: u16, store: tempfile::TempDir) -> Self {
        let process = std::process::Command::new("nats-server")
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(store.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("nats-server (Debian's package; .ci/run installs it)");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "nats-server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { port, store, process }
    }

    /// Stops it as a service manager does (SIGTERM), and waits for it to be gone.
    fn stop(mut self) -> (u16, tempfile::TempDir) {
        let pid = self.process.id().to_string();
        let _ = std::process::Command::new("kill").args(["-TERM", &pid]).status();
        let _ = self.process.wait();
        (self.port, self.store)
    }
}

async fn restart_mid_run(backend: Backend) {
    // The shared server's URL only says that NATS tests run: this one has a server of its own.
    let Some((_, db)) = nats_and_database(backend).await else { return };
    let server = OwnServer::start(crate::cli::free_port(), tempfile::tempdir().expect("a store directory"));
    let url = format!("nats://127.0.0.1:{}", server.port);
    let rig = Rig::start(&db, &url).await;
    ask(&rig.app, &db, 1..=10).await;
    all_settled(&db, 10, Duration::from_secs(30)).await;

    // More commands, the server goes away while they are handed over, and more come while it is away.
    ask(&rig.app, &db, 11..=20).await;
    let (port, store) = server.stop();
    ask(&rig.app, &db, 21..=30).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pending = states(&db).await.iter().filter(|(_, s, _)| s != "executed" && s != "failed").count();
    assert!(pending >= 10, "commands wait while NATS is away ({pending} pending)");
    let server = OwnServer::start(port, store);
    let settled = all_settled(&db, 30, Duration::from_secs(90)).await;
    rig.check(&settled);
    assert_eq!(settled.iter().filter(|(_, s, _)| s == "executed").count(), 28, "nothing lost ({pending} pending)");
    rig.stop().await;
    drop(server.stop());
    drop_database(db, backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_nats_restart_with_commands_pending_loses_nothing_and_doubles_nothing_on_sqlite() {
    restart_mid_run(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_nats_restart_with_commands_pending_loses_nothing_and_doubles_nothing_on_postgres() {
    restart_mid_run(Backend::Postgres).await;
}
