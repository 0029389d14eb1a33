//! RabbitMQ executors (the Bloodbank bus): commands are published, persistent and with publisher
//! confirms, to a durable topic exchange with routing key `command.{agent}.{action}`; the row is
//! done only once the broker confirmed. The gateway's own durable queue receives the agents'
//! `command.*.*.ack` / `.result` / `.error` and `agent.*.state.changed`, which become the
//! delivery's ACKs. Connections are made lazily and made again after a broker restart.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use lapin::Confirmation;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions,
    ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use serde_json::{Value, json};
use time::OffsetDateTime;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::executors::acks::AckError;

use crate::executors::acks::AckRequest;

use crate::domain::agent::Agent;
use crate::domain::agent::AgentState;
use crate::domain::command::CommandEnvelope;
use crate::executors::acks::apply_ack;
use crate::service::engine::Engine;

/// One broker connection and exchange, shared by the executors that use it.
pub struct Bus {
    pub url: String,
    pub exchange: String,
    /// The gateway's own queue for responses.
    pub queue: String,
    /// How long connecting, publishing and waiting for the confirm may take: a broker that is
    /// half up (restarting, overloaded) must not hold every publish behind it.
    pub timeout: Duration,
    publisher: Mutex<Option<(Connection, Channel)>>,
}

impl std::fmt::Debug for Bus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bus").field("exchange", &self.exchange).field("queue", &self.queue).finish_non_exhaustive()
    }
}

/// Why a publish did not happen; always worth another attempt.
pub type PublishError = String;

impl Bus {
    pub fn new(url: &str, exchange: &str, queue: &str, timeout: Duration) -> Self {
        Self {
            url: url.to_owned(),
            exchange: exchange.to_owned(),
            queue: queue.to_owned(),
            timeout,
            publisher: Mutex::new(None),
        }
    }

    async fn open(&self) -> Result<(Connection, Channel), lapin::Error> {
        let connection = Connection::connect(&self.url, ConnectionProperties::default()).await?;
        let channel = connection.create_channel().await?;
        // The responses' queue exists before any command is published, so no agent answer can
        // be routed nowhere while the listener is still connecting.
        self.declare(&channel).await?;
        channel.confirm_select(ConfirmSelectOptions::default()).await?;
        Ok((connection, channel))
    }

    /// The exchange and the gateway's response queue with its bindings (idempotent).
    async fn declare(&self, channel: &Channel) -> Result<(), lapin::Error> {
        declare_exchange(channel, &self.exchange).await?;
        let durable = QueueDeclareOptions { durable: true, ..QueueDeclareOptions::default() };
        channel.queue_declare(self.queue.as_str().into(), durable, FieldTable::default()).await?;
        for pattern in ["command.*.*.ack", "command.*.*.result", "command.*.*.error", "agent.*.state.changed"] {
            channel
                .queue_bind(
                    self.queue.as_str().into(),
                    self.exchange.as_str().into(),
                    pattern.into(),
                    QueueBindOptions::default(),
                    FieldTable::default(),
                )
                .await?;
        }
        Ok(())
    }

    /// Publishes one command and waits for the broker's confirm, within `timeout`. A message no
    /// queue is bound for comes back (mandatory) and counts as not delivered; a broker that does
    /// not answer in time counts as not delivered too (the next publish connects again, and the
    /// agent's replay rule makes a second copy harmless).
    pub async fn publish(&self, routing_key: &str, body: &[u8], message_id: &str) -> Result<(), PublishError> {
        let mut publisher = self.publisher.lock().await;
        let attempt = self.publish_on(&mut publisher, routing_key, body, message_id);
        match tokio::time::timeout(self.timeout, attempt).await {
            Ok(result) => result,
            Err(_) => {
                *publisher = None;
                Err(format!("the broker did not confirm within {} ms", self.timeout.as_millis()))
            }
        }
    }

