//! The gateway's side of the bus: its durable queue receives every agent's `.ack`, `.result`,
//! `.error` and `agent.{name}.state.changed`, read as Bloodbank writes them, and each becomes the
//! delivery's ACK or a move of the agent machine. A message is acknowledged to the broker once
//! what it says is stored; a storage failure leaves it with the broker for another try.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicQosOptions};
use lapin::types::FieldTable;
use lapin::{Connection, ConnectionProperties};
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::domain::agent::AgentState;
use crate::executors::bus::Bus;
use crate::executors::bus::bloodbank;
use crate::executors::responses::Answering;
use crate::executors::responses::{Agents, Report, answer, keep_listening};

/// How often a listener waiting for deliveries checks that its connection is still up.
const LIVENESS_CHECK: Duration = Duration::from_secs(1);

/// Listens on the gateway's queue until `stopping`, connecting again after any failure.
/// `targets` says which executor (target) each agent is configured as.
pub async fn listen(bus: Arc<Bus>, targets: Agents, answering: Answering, stopping: CancellationToken) {
    let name = format!("amqp exchange {}", bus.exchange);
    keep_listening(&name, &stopping, || async {
        consume(&bus, &targets, &answering, &stopping).await.map_err(|e| e.to_string())
    })
    .await;
}

async fn consume(
    bus: &Bus,
    targets: &Agents,
    answering: &Answering,
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
        let outcome = route(answering, targets, delivery.routing_key.as_str(), &delivery.data).await;
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
async fn route(answering: &Answering, targets: &Agents, routing_key: &str, data: &[u8]) -> Result<(), ()> {
    let agent = routing_key.split('.').nth(1).unwrap_or_default();
    let Some(agent) = targets.get(agent) else {
        tracing::debug!(routing_key, "a message for an agent this gateway does not dispatch to");
        return Ok(());
    };
    match bloodbank::read(routing_key, data) {
        Err(error) => {
            metrics::counter!("chatgate_bus_unreadable_total").increment(1);
            tracing::warn!(routing_key, %error, "an agent message this gateway cannot read; dropped");
            Ok(())
        }
        Ok(Report::State { state }) => mirror_state(answering, &agent.target, state).await,
        Ok(report) => answer(answering, agent, report).await,
    }
}

/// An agent's own report of its state (`agent.{name}.state.changed`), mirrored
/// (`service::agents::mirror`); lost to a concurrent move, the next report brings it up to date.
async fn mirror_state(answering: &Answering, target: &str, reported: AgentState) -> Result<(), ()> {
    let now = OffsetDateTime::now_utc();
    crate::service::agents::mirror(answering.engine.database(), target, reported, now).await.map(drop).map_err(drop)
}
