//! A test agent written against Bloodbank's own contract (delorenj/bloodbank: the `EventEnvelope`
//! model of `event_producers/events/base.py`, the command envelope its hookd bridge builds, and
//! its command adapter's consumer and publisher), not against chatgate's code. It checks every
//! command it is given with the models' field rules, then answers the way Bloodbank's adapter
//! does: `.ack`, `.result` and `.error` events with their fields in `payload`, an error without an
//! ack when it declines a command, a `skipped` result for a key it has seen, and
//! `agent.{name}.state.changed` around its work.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions,
    QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Bloodbank's `TriggerType` (every value of its last RabbitMQ version).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TriggerType {
    Manual,
    Agent,
    Scheduled,
    Heartbeat,
    FileWatch,
    Hook,
    Webhook,
    Service,
}

/// Bloodbank's `Source`: who or what triggered the event.
#[derive(Debug, Deserialize)]
pub struct Source {
    pub host: String,
    #[serde(rename = "type")]
    pub trigger: TriggerType,
    /// What hookd's bridge wrote beside `type`.
    pub trigger_type: Option<TriggerType>,
    pub app: Option<String>,
    pub meta: Option<Map<String, Value>>,
}

/// Bloodbank's `EventEnvelope[T]` (extra fields are ignored, as pydantic does by default).
#[derive(Debug, Deserialize)]
pub struct EventEnvelope<T> {
    pub event_id: Uuid,
    pub event_type: String,
    #[serde(with = "time::serde::rfc3339")]
    pub timestamp: time::OffsetDateTime,
    pub version: String,
    pub source: Source,
    #[serde(default)]
    pub correlation_ids: Vec<Uuid>,
    #[serde(default)]
    pub agent_context: Option<Map<String, Value>>,
    pub payload: T,
}

/// The command envelope's `priority`.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    Low,
    Normal,
    High,
    Critical,
}

/// What Bloodbank's command adapter reads from a command's `payload`.
#[derive(Debug, Deserialize)]
pub struct CommandPayload {
    pub command_id: Uuid,
    pub target_agent: String,
    pub issued_by: String,
    pub action: String,
    pub priority: Priority,
    pub ttl_ms: u64,
    pub idempotency_key: Option<String>,
    pub command_payload: Map<String, Value>,
}

/// What a test agent (this one, or the NATS one) saw and did, for the test to check.
#[derive(Clone, Default)]
pub struct Ledger {
    /// Effects per idempotency key (more than 1 is a double execution).
    pub effects: Arc<Mutex<HashMap<String, u32>>>,
    /// Commands received per idempotency key (RabbitMQ) or command id (NATS).
    pub seen: Arc<Mutex<HashMap<String, u32>>>,
    /// What did not read as Bloodbank's models or schemas say it must.
    pub violations: Arc<Mutex<Vec<String>>>,
    /// Every command body, as published.
    pub bodies: Arc<Mutex<Vec<Value>>>,
    /// Every preview request (chatgate's own phase, issue #47), as published.
    pub previews: Arc<Mutex<Vec<Value>>>,
}

impl Ledger {
    pub fn violations(&self) -> Vec<String> {
        self.violations.lock().expect("lock").clone()
    }

    pub fn violation(&self, what: String) {
        self.violations.lock().expect("lock").push(what);
    }
}

