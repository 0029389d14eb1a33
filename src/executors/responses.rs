//! What an agent on a bus said about a command, whichever bus carried it (RabbitMQ's `.ack`,
//! `.result`, `.error`; NATS JetStream's `invocation.started`, `.completed`, `.failed`), applied to
//! the command's delivery by the same rules: a terminal answer is the delivery ACK too when none
//! came before it, a retryable failure before the agent took the command hands it over again
//! later, duplicates change nothing and out-of-order answers are refused and logged. And the loop
//! both listeners run in: connect, listen, connect again after any failure.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::domain::agent::AgentState;
use crate::domain::delivery::ApprovalWait;
use crate::domain::preview::{PreviewAnswer, PreviewFault};
use crate::domain::retry::RetryPolicy;
use crate::executors::acks::{AckError, AckRequest, apply_ack, redispatch_later};
use crate::service::engine::Engine;
use crate::service::security::Policy;

/// An agent on a bus: the executor it is configured as, and how soon a command it declined
/// for now (a retryable failure before it took the command) is handed to it again.
#[derive(Debug, Clone)]
pub struct BusAgent {
    pub target: String,
    pub policy: RetryPolicy,
}

/// The agents a listener serves, by the name the bus knows them by.
pub type Agents = BTreeMap<String, BusAgent>;

/// What an agent said.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    /// The agent took the command (`.ack`, `invocation.started`).
    Ack { command_id: Uuid },
    /// Done (`success`), done with caveats (`partial`), or done before (`skipped`, the agent's own
    /// dedupe); `detail` is what becomes the command's result.
    Result { command_id: Uuid, outcome: ResultOutcome, detail: Value },
    /// The agent's execution waits for people's approval (`.waiting`, `invocation.waiting`).
    Waiting { command_id: Uuid, wait: ApprovalWait },
    /// The agent could not do it; `detail` is `{code, message, retryable, ...}`.
    Error { command_id: Uuid, retryable: bool, retry_after: Option<Duration>, detail: Value },
    /// The agent's answer to a preview request (`.previewed`, `invocation.previewed`).
    Previewed { command_id: Uuid, answer: Result<PreviewAnswer, PreviewFault> },
    /// `agent.{name}.state.changed` (RabbitMQ only).
    State { state: AgentState },
}

/// The `outcome` values of Bloodbank's command result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ResultOutcome {
    Success,
    Partial,
    Skipped,
}

/// What applying an agent's answers needs: the engine, and the policy whose approvers a waiting
/// answer asks.
#[derive(Clone)]
pub struct Answering {
    pub engine: Engine,
    pub policy: Policy,
}

/// Applies one agent response to its command's delivery; `Err` only when it should be
/// delivered again (storage failed).
pub async fn answer(answering: &Answering, agent: &BusAgent, report: Report) -> Result<(), ()> {
    let engine = &answering.engine;
    let (command_id, ack) = match report {
        Report::Ack { command_id } => (command_id, AckRequest::delivery(&agent.target)),
        Report::Waiting { command_id, wait } => (command_id, AckRequest::waiting(&agent.target, wait)),
        Report::Result { command_id, detail, .. } => (command_id, AckRequest::succeeded(&agent.target, detail)),
        Report::Error { command_id, retryable, retry_after, detail } => {
            if retryable {
                let delay = agent.policy.next_delay(1, retry_after).unwrap_or(agent.policy.initial);
                let target = &agent.target;
                match redispatch_later(engine, command_id, target, detail.clone(), delay, now()).await {
                    // Not waiting for the agent any more (it took the command, or there is no such
                    // delivery): the error is the execution's failure.
                    Err(AckError::NoDelivery(_) | AckError::NotFound) => {}
                    outcome => return record(outcome),
                }
            }
            (command_id, AckRequest::failed(&agent.target, detail))
        }
        Report::State { .. } => return Ok(()),
        Report::Previewed { command_id, answer } => return previewed(answering, command_id, answer).await,
    };
    let command = match engine.reads().command_of_any_tenant(command_id).await {
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
    let tenant = &command.envelope.tenant_id;
    record(apply_ack((engine, &answering.policy), tenant, command_id, &ack, now()).await.map(|_| ()))
}

/// An agent's preview: the command waiting for it is asked to confirm on it, or refused; one that
/// waits no more (its preview timed out, say) is left as it is, and its request's row settles
/// when it comes due.
async fn previewed(
    answering: &Answering,
    command_id: Uuid,
    answer: Result<PreviewAnswer, PreviewFault>,
) -> Result<(), ()> {
    let engine = &answering.engine;
    let command = match engine.reads().command_of_any_tenant(command_id).await {
        Ok(Some(command)) => command,
        Ok(None) => return Ok(()),
        Err(error) => {
            tracing::warn!(%error, "cannot read the command of a preview");
            return Err(());
        }
    };
    let spec = answering.policy.known_spec_of(&command);
    let settled = crate::service::previews::settle(engine, spec.as_ref(), &command, answer, None, now()).await;
    record(settled.map_err(AckError::Engine))
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

/// Runs `session` until `stopping`, again after each failure: at once after a session that ran a
/// while (it was a working connection, and the broker went away since), backing off up to 10 s
/// after quick failures.
pub async fn keep_listening<S, F>(bus: &str, stopping: &CancellationToken, mut session: S)
where
    S: FnMut() -> F,
    F: Future<Output = Result<(), String>>,
{
    const FIRST_BACKOFF: Duration = Duration::from_millis(200);
    let mut backoff = FIRST_BACKOFF;
    loop {
        let started = std::time::Instant::now();
        tokio::select! {
            () = stopping.cancelled() => return,
            result = session() => if let Err(error) = result {
                tracing::warn!(%error, bus, "a bus listener lost its broker; connecting again");
            },
        }
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

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}
