//! The gateway's durable consumer of the agents' invocation events on NATS JetStream. Each event is
//! read ([`cloudevents::read`]), matched to the command it is about and to the agent of this
//! connection that command was handed to, and applied as every bus's responses are
//! ([`crate::executors::responses::answer`]). An event is acknowledged to JetStream once what it
//! says is stored; a storage failure leaves it with JetStream (a negative acknowledgement, with a
//! delay) for another try; an event no command of ours matches is acknowledged and dropped.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::AckKind;
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::executors::jetstream::JetStream;
use crate::executors::jetstream::cloudevents::{self, Said, Saying};
use crate::executors::responses::Answering;
use crate::executors::responses::{Agents, BusAgent, answer, keep_listening};

/// Listens to the agents' events until `stopping`, connecting again after any failure. `agents`
/// are the executors on this connection, by their `target_agent_id`.
pub async fn listen(stream: Arc<JetStream>, agents: Agents, answering: Answering, stopping: CancellationToken) {
    let name = format!("nats consumer {}", stream.consumer);
    keep_listening(&name, &stopping, || consume(&stream, &agents, &answering, &stopping)).await;
}

async fn consume(
    stream: &JetStream,
    agents: &Agents,
    answering: &Answering,
    stopping: &CancellationToken,
) -> Result<(), String> {
    let setup = async { stream.consumer().await?.messages().await.map_err(|e| format!("messages: {e}")) };
    let mut messages =
        tokio::time::timeout(stream.timeout, setup).await.map_err(|_| "NATS did not answer in time".to_owned())??;
    tracing::info!(consumer = %stream.consumer, filter = %stream.events_filter(), "listening to NATS JetStream");
    while let Some(message) = messages.next().await {
        let message = message.map_err(|e| format!("consumer: {e}"))?;
        if stopping.is_cancelled() {
            let _ = message.ack_with(AckKind::Nak(None)).await;
            return Ok(());
        }
        let acknowledgement = match route(answering, agents, message.subject.as_str(), &message.payload).await {
            Ok(()) => AckKind::Ack,
            // Our failure (the database): JetStream keeps it for another try.
            Err(()) => AckKind::Nak(Some(Duration::from_millis(200))),
        };
        message.ack_with(acknowledgement).await.map_err(|e| format!("acknowledging: {e}"))?;
    }
    Err("the consumer's messages ended".into())
}

/// One event, to the delivery of the command it is about; `Err` when storage failed.
async fn route(answering: &Answering, agents: &Agents, subject: &str, body: &[u8]) -> Result<(), ()> {
    let said = match cloudevents::read(subject, body) {
        Ok(said) => said,
        Err(error) => {
            metrics::counter!("chatgate_bus_unreadable_total").increment(1);
            tracing::warn!(subject, %error, "an agent event this gateway cannot read; dropped");
            return Ok(());
        }
    };
    // A preview is asked before any delivery: the command it names is the one waiting for it.
    if let Saying::Previewed(_) = &said.what {
        return match (previewed_command(answering, &said).await?, agents.values().next()) {
            (Some(command_id), Some(agent)) => answer(answering, agent, said.report(command_id)).await,
            _ => Ok(()),
        };
    }
    match matched(answering, agents, &said).await? {
        Some((command_id, agent)) => answer(answering, agent, said.report(command_id)).await,
        None => {
            tracing::debug!(subject, ids = ?said.about, "an event about no command handed to these agents");
            Ok(())
        }
    }
}

/// The first of the event's ids that names a command of this gateway.
async fn previewed_command(answering: &Answering, said: &Said) -> Result<Option<Uuid>, ()> {
    for id in &said.about {
        let command = answering.engine.reads().command_of_any_tenant(*id).await.map_err(|error| {
            tracing::warn!(%error, "cannot read the command of an agent's preview");
        })?;
        if command.is_some() {
            return Ok(Some(*id));
        }
    }
    Ok(None)
}

/// The first of the event's ids that names a command handed to one of `agents`, and that agent.
async fn matched<'a>(
    answering: &Answering,
    agents: &'a Agents,
    said: &Said,
) -> Result<Option<(Uuid, &'a BusAgent)>, ()> {
    for id in &said.about {
        let deliveries = answering.engine.reads().deliveries_of(*id).await.map_err(|error| {
            tracing::warn!(%error, "cannot read the deliveries of an agent event's command");
        })?;
        let agent = deliveries.iter().find_map(|d| agents.values().find(|a| a.target == d.target));
        if let Some(agent) = agent {
            return Ok(Some((*id, agent)));
        }
    }
    Ok(None)
}