/// Plays the agent `name` on `queue` until stopped, connecting again after a broker restart.
pub async fn run(url: String, exchange: String, queue: String, ledger: Ledger, stopping: CancellationToken) {
    while !stopping.is_cancelled() {
        let session = serve(&url, &exchange, &queue, &ledger, &stopping);
        // A broker half up may leave a session waiting on it forever: give each one a bound.
        match tokio::time::timeout(Duration::from_secs(20), session).await {
            Ok(Err(error)) => eprintln!("test agent: {error}; connecting again"),
            Err(_) => eprintln!("test agent: a session ran out of time; connecting again"),
            Ok(Ok(())) => {}
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn serve(
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
    let bind = QueueBindOptions::default();
    // Bloodbank's binding for an agent's queue: `command.{agent}.#`.
    channel.queue_bind(queue.into(), exchange.into(), "command.orders.#".into(), bind, FieldTable::default()).await?;
    channel.confirm_select(ConfirmSelectOptions::default()).await?;
    let options = BasicConsumeOptions::default();
    let mut consumer = channel.basic_consume(queue.into(), "test-agent".into(), options, FieldTable::default()).await?;
    loop {
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
        // As Bloodbank's adapter parses it: `command.{agent}.{action}`; the lifecycle suffixes
        // (and chatgate's `.cancel`) are not commands.
        let agent = Agent { channel: &channel, exchange, ledger };
        if delivery.routing_key.as_str().split('.').count() == 3 {
            agent.handle(delivery.routing_key.as_str(), &delivery.properties, &delivery.data).await?;
        } else if delivery.routing_key.as_str().ends_with(".preview") {
            agent.preview(delivery.routing_key.as_str(), &delivery.data).await?;
        }
        delivery.ack(BasicAckOptions::default()).await?;
    }
}

struct Agent<'a> {
    channel: &'a Channel,
    exchange: &'a str,
    ledger: &'a Ledger,
}

impl Agent<'_> {
    async fn handle(&self, routing_key: &str, properties: &BasicProperties, data: &[u8]) -> Result<(), lapin::Error> {
        let body: Value = serde_json::from_slice(data).unwrap_or(Value::Null);
        self.ledger.bodies.lock().expect("lock").push(body.clone());
        let command = match check(routing_key, properties, &body) {
            Ok(command) => command,
            Err(violation) => {
                self.ledger.violation(violation);
                return Ok(());
            }
        };
        let payload = &command.payload;
        let key = payload.idempotency_key.clone().unwrap_or_default();
        let order = payload.command_payload["order_id"].as_str().unwrap_or_default().to_owned();
        let seen = {
            let mut seen = self.ledger.seen.lock().expect("lock");
            let count = seen.entry(key.clone()).or_default();
            *count += 1;
            *count
        };
        let reply = Reply { agent: self, routing_key, command: &command, body: &body };
        // 77 waits for a supervisor's approval before it does anything (chatgate's `.waiting`),
        // and does the work once when the command comes back with the grant.
        if order == "77" {
            let grant = &body["payload"]["approval"];
            if grant["decision"] == "approved" {
                *self.ledger.effects.lock().expect("lock").entry(key).or_default() += 1;
                let result = json!({"outcome": "success", "result_payload": {"order": order,
                    "approved_by": grant["approvers"][0]["approver"]}});
                return reply.send("result", result).await;
            }
            reply.send("ack", json!({"fsm_version": 1})).await?;
            let waiting = json!({"reason": "refund_review", "message": "a supervisor reviews this one",
                "roles": ["supervisor"]});
            return reply.send("waiting", waiting).await;
        }
        match order.as_str() {
            // Busy the first time (the adapter's INVALID_STATE guard): an error, no ack.
            o if o.ends_with("17") && seen == 1 => {
                let error = json!({"error_code": "invalid_state", "error_message": "Agent orders not idle",
                    "retryable": true, "retry_after_ms": 200});
                return reply.send("error", error).await;
            }
            // Expired on arrival (the adapter's TTL guard): an error, no ack, not retryable.
            o if o.ends_with("19") => {
                let error = json!({"error_code": "ttl_expired", "error_message": "Command expired",
                    "retryable": false});
                return reply.send("error", error).await;
            }
            _ => {}
        }
        if order.ends_with("13") {
            reply.send("ack", json!({"fsm_version": 1})).await?;
            let error = json!({"error_code": "rejected", "error_message": "no such order", "retryable": false});
            return reply.send("error", error).await;
        }
        // The replay rule: a key seen before is `skipped`, without an ack or a state change.
        let first = self.ledger.effects.lock().expect("lock").insert(key.clone(), 1).is_none();
        if !first {
            let result = json!({"outcome": "skipped", "result_payload": null});
            return reply.send("result", result).await;
        }
        reply.send("ack", json!({"fsm_version": 1})).await?;
        self.state("working").await?;
        let result = json!({"outcome": "success", "duration_ms": 5,
            "result_payload": {"order": order, "state": "shipped"}});
        reply.send("result", result).await?;
        self.state("idle").await
    }

    /// A preview request (docs/BLOODBANK.md, "Previews"): order *66 is refused, order *99 gets
    /// no answer at all, any other is previewed; the answer goes to `....previewed`.
    async fn preview(&self, routing_key: &str, data: &[u8]) -> Result<(), lapin::Error> {
        let body: Value = serde_json::from_slice(data).unwrap_or(Value::Null);
        self.ledger.previews.lock().expect("lock").push(body.clone());
        let payload = &body["payload"];
        let order = payload["command_payload"]["order_id"].as_str().unwrap_or_default().to_owned();
        let amount = payload["command_payload"]["amount"].as_str().unwrap_or_default().to_owned();
        let mut answer = json!({"command_id": payload["command_id"], "target_agent": payload["target_agent"],
            "action": payload["action"]});
        let said = if order.ends_with("99") {
            return Ok(());
        } else if order.ends_with("66") {
            json!({"status": "refused", "error": {"code": "order_closed", "message": format!("order {order} is closed")}})
        } else {
            json!({"status": "preview", "preview": {"summary": format!("Order {order}: refunding {amount} of 80.00")}})
        };
        if let (Some(answer), Some(said)) = (answer.as_object_mut(), said.as_object()) {
            answer.extend(said.clone());
        }
        let correlation = body["correlation_id"].as_str().map(str::to_owned);
        let mut event = envelope("command.previewed", answer, correlation);
        event["causation_id"] = body["event_id"].clone();
        self.publish(&format!("{}ed", routing_key), event).await
    }

    async fn state(&self, state: &str) -> Result<(), lapin::Error> {
        let body = envelope("agent.orders.state.changed", json!({"agent_name": "orders", "state": state}), None);
        self.publish("agent.orders.state.changed", body).await
    }

    async fn publish(&self, routing_key: &str, body: Value) -> Result<(), lapin::Error> {
        let properties = BasicProperties::default().with_delivery_mode(2).with_content_type("application/json".into());
        self.channel
            .basic_publish(
                self.exchange.into(),
                routing_key.into(),
                BasicPublishOptions::default(),
                body.to_string().as_bytes(),
                properties,
            )
            .await?
            .await
            .map(|_| ())
    }
}

/// One answer to one command, as Bloodbank's `CommandEventPublisher` builds it.
struct Reply<'a> {
    agent: &'a Agent<'a>,
    routing_key: &'a str,
    command: &'a EventEnvelope<CommandPayload>,
    body: &'a Value,
}

