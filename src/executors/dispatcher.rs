//! The dispatcher: claims due dispatch rows (a lease, and `FOR UPDATE SKIP LOCKED` on PostgreSQL,
//! so no row is worked on twice at once), hands each command to its executor and writes what
//! happened — the delivery's moves and ACKs, the command's outcome, the row's fate — as one step.
//! A crash between the call and that step leaves the row to be claimed again when the lease
//! ends: the executor then sees the same idempotency key and the same `webhook-id`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use time::OffsetDateTime;

use crate::config::Config;
use crate::domain::command::TenantId;
use crate::domain::delivery::{DeliveryEvent, DeliveryState};
use crate::domain::retry::RetryPolicy;
use crate::executors::executor::CallOutcome;
use crate::executors::executor::Executor;
use crate::executors::responses::{Agents, BusAgent};
use crate::service::dispatch::CANCEL_NOTICE_KIND;
use crate::service::dispatch::DeliveryPlan;
use crate::service::dispatch::handover::{ClaimedMessage, OutboxSettle};
use crate::service::engine::Engine;
use crate::service::engine::EngineError;
use crate::service::intake::Ingress;
use crate::service::reads::StoredCommand;
use crate::service::security::Policy;

/// One configured executor with its retry policy.
#[derive(Debug, Clone)]
pub struct Target {
    pub executor: Executor,
    pub policy: RetryPolicy,
    /// How long a claimed row is held: longer than one call can take.
    pub lease: Duration,
    /// How long a dispatch may stay undelivered, retries included, before `DELIVERY_TIMEOUT`.
    pub delivery_timeout: Duration,
    /// How long a preview may take (a bus agent's answer is waited for this long).
    pub preview_timeout: Duration,
}

/// One executor's lane: its calls at once, and the rows claimed for it that wait their turn.
pub(super) struct Lane {
    pub calls: Arc<tokio::sync::Semaphore>,
    queued: std::sync::atomic::AtomicUsize,
    capacity: usize,
}