    async fn publish_on(
        &self,
        publisher: &mut Option<(Connection, Channel)>,
        routing_key: &str,
        body: &[u8],
        message_id: &str,
    ) -> Result<(), PublishError> {
        if publisher.as_ref().is_none_or(|(c, ch)| !c.status().connected() || !ch.status().connected()) {
            *publisher = Some(self.open().await.map_err(|e| format!("cannot reach the broker: {e}"))?);
        }
        let Some((_, channel)) = publisher.as_ref() else {
            return Err("no broker channel".into());
        };
        let properties = BasicProperties::default()
            .with_delivery_mode(2)
            .with_content_type("application/json".into())
            .with_message_id(message_id.into());
        let options = BasicPublishOptions { mandatory: true, ..BasicPublishOptions::default() };
        let result = async {
            channel
                .basic_publish(self.exchange.as_str().into(), routing_key.into(), options, body, properties)
                .await?
                .await
        }
        .await;
        match result {
            Ok(Confirmation::Ack(None)) => Ok(()),
            Ok(Confirmation::Ack(Some(_))) => Err(format!("no queue is bound for `{routing_key}`")),
            Ok(Confirmation::Nack(_)) => Err("the broker refused the message (nack)".into()),
            Ok(Confirmation::NotRequested) => Err("the broker did not confirm".into()),
            Err(error) => {
                // The next publish connects again.
                *publisher = None;
                Err(format!("publish failed: {error}"))
            }
        }
    }
}

async fn declare_exchange(channel: &Channel, exchange: &str) -> Result<(), lapin::Error> {
    let options = ExchangeDeclareOptions { durable: true, ..ExchangeDeclareOptions::default() };
    channel.exchange_declare(exchange.into(), ExchangeKind::Topic, options, FieldTable::default()).await
}

/// The routing key of a command for `agent`.
pub fn routing_key(agent: &str, envelope: &CommandEnvelope) -> String {
    format!("command.{agent}.{}", envelope.intent.action)
}

/// The Bloodbank command envelope (seed §3.1) for a command.
pub fn wire_envelope(agent: &str, envelope: &CommandEnvelope, now: OffsetDateTime) -> Value {
    let ttl_ms = envelope.expires_at.map(|at| (at - now).whole_milliseconds().max(0)).unwrap_or(0);
    let priority = match envelope.risk.as_str() {
        "high" => "high",
        _ => "normal",
    };
    json!({
        "event_id": Uuid::now_v7(),
        "event_type": routing_key(agent, envelope),
        "source": "chatgate",
        "timestamp": now.format(&time::format_description::well_known::Rfc3339).unwrap_or_default(),
        "correlation_id": envelope.correlation_id,
        "causation_id": envelope
            .causation_id
            .as_ref()
            .map_or_else(|| envelope.command_id.to_string(), |c| c.as_str().to_owned()),
        "command_id": envelope.command_id,
        "target_agent": agent,
        "issued_by": format!("chatgate:{}", envelope.tenant_id),
        "priority": priority,
        "ttl_ms": ttl_ms,
        "idempotency_key": envelope.idempotency_key,
        "payload": {
            "tenant_id": envelope.tenant_id,
            "actor_id": envelope.actor_id,
            "intent": envelope.intent,
            "args": envelope.args,
            "command_kind": envelope.command_kind,
            "risk": envelope.risk,
        },
    })
}

/// What an agent's message on the bus means for a delivery, read from its routing key and body.
pub fn response_ack(routing_key: &str, body: &Value, target: &str) -> Option<(Uuid, AckRequest)> {
    let command_id: Uuid = body["command_id"].as_str()?.parse().ok()?;
    let ack = |kind: &str, status: Option<&str>, result: Option<Value>, error: Option<Value>| AckRequest {
        target: Some(target.to_owned()),
        kind: kind.to_owned(),
        status: status.map(str::to_owned),
        result,
        error,
    };
    let request = if routing_key.ends_with(".ack") {
        ack("delivery", None, None, None)
    } else if routing_key.ends_with(".result") {
        // `skipped` is the agent's own dedupe firing: the work was done before.
        ack("execution", Some("succeeded"), Some(body["result_payload"].clone()), None)
    } else if routing_key.ends_with(".error") {
        let error = json!({
            "code": body["error_code"].as_str().unwrap_or("execution_failed"),
            "message": body["error_message"].as_str().unwrap_or(""),
            "retryable": body["retryable"].as_bool().unwrap_or(false),
        });
        ack("execution", Some("failed"), None, Some(error))
    } else {
        return None;
    };
    Some((command_id, request))
}

