//! The gateway's side of the bus: its durable queue receives every agent's `.ack`, `.result`,
//! `.error` and `agent.{name}.state.changed`, read as Bloodbank writes them, and each becomes the
//! delivery's ACK or a move of the agent machine. A message is acknowledged to the broker once
//! what it says is stored; a storage failure leaves it with the broker for another try.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicQosOptions};
use lapin::types::FieldTable;
use lapin::{Connection, ConnectionProperties};
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::domain::agent::Agent;
use crate::domain::agent::AgentState;
use crate::domain::retry::RetryPolicy;
use crate::executors::acks::{AckError, AckRequest, apply_ack, redispatch_later};
use crate::executors::bus::Bus;
use crate::executors::bus::bloodbank::{self, Report};
use crate::service::engine::Engine;

/// An agent on the bus: the executor it is configured as, and how soon a command it declined
/// for now (a retryable `.error` before any ack) is handed to it again.
#[derive(Debug, Clone)]
pub struct BusAgent {
    pub target: String,
    pub policy: RetryPolicy,
}

/// The agents a listener serves, by name.
pub type Agents = BTreeMap<String, BusAgent>;

/// How often a listener waiting for deliveries checks that its connection is still up.
const LIVENESS_CHECK: Duration = Duration::from_secs(1);

/// Listens on the gateway's queue until `stopping`, connecting again after any failure.
/// `targets` says which executor (target) each agent is configured as.
pub async fn listen(bus: Arc<Bus>, targets: Agents, engine: Engine, stopping: CancellationToken) {
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
    targets: &Agents,
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
async fn route(engine: &Engine, targets: &Agents, routing_key: &str, data: &[u8]) -> Result<(), ()> {
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
        Ok(Report::State { state }) => mirror_state(engine, &agent.target, state).await,
        Ok(report) => answer(engine, agent, report).await,
    }
}

/// An agent's own report of its state (`agent.{name}.state.changed`), mirrored with the same
/// compare-and-swap; an operator's pause wins, and the report becomes where a resume returns.
async fn mirror_state(engine: &Engine, target: &str, reported: AgentState) -> Result<(), ()> {
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

/// Applies one agent response to its command's delivery; `Err` only when it should be
/// delivered again. A result or an error is the delivery ACK too when no ack came before it
/// (Bloodbank's adapter answers a replay or an expired command without one); an error that
/// says it is retryable, before any ack, hands the command to the agent again later.
async fn answer(engine: &Engine, agent: &BusAgent, report: Report) -> Result<(), ()> {
    let (command_id, ack) = match report {
        Report::Ack { command_id } => (command_id, AckRequest::delivery(&agent.target)),
        Report::Result { command_id, detail, .. } => (command_id, AckRequest::succeeded(&agent.target, detail)),
        Report::Error { command_id, retryable, retry_after, detail } => {
            if retryable {
                let delay = agent.policy.next_delay(1, retry_after).unwrap_or(agent.policy.initial);
                let target = &agent.target;
                match redispatch_later(engine, command_id, target, detail.clone(), delay, now()).await {
                    // Not waiting for the agent any more (it acked, or there is no such delivery):
                    // the error is the execution's failure.
                    Err(AckError::NoDelivery(_) | AckError::NotFound) => {}
                    outcome => return record(outcome),
                }
            }
            (command_id, AckRequest::failed(&agent.target, detail))
        }
        Report::State { .. } => return Ok(()),
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
    record(apply_ack(engine, &command.envelope.tenant_id, command_id, &ack, now()).await.map(|_| ()))
}

/// `Err` (keep the message) only when storage failed; a refusal is recorded where possible and
/// never retried.
fn record(outcome: Result<(), AckError>) -> Result<(), ()> {
    match outcome {
        Ok(()) => Ok(()),
        Err(AckError::Engine(error)) => {
            tracing::warn!(%error, "cannot record a response");
            Err(())
        }
        Err(error) => {
            tracing::info!(%error, "agent response refused");
            Ok(())
        }
    }
}

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}