impl Lane {
    fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self { calls: Arc::new(tokio::sync::Semaphore::new(capacity)), queued: Default::default(), capacity }
    }

    /// Takes a row into the lane, unless twice its capacity already waits or runs there: a
    /// hanging executor then holds no more of the claimed rows.
    pub fn admit(&self) -> bool {
        use std::sync::atomic::Ordering::{AcqRel, Acquire};
        self.queued.fetch_update(AcqRel, Acquire, |n| (n < self.capacity * 2).then_some(n + 1)).is_ok()
    }

    /// A row admitted has left the lane.
    pub fn left(&self) {
        self.queued.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// A broker queue to listen on, and which executor each agent on it is.
pub type BusListener = (Arc<crate::executors::bus::Bus>, Agents);
/// A NATS connection to consume the agents' events on, and which executor each agent on it is.
pub type StreamListener = (Arc<crate::executors::jetstream::JetStream>, Agents);

#[derive(Clone)]
pub struct Dispatcher {
    engine: Engine,
    policy: Policy,
    /// Runs the registry's built-in chat commands (`builtin:gateway`).
    gateway: crate::service::ooc::Gateway,
    targets: Arc<BTreeMap<String, Arc<Target>>>,
    /// Each executor's calls at once (its lane): a slow or hanging executor fills its own lane
    /// and no other's.
    lanes: Arc<BTreeMap<String, Arc<Lane>>>,
    /// The calls under way, so that a stop waits for them.
    calls: tokio_util::task::TaskTracker,
    batch: i64,
    /// How often the table is claimed from while rows are handed over (`Handoff`).
    poll: Duration,
}

impl Dispatcher {
    pub fn new(ingress: Ingress, config: &Config) -> Result<Self, String> {
        let (engine, policy) = (ingress.engine().clone(), ingress.policy().clone());
        let mut targets = BTreeMap::new();
        let mut lanes = BTreeMap::new();
        for (name, executor) in &config.executors {
            lanes.insert(name.clone(), Arc::new(Lane::new(executor.max_in_flight)));
            let target = Target {
                executor: Executor::from_config(name, executor)?,
                policy: executor.retry_policy(),
                lease: Duration::from_millis(executor.request_timeout_ms.saturating_mul(2).max(1_000)),
                delivery_timeout: Duration::from_millis(executor.delivery_timeout_ms),
                preview_timeout: Duration::from_millis(executor.preview_timeout_ms),
            };
            targets.insert(name.clone(), Arc::new(target));
        }
        let gateway = crate::service::ooc::Gateway::new(ingress);
        let (targets, lanes, calls) = (Arc::new(targets), Arc::new(lanes), tokio_util::task::TaskTracker::new());
        let poll = Duration::from_millis(config.outbound.poll_interval_ms);
        Ok(Self { engine, policy, gateway, targets, lanes, calls, batch: 64, poll })
    }

    /// The bus listeners to run: one per broker queue, with the agents it serves.
    pub fn bus_listeners(&self) -> Vec<BusListener> {
        let mut listeners: BTreeMap<(String, String, String), BusListener> = BTreeMap::new();
        for (name, target) in self.targets.iter() {
            if let Executor::Amqp { bus, agent, .. } = &target.executor {
                let key = (bus.url.clone(), bus.exchange.clone(), bus.queue.clone());
                let entry = listeners.entry(key).or_insert_with(|| (bus.clone(), BTreeMap::new()));
                let agent_target = BusAgent { target: name.clone(), policy: target.policy };
                entry.1.insert(agent.clone(), agent_target);
            }
        }
        listeners.into_values().collect()
    }

    /// The NATS listeners to run: one per server, subjects and consumer, with the agents it serves.
    pub fn stream_listeners(&self) -> Vec<StreamListener> {
        let mut listeners: BTreeMap<(String, String, String), StreamListener> = BTreeMap::new();
        for (name, target) in self.targets.iter() {
            if let Executor::Nats { stream, agent } = &target.executor {
                let key = (stream.url.clone(), stream.prefix.clone(), stream.consumer.clone());
                let entry = listeners.entry(key).or_insert_with(|| (stream.clone(), BTreeMap::new()));
                entry.1.insert(agent.clone(), BusAgent { target: name.clone(), policy: target.policy });
            }
        }
        listeners.into_values().collect()
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn batch(&self) -> usize {
        usize::try_from(self.batch).unwrap_or(0)
    }

    /// How many rows one claim takes at most.
    pub(super) fn batch_limit(&self) -> i64 {
        self.batch
    }

    /// How long a claimed row is held: longer than any executor's call can take.
    pub(super) fn lease(&self) -> Duration {
        self.targets.values().map(|t| t.lease).max().unwrap_or(Duration::from_secs(30))
    }

    pub(super) fn poll(&self) -> Duration {
        self.poll
    }

    /// Opens the handoff: the dispatch rows this process's commits write come to this
    /// dispatcher leased, without a claim, until it is closed.
    pub fn open_handoff(&self) -> Option<Arc<crate::service::dispatch::handover::Handoff>> {
        self.engine.database().handover().open_handoff(self.lease())
    }

    pub(super) fn target(&self, name: &str) -> Option<Arc<Target>> {
        self.targets.get(name).cloned()
    }

    pub(super) fn lane(&self, name: &str) -> Option<Arc<Lane>> {
        self.lanes.get(name).cloned()
    }

    pub(super) fn calls(&self) -> &tokio_util::task::TaskTracker {
        &self.calls
    }

    /// Waits for the calls under way (at a stop).
    pub async fn drain(&self) {
        self.calls.close();
        self.calls.wait().await;
    }

    /// Who may approve what (an executor's waiting answer asks them).
    pub(super) fn policy(&self) -> &Policy {
        &self.policy
    }

    pub(super) fn gateway(&self) -> &crate::service::ooc::Gateway {
        &self.gateway
    }

    /// Claims and sends one batch of cancel notices (an operator canceled a started command);
    /// returns how many were claimed.
    pub async fn notify_due(&self, now: OffsetDateTime) -> Result<usize, EngineError> {
        let claimed =
            self.engine.database().handover().claim(CANCEL_NOTICE_KIND, self.batch, self.lease(), now).await?;
        for row in &claimed {
            if let Err(error) = self.notify_one(row).await {
                tracing::warn!(%error, id = %row.id, "cancel notice not recorded; it comes back when its lease ends");
            }
        }
        Ok(claimed.len())
    }

    async fn notify_one(&self, row: &ClaimedMessage) -> Result<(), EngineError> {
        let handover = self.engine.database().handover();
        let target_name = row.payload["target"].as_str().unwrap_or_default();
        let command_id = row.payload["command_id"].as_str().and_then(|c| c.parse().ok());
        let (Ok(tenant), Some(command_id), Some(target)) =
            (TenantId::parse(&row.tenant_id), command_id, self.targets.get(target_name))
        else {
            let dead = OutboxSettle::Dead { id: row.id, error: "a cancel notice without its command or target".into() };
            return Ok(handover.settle(&dead, OffsetDateTime::now_utc()).await?);
        };
        let Some(command) = self.engine.reads().command(&tenant, command_id).await? else {
            let dead = OutboxSettle::Dead { id: row.id, error: "the command is gone".into() };
            return Ok(handover.settle(&dead, OffsetDateTime::now_utc()).await?);
        };
        let reason = row.payload["reason"].as_str().unwrap_or("operator_canceled");
        let outcome = target.executor.notify_cancel(&command.envelope, reason, row.id).await;
        let now = OffsetDateTime::now_utc();
        let settle = match outcome {
            CallOutcome::Retry { error, retry_after } => {
                match target.policy.next_delay(u32::try_from(row.attempt).unwrap_or(u32::MAX), retry_after) {
                    Some(delay) => OutboxSettle::Retry { id: row.id, at: now + delay, error },
                    None => OutboxSettle::Dead { id: row.id, error },
                }
            }
            CallOutcome::Refused { status, error } => {
                OutboxSettle::Dead { id: row.id, error: format!("{status}: {error}") }
            }
            _ => OutboxSettle::Done(row.id),
        };
        tracing::info!(command = %command_id, target = target_name, ?settle, "cancel notice");
        Ok(handover.settle(&settle, now).await?)
    }

    /// What an executor's answer does to the delivery, and what becomes of the outbox row; `None`
    /// when the command was handed to the bus, which answers later.
    pub(super) fn settle_after(
        &self,
        outcome: CallOutcome,
        plan: &mut DeliveryPlan,
        row: &ClaimedMessage,
        target: &Target,
        command: &StoredCommand,
        now: OffsetDateTime,
    ) -> Option<OutboxSettle> {
        Some(match outcome {
            CallOutcome::Handed => return None,
            CallOutcome::Executed { succeeded, detail } => {
                delivered(plan);
                let event = if succeeded { DeliveryEvent::ExecutionSucceeded } else { DeliveryEvent::ExecutionFailed };
                let _ = plan.apply(event, Some(detail));
                OutboxSettle::Done(row.id)
            }
            CallOutcome::Waiting(wait) => {
                delivered(plan);
                let _ = plan.apply(DeliveryEvent::ExecutionWaiting, Some(json!({"waiting": wait})));
                OutboxSettle::Done(row.id)
            }
            CallOutcome::Delivered { working } => {
                delivered(plan);
                if working {
                    let _ = plan.apply(DeliveryEvent::ExecutionInProgress, None);
                }
                plan.expect_execution_by(now + self.execution_timeout(command));
                OutboxSettle::Done(row.id)
            }
            CallOutcome::Refused { status, error } => {
                delivered(plan);
                let code = error["error"]["code"].as_str().unwrap_or("executor_rejected").to_owned();
                let detail = json!({"code": code, "status": status, "error": error});
                let _ = plan.apply(DeliveryEvent::ExecutionFailed, Some(detail));
                OutboxSettle::Done(row.id)
            }
            CallOutcome::Retry { error, retry_after } => {
                let attempt = u32::try_from(row.attempt).unwrap_or(u32::MAX);
                let deadline = plan.delivery_deadline();
                match retry_or_end(target.policy.next_delay(attempt, retry_after), now, deadline) {
                    Ok(at) => {
                        let command = command.envelope.command_id;
                        tracing::info!(%command, attempt, retry_at = %at, %error, "executor not reached; retrying");
                        OutboxSettle::Retry { id: row.id, at, error }
                    }
                    Err(ended_by) => {
                        let detail = json!({"message": error, "attempts": row.attempt, "ended_by": ended_by});
                        let _ = plan.apply(DeliveryEvent::DeliveryTimeout, Some(detail));
                        OutboxSettle::Dead { id: row.id, error }
                    }
                }
            }
        })
    }

    /// The registry's `timeout` for the command (how long its execution may take).
    fn execution_timeout(&self, command: &StoredCommand) -> Duration {
        self.policy.known_spec_of(command).map_or(Duration::from_secs(30), |s| s.timeout)
    }
}

/// An answer proves the delivery, unless it was proved before (a resumed execution's answer).
fn delivered(plan: &mut DeliveryPlan) {
    if plan.state() == DeliveryState::Routed {
        let _ = plan.apply(DeliveryEvent::DeliveryAck, None);
    }
}

/// What ends a delivery that could not be made: the attempts allowed, or its delivery timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndedBy {
    MaxAttempts,
    DeliveryTimeout,
}

/// When to try again, or what ends the delivery: retries go on until the next one would come
/// after the delivery's deadline (the deadline its durable timer keeps), or until the attempts are
/// used up when a limit is configured.
pub fn retry_or_end(
    delay: Option<Duration>,
    now: OffsetDateTime,
    deadline: Option<OffsetDateTime>,
) -> Result<OffsetDateTime, EndedBy> {
    let delay = delay.ok_or(EndedBy::MaxAttempts)?;
    let at = now + delay;
    match deadline {
        Some(deadline) if at >= deadline => Err(EndedBy::DeliveryTimeout),
        _ => Ok(at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_go_on_until_the_deadline_or_the_attempts_configured() {
        let now = OffsetDateTime::now_utc();
        let deadline = Some(now + Duration::from_secs(10));
        assert_eq!(retry_or_end(Some(Duration::from_secs(1)), now, deadline), Ok(now + Duration::from_secs(1)));
        assert_eq!(retry_or_end(Some(Duration::from_secs(10)), now, deadline), Err(EndedBy::DeliveryTimeout));
        assert_eq!(retry_or_end(None, now, deadline), Err(EndedBy::MaxAttempts));
        assert_eq!(retry_or_end(Some(Duration::from_secs(99)), now, None), Ok(now + Duration::from_secs(99)));
    }
}