/// How often a listener waiting for deliveries checks that its connection is still up.
const LIVENESS_CHECK: Duration = Duration::from_secs(1);

/// Listens on the gateway's queue until `stopping`, connecting again after any failure.
/// `targets` maps an agent name to the executor (target) it is configured as.
pub async fn listen(bus: Arc<Bus>, targets: BTreeMap<String, String>, engine: Engine, stopping: CancellationToken) {
    const FIRST_BACKOFF: Duration = Duration::from_millis(200);
    let mut backoff = FIRST_BACKOFF;
    loop {
        let started = std::time::Instant::now();
        let session = consume(&bus, &targets, &engine, &stopping);
        tokio::select! {
            () = stopping.cancelled() => return,
            result = session => if let Err(error) = result {
                tracing::warn!(%error, exchange = %bus.exchange, "bus listener lost the broker; connecting again");
            },
        }
        // A session that ran a while was a working connection: the broker went away since, so
        // start again from a short wait; quick failures back off up to 10 s.
        if started.elapsed() > Duration::from_secs(5) {
            backoff = FIRST_BACKOFF;
        }
        tokio::select! {
            () = stopping.cancelled() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(10));
    }
}

async fn consume(
    bus: &Bus,
    targets: &BTreeMap<String, String>,
    engine: &Engine,
    stopping: &CancellationToken,
) -> Result<(), lapin::Error> {
    let Ok(setup) = tokio::time::timeout(bus.timeout, subscribe(bus)).await else {
        tracing::warn!(exchange = %bus.exchange, "the broker did not answer in time; connecting again");
        return Ok(());
    };
    let (connection, channel, mut consumer) = setup?;
    tracing::info!(exchange = %bus.exchange, queue = %bus.queue, "listening to the bus");
    loop {
        // A connection the broker dropped without a word ends the session too, so that the
        // listener connects again rather than waiting on a consumer that will never deliver.
        let next = tokio::select! {
            next = consumer.next() => next,
            () = tokio::time::sleep(LIVENESS_CHECK) => {
                if connection.status().connected() && channel.status().connected() {
                    continue;
                }
                tracing::warn!(exchange = %bus.exchange, "the bus connection is gone; connecting again");
                return Ok(());
            }
        };
        let Some(delivery) = next else { break };
        let delivery = delivery?;
        if stopping.is_cancelled() {
            delivery.nack(BasicNackOptions { requeue: true, ..BasicNackOptions::default() }).await?;
            return Ok(());
        }
        let outcome = route(engine, targets, delivery.routing_key.as_str(), &delivery.data).await;
        match outcome {
            Ok(()) => {
                delivery.ack(BasicAckOptions::default()).await?;
            }
            // Our failure (the database): the broker keeps it for another try.
            Err(()) => {
                delivery.nack(BasicNackOptions { requeue: true, ..BasicNackOptions::default() }).await?;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    Ok(())
}

/// A connection, a channel with the exchange and queue declared, and a consumer on the queue.
async fn subscribe(bus: &Bus) -> Result<(Connection, lapin::Channel, lapin::Consumer), lapin::Error> {
    let connection = Connection::connect(&bus.url, ConnectionProperties::default()).await?;
    let channel = connection.create_channel().await?;
    bus.declare(&channel).await?;
    channel.basic_qos(32, BasicQosOptions::default()).await?;
    let options = BasicConsumeOptions::default();
    let consumer =
        channel.basic_consume(bus.queue.as_str().into(), "chatgate".into(), options, FieldTable::default()).await?;
    Ok((connection, channel, consumer))
}

/// One message from the bus, to the agent machine (`agent.*` state events) or to the command it
/// answers; `Err` when storage failed and the broker should keep it.
async fn route(engine: &Engine, targets: &BTreeMap<String, String>, routing_key: &str, data: &[u8]) -> Result<(), ()> {
    let body: Value = serde_json::from_slice(data).unwrap_or(Value::Null);
    let agent = routing_key.split('.').nth(1).unwrap_or_default();
    match (targets.get(agent), routing_key.starts_with("agent.")) {
        (Some(target), true) => mirror_state(engine, target, &body).await,
        (None, true) => Ok(()),
        (None, false) => {
            tracing::debug!(agent, "a response for an agent this gateway does not dispatch to");
            Ok(())
        }
        (Some(target), false) => handle_response(engine, routing_key, &body, target).await,
    }
}

/// An agent's own report of its state (`agent.{name}.state.changed`), mirrored with the same
/// compare-and-swap; an operator's pause wins, and the report becomes where a resume returns.
async fn mirror_state(engine: &Engine, target: &str, body: &Value) -> Result<(), ()> {
    let Some(reported) = body["state"].as_str().and_then(|s| s.parse::<AgentState>().ok()) else {
        tracing::debug!(target, "an agent state report without a known state");
        return Ok(());
    };
    let store = engine.store();
    let Ok(current) = store.agents().get(target).await else { return Err(()) };
    let next = match current.state {
        AgentState::Paused => Agent { version: current.version + 1, pre_pause: Some(reported), ..current.clone() },
        _ if reported == AgentState::Paused => {
            Agent { state: reported, version: current.version + 1, pre_pause: Some(current.state) }
        }
        _ => Agent { state: reported, version: current.version + 1, pre_pause: None },
    };
    // Lost to a concurrent move: the next report brings it up to date.
    store
        .agents()
        .commit_move(target, &current, &next, "bus", OffsetDateTime::now_utc())
        .await
        .map(|_| ())
        .map_err(|_| ())
}

/// Applies one agent response; `Err` only when it should be delivered again.
async fn handle_response(engine: &Engine, routing_key: &str, body: &Value, target: &str) -> Result<(), ()> {
    let Some((command_id, ack)) = response_ack(routing_key, body, target) else {
        tracing::warn!(routing_key, "an agent response this gateway cannot read; dropped");
        return Ok(());
    };
    let command = match engine.store().commands().get_unscoped(command_id).await {
        Ok(Some(command)) => command,
        Ok(None) => {
            tracing::warn!(%command_id, "a response for an unknown command; dropped");
            return Ok(());
        }
        Err(error) => {
            tracing::warn!(%error, "cannot read the command of a response");
            return Err(());
        }
    };
    match apply_ack(engine, &command.envelope.tenant_id, command_id, &ack, OffsetDateTime::now_utc()).await {
        Ok(_) => Ok(()),
        Err(AckError::Engine(error)) => {
            tracing::warn!(%error, "cannot record a response");
            Err(())
        }
        // Refused (out of order, no delivery): recorded where possible, never retried.
        Err(error) => {
            tracing::info!(%command_id, %error, "agent response refused");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A "broker" that takes connections and never says a word (half up, or a wrong port).
    async fn silent_broker() -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let address = listener.local_addr().expect("address");
        tokio::spawn(async move {
            let mut held = vec![];
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        format!("amqp://guest:guest@{address}/%2f")
    }

    #[tokio::test]
    async fn a_broker_that_does_not_answer_fails_the_publish_instead_of_holding_it() {
        let bus =
            Bus::new(&silent_broker().await, "bloodbank.events.v1", "chatgate.responses", Duration::from_millis(300));
        // Far longer than the bus's own limit: the publish must give up by itself, and the next
        // one (which connects again) too, so that no publish waits behind a dead one forever.
        for attempt in 0..2 {
            let outcome =
                tokio::time::timeout(Duration::from_secs(10), bus.publish("command.orders.ship", b"{}", "m-1"));
            let error = outcome.await.expect("the publish gave up on its own").expect_err("not delivered");
            assert!(error.contains("did not confirm within 300 ms"), "attempt {attempt}: {error}");
        }
    }
}
