//! RabbitMQ executors against the real broker (`CHATGATE_TEST_AMQP_URL`): commands published with
//! confirms to the Bloodbank topic exchange, a test consumer that plays the agent (ack, result,
//! error, and its own dedupe by idempotency key), and a broker restart while commands are
//! pending: nothing lost, nothing doubled.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions,
    QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Connection, ConnectionProperties, ExchangeKind};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::helpers::{Backend, CUSTOMER, Meta, TestApp, TestDb, spawn_app_with};

const AMQP_ENV: &str = "CHATGATE_TEST_AMQP_URL";

/// The agent's ledger: effects and messages seen per idempotency key.
#[derive(Clone, Default)]
struct Ledger {
    effects: Arc<Mutex<HashMap<String, u32>>>,
    seen: Arc<Mutex<HashMap<String, u32>>>,
}

/// Plays the agent `orders` until stopped, connecting again after a broker restart.
async fn agent(url: String, exchange: String, queue: String, ledger: Ledger, stopping: CancellationToken) {
    while !stopping.is_cancelled() {
        let session = serve_agent(&url, &exchange, &queue, &ledger, &stopping);
        // A broker half up may leave a session waiting on it forever: give each one a bound
        // (every command of the test fits in it many times over).
        match tokio::time::timeout(Duration::from_secs(20), session).await {
            Ok(Err(error)) => eprintln!("test agent: {error}; connecting again"),
            Err(_) => eprintln!("test agent: a session ran out of time; connecting again"),
            Ok(Ok(())) => {}
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn serve_agent(
    url: &str,
    exchange: &str,
    queue: &str,
    ledger: &Ledger,
    stopping: &CancellationToken,
) -> Result<(), lapin::Error> {
    let connection = Connection::connect(url, ConnectionProperties::default()).await?;
    let channel = connection.create_channel().await?;
    let durable = ExchangeDeclareOptions { durable: true, ..ExchangeDeclareOptions::default() };
    channel.exchange_declare(exchange.into(), ExchangeKind::Topic, durable, FieldTable::default()).await?;
    let durable = QueueDeclareOptions { durable: true, ..QueueDeclareOptions::default() };
    channel.queue_declare(queue.into(), durable, FieldTable::default()).await?;
    channel
        .queue_bind(
            queue.into(),
            exchange.into(),
            "command.orders.#".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await?;
    channel.confirm_select(ConfirmSelectOptions::default()).await?;
    let mut consumer = channel
        .basic_consume(queue.into(), "test-agent".into(), BasicConsumeOptions::default(), FieldTable::default())
        .await?;
    loop {
        // Like the gateway's listener, the agent notices a connection the broker dropped.
        let next = tokio::select! {
            () = stopping.cancelled() => return Ok(()),
            next = consumer.next() => next,
            () = tokio::time::sleep(Duration::from_secs(1)) => {
                if connection.status().connected() && channel.status().connected() {
                    continue;
                }
                return Ok(());
            }
        };
        let Some(delivery) = next else { return Ok(()) };
        let delivery = delivery?;
        // `command.orders.#` also matches the responses (`...ack`, `.result`, `.error`): only
        // `command.orders.{action}` is a command.
        if delivery.routing_key.as_str().split('.').count() != 3 {
            delivery.ack(BasicAckOptions::default()).await?;
            continue;
        }
        let command: Value = serde_json::from_slice(&delivery.data).unwrap_or(Value::Null);
        let key = command["idempotency_key"].as_str().unwrap_or_default().to_owned();
        let order = command["payload"]["args"]["order_id"].as_str().unwrap_or_default().to_owned();
        let base = json!({
            "command_id": command["command_id"], "causation_id": command["causation_id"], "target_agent": "orders",
            "correlation_id": command["correlation_id"],
        });
        let routing = delivery.routing_key.as_str().to_owned();
        let publish = |suffix: &str, body: Value| {
            let channel = channel.clone();
            let key = format!("{routing}.{suffix}");
            async move {
                channel
                    .basic_publish(
                        exchange.into(),
                        key.as_str().into(),
                        BasicPublishOptions::default(),
                        body.to_string().as_bytes(),
                        BasicProperties::default().with_delivery_mode(2),
                    )
                    .await?
                    .await
            }
        };
        publish("ack", base.clone()).await?;
        *ledger.seen.lock().expect("lock").entry(key.clone()).or_default() += 1;
        if order.ends_with("13") {
            let mut error = base.clone();
            error["error_code"] = "rejected".into();
            error["error_message"] = "no such order".into();
            error["retryable"] = false.into();
            publish("error", error).await?;
        } else {
            // The Bloodbank replay rule: a key seen before is `skipped`, not done again.
            let first = {
                let mut effects = ledger.effects.lock().expect("lock");
                let first = !effects.contains_key(&key);
                effects.entry(key.clone()).or_insert(1);
                first
            };
            let mut result = base.clone();
            result["outcome"] = if first { "success" } else { "skipped" }.into();
            result["result_payload"] = json!({"order": order, "state": "shipped"});
            publish("result", result).await?;
        }
        delivery.ack(BasicAckOptions::default()).await?;
    }
}

fn rabbitmqctl(args: &[&str]) {
    let status = std::process::Command::new("rabbitmqctl").args(args).stdout(std::process::Stdio::null()).status();
    assert!(status.is_ok_and(|s| s.success()), "rabbitmqctl {args:?}");
}

async fn states(db: &TestDb) -> Vec<(String, String, Option<String>)> {
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

async fn all_settled(db: &TestDb, expected: usize, within: Duration) -> Vec<(String, String, Option<String>)> {
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

async fn ask(app: &TestApp, db: &TestDb, orders: std::ops::RangeInclusive<u32>) {
    let meta = Meta::new(app, db);
    for n in orders {
        assert_eq!(meta.text(&format!("wamid.Q{n}"), CUSTOMER, &format!("order status {n}")).await.status(), 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn commands_round_trip_over_rabbitmq_and_survive_a_broker_restart() {
    let Ok(url) = std::env::var(AMQP_ENV) else {
        eprintln!("skipped: {AMQP_ENV} is not set");
        return;
    };
    let db = TestDb::new(Backend::Sqlite).await.expect("sqlite");
    let run = uuid::Uuid::now_v7().simple().to_string();
    let exchange = format!("test.bloodbank.{run}");
    let mut config = db.config.clone();
    config.outbound.poll_interval_ms = 20;
    let orders = config.executors.get_mut("orders").expect("orders");
    orders.url = url.clone();
    orders.exchange = Some(exchange.clone());
    orders.queue = Some(format!("test.chatgate.{run}"));
    orders.max_attempts = 200;
    orders.backoff_initial_ms = 100;
    orders.backoff_max_ms = 500;
    let ledger = Ledger::default();
    let stopping = CancellationToken::new();
    // The agent's queue exists before anything is published to it.
    let agent_task = tokio::spawn(agent(
        url.clone(),
        exchange.clone(),
        format!("test.agent.orders.{run}"),
        ledger.clone(),
        stopping.clone(),
    ));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let app = spawn_app_with(&db, config).await;

    // Round trip: ack and result (or error) come back over the bus and end each command.
    ask(&app, &db, 1..=20).await;
    let settled = all_settled(&db, 20, Duration::from_secs(30)).await;
    for (order, state, reason) in &settled {
        let expected = if order == "13" { ("failed", Some("rejected")) } else { ("executed", None) };
        assert_eq!((state.as_str(), reason.as_deref()), expected, "order {order}");
    }

    // The broker goes away with commands pending, and comes back.
    rabbitmqctl(&["stop_app"]);
    ask(&app, &db, 21..=40).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        states(&db).await.iter().filter(|(_, s, _)| s == "started").count(),
        20,
        "pending while the broker is down"
    );
    rabbitmqctl(&["start_app"]);
    let settled = all_settled(&db, 40, Duration::from_secs(90)).await;
    assert_eq!(settled.iter().filter(|(_, s, _)| s == "executed").count(), 39, "nothing lost (order 13 is refused)");
    let effects = ledger.effects.lock().expect("lock").clone();
    let seen = ledger.seen.lock().expect("lock").clone();
    assert_eq!(effects.len(), 39, "effects {effects:?} seen {seen:?}");
    assert!(effects.values().all(|n| *n == 1), "nothing done twice");

    stopping.cancel();
    let _ = agent_task.await;
    app.stop().await.expect("stop");
    // The broker is shared: leave nothing behind.
    let connection = Connection::connect(&url, ConnectionProperties::default()).await.expect("broker");
    let channel = connection.create_channel().await.expect("channel");
    for queue in [format!("test.agent.orders.{run}"), format!("test.chatgate.{run}")] {
        let _ = channel.queue_delete(queue.as_str().into(), lapin::options::QueueDeleteOptions::default()).await;
    }
    let _ = channel.exchange_delete(exchange.as_str().into(), lapin::options::ExchangeDeleteOptions::default()).await;
}