impl Reply<'_> {
    async fn send(&self, suffix: &str, fields: Value) -> Result<(), lapin::Error> {
        let payload = &self.command.payload;
        let mut answer = json!({"command_id": payload.command_id, "target_agent": payload.target_agent,
            "action": payload.action});
        if let (Some(answer), Some(fields)) = (answer.as_object_mut(), fields.as_object()) {
            answer.extend(fields.clone());
        }
        let correlation = self.body["correlation_id"].as_str().map(str::to_owned);
        let mut event = envelope(&format!("command.{suffix}"), answer, correlation);
        event["causation_id"] = json!(self.command.event_id);
        self.agent.publish(&format!("{}.{suffix}", self.routing_key), event).await
    }
}

fn envelope(event_type: &str, payload: Value, correlation_id: Option<String>) -> Value {
    json!({
        "event_id": Uuid::new_v4(), "event_type": event_type,
        "timestamp": time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default(),
        "version": "1.0", "source": {"host": "test-agent", "type": "service", "app": "command-adapter"},
        "correlation_id": correlation_id.unwrap_or_else(|| Uuid::new_v4().to_string()),
        "payload": payload,
    })
}

/// A command as Bloodbank's models and adapter require it, or what is wrong with it.
pub fn check(
    routing_key: &str,
    properties: &BasicProperties,
    body: &Value,
) -> Result<EventEnvelope<CommandPayload>, String> {
    let command: EventEnvelope<CommandPayload> =
        serde_json::from_value(body.clone()).map_err(|e| format!("{routing_key}: not Bloodbank's envelope: {e}"))?;
    let payload = &command.payload;
    let expected_key = format!("command.{}.{}", payload.target_agent, payload.action);
    let message_id = properties.message_id().as_ref().map(|m| m.as_str().to_owned());
    let correlation = properties.correlation_id().as_ref().map(|c| c.as_str().to_owned());
    let age = time::OffsetDateTime::now_utc() - command.timestamp;
    let problems = [
        (routing_key == expected_key, format!("routing key {routing_key}, payload says {expected_key}")),
        (command.event_type == routing_key, format!("event_type {}", command.event_type)),
        (payload.target_agent == "orders", format!("target_agent {}", payload.target_agent)),
        (message_id == Some(command.event_id.to_string()), format!("message_id {message_id:?}")),
        (correlation.as_deref() == body["correlation_id"].as_str(), format!("correlation_id {correlation:?}")),
        (properties.delivery_mode() == &Some(2), "not persistent".to_owned()),
        (!command.version.is_empty() && !command.source.host.is_empty(), "version or source.host empty".to_owned()),
        (payload.idempotency_key.as_deref().is_some_and(|k| !k.is_empty()), "no idempotency_key".to_owned()),
        (!payload.issued_by.is_empty(), "no issued_by".to_owned()),
        (payload.priority != Priority::Critical, "a chat command is never critical".to_owned()),
        (payload.ttl_ms < 24 * 3_600_000, format!("ttl_ms {}", payload.ttl_ms)),
        (command.source.app.as_deref() == Some("chatgate"), format!("source.app {:?}", command.source.app)),
        (matches!(command.source.trigger, TriggerType::Hook), format!("source.type {:?}", command.source.trigger)),
        (
            matches!(command.source.trigger_type, Some(TriggerType::Hook)),
            format!("source.trigger_type {:?}", command.source.trigger_type),
        ),
        (command.source.meta.as_ref().is_some_and(|m| m.contains_key("tenant_id")), "no source.meta".to_owned()),
        (age.abs() < time::Duration::minutes(5), format!("timestamp {}", command.timestamp)),
        (!command.correlation_ids.is_empty(), "no correlation_ids".to_owned()),
        (command.agent_context.is_none(), "an agent context from a gateway".to_owned()),
    ];
    match problems.into_iter().find(|(ok, _)| !ok) {
        Some((_, problem)) => Err(format!("{routing_key}: {problem}")),
        None => Ok(command),
    }
}
