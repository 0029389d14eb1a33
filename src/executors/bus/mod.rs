//! RabbitMQ executors (the Bloodbank bus): commands are published, persistent and with publisher
//! confirms, to a durable topic exchange with routing key `command.{agent}.{action}`, in
//! Bloodbank's own event envelope ([`bloodbank`]); the row is done only once the broker confirmed.
//! The gateway's own durable queue receives the agents' `command.*.*.ack` / `.result` / `.error` / `.waiting`
//! and `agent.*.state.changed` ([`listener`]). Connections are made lazily and made again after a
//! broker restart.

pub mod bloodbank;
pub mod listener;

use std::time::Duration;

use lapin::Confirmation;
use lapin::options::{
    BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use tokio::sync::Mutex;

pub use bloodbank::Publication;
pub use listener::listen;

/// One broker connection and exchange, shared by the executors that use it.
pub struct Bus {
    pub url: String,
    pub exchange: String,
    /// The gateway's own queue for responses.
    pub queue: String,
    /// How long connecting, publishing and waiting for the confirm may take: a broker that is
    /// half up (restarting, overloaded) must not hold every publish behind it.
    pub timeout: Duration,
    /// Bloodbank's `source.host` of what this gateway publishes.
    pub host: String,
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
            host: hostname(),
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
        let patterns = [
            "command.*.*.ack",
            "command.*.*.result",
            "command.*.*.error",
            "command.*.*.waiting",
            "command.*.*.previewed",
        ];
        for pattern in patterns.into_iter().chain(["agent.*.state.changed"]) {
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
    pub async fn publish(&self, message: &Publication) -> Result<(), PublishError> {
        let mut publisher = self.publisher.lock().await;
        let attempt = self.publish_on(&mut publisher, message);
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
        message: &Publication,
    ) -> Result<(), PublishError> {
        if publisher.as_ref().is_none_or(|(c, ch)| !c.status().connected() || !ch.status().connected()) {
            *publisher = Some(self.open().await.map_err(|e| format!("cannot reach the broker: {e}"))?);
        }
        let Some((_, channel)) = publisher.as_ref() else {
            return Err("no broker channel".into());
        };
        // As Bloodbank's publisher sets them: persistent JSON, the event id as `message_id`.
        let properties = BasicProperties::default()
            .with_delivery_mode(2)
            .with_content_type("application/json".into())
            .with_content_encoding("utf-8".into())
            .with_message_id(message.event_id.to_string().into())
            .with_correlation_id(message.correlation_id.as_str().into())
            .with_headers(trace_headers());
        let routing_key = message.routing_key.as_str();
        let options = BasicPublishOptions { mandatory: true, ..BasicPublishOptions::default() };
        let result = async {
            channel
                .basic_publish(self.exchange.as_str().into(), routing_key.into(), options, &message.body, properties)
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

/// The name this machine goes by, for Bloodbank's `source.host`.
fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "chatgate".into())
}

/// The dispatch's trace context (W3C `traceparent`, `tracestate`) as AMQP headers, when traces
/// are exported, as the W3C's AMQP mapping carries it in application properties.
fn trace_headers() -> FieldTable {
    let mut headers = FieldTable::default();
    for (name, value) in crate::service::telemetry::current_headers() {
        headers.insert(name.into(), lapin::types::AMQPValue::LongString(value.into()));
    }
    headers
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
            let message = Publication {
                routing_key: "command.orders.ship".into(),
                body: b"{}".to_vec(),
                event_id: uuid::Uuid::now_v7(),
                correlation_id: "c-1".into(),
            };
            let outcome = tokio::time::timeout(Duration::from_secs(10), bus.publish(&message));
            let error = outcome.await.expect("the publish gave up on its own").expect_err("not delivered");
            assert!(error.contains("did not confirm within 300 ms"), "attempt {attempt}: {error}");
        }
    }
}
