//! Issue 31: the gateway (the real binary, answering at durability as shipped) killed with
//! SIGKILL while webhooks stream in, and started again on the same database, the sender sending
//! again what was not answered 200 (as Meta does): every delivery answered 200 — before the kill,
//! or after it, including those stored and not answered when it came — becomes exactly one
//! command, executed, its effect once, and its reply sent.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chatgate::channels::whatsapp::simulate::{notification, text};

use crate::fake_graph::{FakeGraph, FakeServer};
use crate::helpers::{DEMO_NUMBER, TestDb, on_both_backends};
use crate::process::ConfigDir;

const DELIVERIES: usize = 240;
/// The 200s after which the gateway is killed.
const KILL_AFTER: usize = 80;
const SENDERS: usize = 8;

/// Sends the deliveries, `SENDERS` at a time, each until it is answered 200 (as Meta retries).
async fn stream(base: Arc<Mutex<String>>, secret: Vec<u8>, answered: Arc<Mutex<BTreeSet<usize>>>) {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().expect("client");
    let next = Arc::new(Mutex::new(0usize));
    let senders = (0..SENDERS).map(|_| {
        let (client, base, secret, answered, next) =
            (client.clone(), base.clone(), secret.clone(), answered.clone(), next.clone());
        async move {
            loop {
                let n = {
                    let mut next = next.lock().expect("lock");
                    *next += 1;
                    *next - 1
                };
                if n >= DELIVERIES {
                    return;
                }
                // The customer of the shipped directory, and one delivery per message.
                let message = text(&format!("wamid.KILL{n}"), crate::helpers::CUSTOMER, &format!("order status {n}"));
                let bytes = notification(DEMO_NUMBER, vec![message], vec![]).to_string().into_bytes();
                let signature = chatgate::channels::whatsapp::signature::sign(&secret, &bytes);
                // As Meta does, a delivery not answered 200 is sent again until it is.
                let deadline = Instant::now() + Duration::from_secs(30);
                loop {
                    let url = format!("{}/webhooks/whatsapp", base.lock().expect("lock"));
                    let sent = client
                        .post(url)
                        .header("content-type", "application/json")
                        .header("x-hub-signature-256", signature.clone())
                        .body(bytes.clone())
                        .send()
                        .await;
                    if sent.is_ok_and(|r| r.status() == reqwest::StatusCode::OK) {
                        answered.lock().expect("lock").insert(n);
                        break;
                    }
                    assert!(Instant::now() < deadline, "delivery {n} was never answered 200");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    });
    futures_util::future::join_all(senders).await;
}

async fn every_acknowledged_delivery_survives_a_sigkill(db: &TestDb) {
    let graph = FakeGraph::start().await;
    let executor = FakeServer::succeeding_executor().await;
    // One customer sends them all: their rate limit is lifted. What the killed instance had
    // claimed is taken again once its lease runs out: twice the longest executor request timeout.
    let config = ConfigDir::shipped(|config| {
        config
            .replace("poll_interval_ms = 250", "poll_interval_ms = 20")
            .replace("lease_ms = 30000", "lease_ms = 2000")
            .replace("actor = { per_minute = 30, burst = 10 }", "actor = { per_minute = 60000, burst = 10000 }")
            .replace("[executors.orders]\n", "[executors.orders]\nrequest_timeout_ms = 1000\n")
            .replace("[executors.gateway]\n", "[executors.gateway]\nrequest_timeout_ms = 1000\n")
    });
    let env = [
        ("CHATGATE_DATABASE_URL", db.url.as_str()),
        ("CHATGATE_ORDERS_EXECUTOR_URL", executor.url.as_str()),
        ("CHATGATE_WHATSAPP_API_BASE", graph.url.as_str()),
        ("CHATGATE_WHATSAPP_ACCESS_TOKEN", "test-access-token"),
    ];
    let mut gateway = crate::process::start(&config.path(), &env).await;
    let base = Arc::new(Mutex::new(gateway.base.clone()));
    let answered = Arc::new(Mutex::new(BTreeSet::new()));
    let secret = db.config.whatsapp.apps["default"].app_secret.expose().as_bytes().to_owned();
    let streaming = tokio::spawn(stream(base.clone(), secret, answered.clone()));
    let deadline = Instant::now() + Duration::from_secs(30);
    while answered.lock().expect("lock").len() < KILL_AFTER {
        assert!(Instant::now() < deadline, "the gateway did not answer {KILL_AFTER} webhooks");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    gateway.kill();
    let at_kill = answered.lock().expect("lock").len();
    // While it is down the senders' webhooks fail (not acknowledged); then it is back.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let again = crate::process::start(&config.path(), &env).await;
    *base.lock().expect("lock") = again.base.clone();
    streaming.await.expect("the stream");
    let answered: BTreeSet<usize> = answered.lock().expect("lock").clone();
    assert!(at_kill < DELIVERIES && answered.len() == DELIVERIES, "killed mid-stream: {at_kill} of {DELIVERIES}");

    // Every acknowledged delivery: one command, executed, one effect, a reply.
    let ids: Vec<String> = answered.iter().map(|n| format!("wamid.KILL{n}")).collect();
    let executed = wait_executed(db, &ids).await;
    let mut conn = db.raw().await;
    let states: Vec<(String, i64)> = sqlx::query_as("SELECT state, COUNT(*) FROM commands GROUP BY state")
        .fetch_all(&mut conn)
        .await
        .expect("states");
    let inbox: Vec<(i64,)> = sqlx::query_as("SELECT COUNT(*) FROM inbox WHERE admitted_at IS NULL")
        .fetch_all(&mut db.raw_inbox().await)
        .await
        .expect("inbox");
    let statuses: Vec<(String, i64)> = sqlx::query_as("SELECT status, COUNT(*) FROM inbound_messages GROUP BY status")
        .fetch_all(&mut conn)
        .await
        .expect("statuses");
    assert_eq!(
        executed.len(),
        ids.len(),
        "one command for each acknowledged delivery: {states:?} {inbox:?} {statuses:?}"
    );
    let commands: BTreeSet<&String> = executed.values().collect();
    assert_eq!(commands.len(), ids.len(), "no two deliveries share a command");
    let calls = executor.requests();
    let keys: BTreeMap<String, usize> = calls.iter().fold(BTreeMap::new(), |mut keys, call| {
        *keys.entry(call.headers["idempotency-key"].clone()).or_default() += 1;
        keys
    });
    assert!(keys.len() >= ids.len(), "every acknowledged command was handed to the executor");
    let stored = db.count("SELECT COUNT(*) FROM commands WHERE tenant_id = $1", "demo").await as usize;
    assert!(keys.len() <= stored, "no command handed over under two keys: its effect is done once");
    let replies = graph.wait_for(ids.len(), Duration::from_secs(60)).await;
    let quoted: BTreeSet<String> =
        replies.iter().filter_map(|r| r.body["context"]["message_id"].as_str().map(str::to_owned)).collect();
    let unanswered: Vec<&String> = ids.iter().filter(|id| !quoted.contains(*id)).collect();
    assert!(unanswered.is_empty(), "every acknowledged message is answered: {unanswered:?}");
    let audit = db.store.evidence().verify().await.expect("verify");
    assert!(audit.chains.iter().all(|c| c.intact), "the evidence chains are whole: {:?}", audit.first_break);
    drop(again);
}

/// The command each message started, once every one is executed (a minute at most: a debug
/// build on a machine that runs the rest of the suite meanwhile).
async fn wait_executed(db: &TestDb, ids: &[String]) -> BTreeMap<String, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut conn = db.raw().await;
        let rows = sqlx::query(
            "SELECT m.provider_message_id, c.command_id, c.state FROM inbound_messages m
             JOIN commands c ON c.command_id = m.command_id",
        )
        .fetch_all(&mut conn)
        .await
        .expect("read");
        let mut executed = BTreeMap::new();
        for row in &rows {
            let message: String = sqlx::Row::get(row, 0);
            let (command, state): (String, String) = (sqlx::Row::get(row, 1), sqlx::Row::get(row, 2));
            if ids.contains(&message) && state == "executed" {
                executed.insert(message, command);
            }
        }
        if executed.len() == ids.len() || Instant::now() > deadline {
            return executed;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

on_both_backends!(every_acknowledged_delivery_survives_a_sigkill);
