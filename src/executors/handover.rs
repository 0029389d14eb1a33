//! Handing a claimed batch of dispatch rows over in whole batches: what the rows are about is
//! read with one query per table, their deliveries are routed on record in one transaction, the
//! executors are called at the same time, and what they answered is written in one transaction.
//! Each hop to the database carries the whole batch instead of one command (issue #16); each
//! row's outcome is the one it would get alone (`Commands::commit_steps`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use futures_util::future::join_all;
use serde_json::json;
use time::OffsetDateTime;
use tracing::Instrument;
use uuid::Uuid;

use crate::domain::command::TenantId;
use crate::domain::delivery::{ApprovalWait, DeliveryEvent, DeliveryState};
use crate::domain::lifecycle::State;
use crate::domain::preview::BoundPreview;
use crate::executors::dispatcher::{Dispatcher, Target};
use crate::executors::executor::{Attached, CallIds, CallOutcome, Executor};
use crate::service::approvals::execution;
use crate::service::dispatch::handover::{ClaimedMessage, Delivery, OutboxSettle, StepOutcome, StepWrite};
use crate::service::dispatch::{Conclusion, DeliveryPlan, DispatchOrder};
use crate::service::engine::EngineError;
use crate::service::reads::StoredCommand;

/// What a claimed row comes to before any executor is called.
enum Prepared {
    /// Nothing to hand over (the command moved on, or this dispatch already delivered): only
    /// the row's fate is written.
    Settled(OutboxSettle),
    /// For its executor, once its delivery is routed on record, with what goes beside the
    /// envelope (the grant that resumes a waiting execution, the preview its person confirmed).
    Ready { command: StoredCommand, target: Arc<Target>, plan: DeliveryPlan, attached: Attached },
    /// No executor of that name: the delivery failed routing, which is concluded at once.
    Unroutable { command: StoredCommand, plan: DeliveryPlan },
}

/// How long a row claimed for a full lane waits before it is claimed again.
const LANE_FULL_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// A batch's rows for one executor (or with nothing to call), in claim order.
#[derive(Default)]
struct Group {
    rows: Vec<ClaimedMessage>,
    prepared: Vec<Option<Prepared>>,
}

/// A row's work after the calls: its step, when it was committed, and what follows.
enum Written<'a> {
    Alone(StepWrite),
    Concluded(Conclusion<'a>),
}

impl Dispatcher {
    /// Claims and dispatches one batch; returns how many rows were claimed. The calls go on in
    /// their executors' lanes: the next claim does not wait for them, and a slow executor holds
    /// up only its own rows.
    pub async fn dispatch_due(&self, now: OffsetDateTime) -> Result<usize, EngineError> {
        let handover = self.engine().database().handover();
        let rows = handover.dispatches_due(self.batch_limit(), (self.lease(), self.poll()), now).await?;
        if rows.is_empty() {
            return Ok(0);
        }
        let count = rows.len();
        let prepared = self.prepare(&rows, now).await?;
        let prepared = self.route(&rows, prepared, now).await;
        let mut lanes: BTreeMap<String, Group> = BTreeMap::new();
        let mut settled = Group::default();
        for (row, prepared) in rows.into_iter().zip(prepared) {
            let (group, prepared) = match prepared {
                Some(Prepared::Ready { .. }) if !self.lane(&row.destination).is_none_or(|lane| lane.admit()) => {
                    // The executor's lane is full (it is slow or hanging): the row waits its turn
                    // in the outbox, and the delivery stays routed.
                    let error = format!("executor `{}` is busy: its calls are all under way", row.destination);
                    let busy = OutboxSettle::Retry { id: row.id, at: now + LANE_FULL_WAIT, error };
                    (&mut settled, Some(Prepared::Settled(busy)))
                }
                Some(ready @ Prepared::Ready { .. }) => {
                    (lanes.entry(row.destination.clone()).or_default(), Some(ready))
                }
                other => (&mut settled, other),
            };
            group.rows.push(row);
            group.prepared.push(prepared);
        }
        if !settled.rows.is_empty() {
            let nothing_called = settled.rows.iter().map(|_| None).collect();
            self.conclude(&settled.rows, settled.prepared, nothing_called).await?;
        }
        let claimed_at = Instant::now();
        for (name, group) in lanes {
            let dispatcher = self.clone();
            self.calls().spawn(async move { dispatcher.call_in_lane(&name, group, claimed_at).await });
        }
        Ok(count)
    }

    /// Calls one executor for its rows of a batch, as many at once as its lane allows, and
    /// writes what they answered. A row that waited for the lane past half its lease is left to
    /// the worker that claims it next.
    async fn call_in_lane(&self, name: &str, group: Group, claimed_at: Instant) {
        let lane = self.lane(name);
        let calls = group.rows.iter().zip(&group.prepared).map(|(row, prepared)| {
            let lane = lane.clone();
            async move {
                let Some(Prepared::Ready { command, target, plan, attached }) = prepared else { return None };
                let ready = (command, target.as_ref(), plan, attached);
                let Some(lane) = lane else { return Some(self.call(row, ready).await) };
                let permit = lane.calls.clone().acquire_owned().await.ok();
                let called = match permit {
                    Some(_permit) if claimed_at.elapsed() <= target.lease / 2 => Some(self.call(row, ready).await),
                    _ => None,
                };
                lane.left();
                called
            }
        });
        let outcomes = join_all(calls).await;
        if let Err(error) = self.conclude(&group.rows, group.prepared, outcomes).await {
            tracing::warn!(%error, executor = name, "dispatch not recorded; the rows come back when their lease ends");
        }
    }

    /// What each row is about, read for the whole batch at once.
    async fn prepare(&self, rows: &[ClaimedMessage], now: OffsetDateTime) -> Result<Vec<Prepared>, EngineError> {
        let reads = self.engine().reads();
        let ids: Vec<Uuid> = rows.iter().filter_map(|row| row.command_id).collect();
        let mut commands: HashMap<Uuid, StoredCommand> =
            reads.commands(&ids).await?.into_iter().map(|c| (c.envelope.command_id, c)).collect();
        let deliveries: HashMap<(Uuid, String), Delivery> = reads
            .deliveries_of_commands(&ids)
            .await?
            .into_iter()
            .map(|d| ((d.command_id, d.target.clone()), d))
            .collect();
        // Only where a command can have a preview is there any to read.
        let previews = match self.policy().any_previews() {
            true => reads.previews_of(&ids).await?,
            false => HashMap::new(),
        };
        Ok(rows
            .iter()
            .enumerate()
            .map(|(i, row)| {
                // A command with several targets has a row for each: the last one takes it.
                let again = |id: &Uuid| rows[i + 1..].iter().any(|later| later.command_id == Some(*id));
                let command = row
                    .command_id
                    .and_then(|id| if again(&id) { commands.get(&id).cloned() } else { commands.remove(&id) });
                let delivery = row.command_id.and_then(|id| deliveries.get(&(id, row.destination.clone())));
                let preview = row.command_id.and_then(|id| previews.get(&id).cloned());
                self.prepare_one(row, (command, preview), delivery, now)
            })
            .collect())
    }

    fn prepare_one(
        &self,
        row: &ClaimedMessage,
        (command, preview): (Option<StoredCommand>, Option<BoundPreview>),
        delivery: Option<&Delivery>,
        now: OffsetDateTime,
    ) -> Prepared {
        let Some(command_id) = row.command_id.filter(|_| TenantId::parse(&row.tenant_id).is_ok()) else {
            return Prepared::Settled(OutboxSettle::Dead {
                id: row.id,
                error: "a dispatch row without a command".into(),
            });
        };
        let Some(command) = command.filter(|c| c.envelope.tenant_id.as_str() == row.tenant_id) else {
            return Prepared::Settled(OutboxSettle::Dead { id: row.id, error: "the command is gone".into() });
        };
        let target_name = row.destination.as_str();
        let mut plan = delivery.map_or_else(|| DeliveryPlan::create(&command, target_name), DeliveryPlan::existing);
        let resume = DispatchOrder::of(&row.payload, target_name).resume;
        // Nothing (more) to hand over: the command moved on, this dispatch already delivered, or
        // (a grant) the execution it resumes answered already.
        let handed = match resume {
            Some(_) => plan.state() != DeliveryState::Delivered,
            None => !matches!(plan.state(), DeliveryState::Received | DeliveryState::Validated | DeliveryState::Routed),
        };
        if command.lifecycle.state != State::Started || handed {
            return Prepared::Settled(OutboxSettle::Done(row.id));
        }
        if plan.state() == DeliveryState::Received {
            let _ = plan.apply(DeliveryEvent::ValidateOk, None);
        }
        let Some(target) = self.target(target_name) else {
            let detail = json!({"message": format!("no executor `{target_name}`")});
            let _ = plan.apply(DeliveryEvent::RouteFail, Some(detail));
            return Prepared::Unroutable { command, plan };
        };
        if plan.state() == DeliveryState::Validated {
            let _ = plan.apply(DeliveryEvent::RouteOk, None);
            plan.expect_delivery_by(now + target.delivery_timeout);
        }
        tracing::trace!(command = %command_id, target = target_name, "ready for its executor");
        Prepared::Ready { command, target, plan, attached: Attached { resume, preview } }
    }

    /// Puts every ready delivery's routing on record before any call, in one transaction, so
    /// that an executor that acknowledges at once finds the delivery it acknowledges. A row whose
    /// delivery another worker moved meanwhile drops out (`None`): its lease runs out and it is
    /// looked at again on fresh state. A built-in's routing goes on record with its outcome.
    async fn route(
        &self,
        rows: &[ClaimedMessage],
        prepared: Vec<Prepared>,
        now: OffsetDateTime,
    ) -> Vec<Option<Prepared>> {
        let routing: Vec<(usize, StepWrite)> = prepared
            .iter()
            .enumerate()
            .filter_map(|(i, p)| match p {
                Prepared::Ready { command, plan, target, .. }
                    if !plan.change.log.is_empty() && !target.executor.in_process() =>
                {
                    let e = &command.envelope;
                    let step = StepWrite {
                        delivery: Some(plan.change.clone()),
                        ..StepWrite::new(e.tenant_id.clone(), Some(e.command_id), now)
                    };
                    Some((i, step))
                }
                _ => None,
            })
            .collect();
        let steps: Vec<&StepWrite> = routing.iter().map(|(_, step)| step).collect();
        let outcomes = self.engine().database().handover().commit_steps(&steps).await;
        let mut routed: HashMap<usize, bool> = HashMap::new();
        for ((i, _), outcome) in routing.iter().zip(outcomes) {
            if let Err(error) = &outcome {
                let id = rows[*i].id;
                tracing::warn!(%error, %id, "routing not recorded; the row comes back when its lease ends");
            }
            routed.insert(*i, matches!(outcome, Ok(StepOutcome::Committed { .. })));
        }
        prepared
            .into_iter()
            .enumerate()
            .map(|(i, p)| match (p, routed.get(&i)) {
                (_, Some(false)) => None,
                (Prepared::Ready { command, target, plan, attached }, Some(true)) => {
                    Some(Prepared::Ready { command, target, plan: plan.on_record(), attached })
                }
                (p, _) => Some(p),
            })
            .collect()
    }

    /// Calls the row's executor, and decides what its answer does: the delivery's moves and the
    /// row's fate (`None` for the row: handed to the bus, which answers later).
    async fn call(
        &self,
        row: &ClaimedMessage,
        (command, target, plan, attached): (&StoredCommand, &Target, &DeliveryPlan, &Attached),
    ) -> (DeliveryPlan, Option<OutboxSettle>) {
        use crate::service::telemetry::{Carried, carrying, dispatch_span};
        let span = dispatch_span(command, &row.destination, row.attempt);
        // Without spans, the caller's trace the command came in goes on to the executor as it came.
        let carried = Carried::from_traceparent(command.trace_parent.as_deref());
        let outcome = match &target.executor {
            Executor::Gateway => carrying(carried, self.gateway().call(command).instrument(span)).await,
            executor => {
                let ids = CallIds { delivery: plan.id(), message: row.id, attempt: row.attempt };
                carrying(carried, executor.call(&command.envelope, ids, attached).instrument(span)).await
            }
        };
        let executor = row.destination.clone();
        metrics::counter!("chatgate_dispatch_attempts_total", "executor" => executor, "outcome" => outcome.label())
            .increment(1);
        let mut plan = plan.clone();
        let waiting = match &outcome {
            CallOutcome::Waiting(wait) => Some(wait.clone()),
            _ => None,
        };
        let before = plan.clone();
        let settle = self.settle_after(outcome, &mut plan, row, target, command, OffsetDateTime::now_utc());
        if let Some(wait) = waiting
            && let Err(error) = self.wait_for_approval(command, &row.destination, &wait, &mut plan).await
        {
            // Nothing written: the row is called again shortly, and the executor answers again.
            let at = OffsetDateTime::now_utc() + std::time::Duration::from_secs(1);
            return (before, Some(OutboxSettle::Retry { id: row.id, at, error: error.to_string() }));
        }
        (plan, settle)
    }

    /// An executor's answer that its execution waits: the approval it asks for goes into the
    /// step; an approval no one can give fails the execution at once (`approval_unavailable`).
    async fn wait_for_approval(
        &self,
        command: &StoredCommand,
        target: &str,
        wait: &ApprovalWait,
        plan: &mut DeliveryPlan,
    ) -> Result<(), EngineError> {
        let now = OffsetDateTime::now_utc();
        let asking = (self.engine(), self.policy());
        if let Err(unaskable) = execution::ask(asking, command, (target, wait), plan, now).await? {
            let detail = json!({"code": execution::APPROVAL_UNAVAILABLE, "message": unaskable.0});
            let _ = plan.apply(DeliveryEvent::ExecutionFailed, Some(detail));
        }
        Ok(())
    }

    /// Writes every row's outcome in one transaction, then what follows each conclusion.
    async fn conclude(
        &self,
        rows: &[ClaimedMessage],
        prepared: Vec<Option<Prepared>>,
        outcomes: Vec<Option<(DeliveryPlan, Option<OutboxSettle>)>>,
    ) -> Result<(), EngineError> {
        let now = OffsetDateTime::now_utc();
        let concluding: Vec<Uuid> = prepared
            .iter()
            .filter_map(|p| match p {
                Some(Prepared::Ready { command, .. } | Prepared::Unroutable { command, .. }) => {
                    Some(command.envelope.command_id)
                }
                _ => None,
            })
            .collect();
        let targets = self.engine().database().handover().targets_of(&concluding).await?;
        let mut written = vec![];
        for ((row, prepared), outcome) in rows.iter().zip(&prepared).zip(outcomes) {
            let (command, plan, settle) = match (prepared, outcome) {
                (Some(Prepared::Settled(settle)), _) => {
                    written.extend(self.settled_step(row, settle.clone(), now).await?.map(Written::Alone));
                    continue;
                }
                (Some(Prepared::Unroutable { command, plan }), _) => {
                    (command, plan.clone(), Some(OutboxSettle::Done(row.id)))
                }
                (Some(Prepared::Ready { command, .. }), Some((_, None))) => {
                    // On the bus: the delivery stays routed until the agent's ACK comes back over it.
                    let tenant = command.envelope.tenant_id.clone();
                    let step =
                        StepWrite { outbox_row: Some(OutboxSettle::Done(row.id)), ..StepWrite::new(tenant, None, now) };
                    written.push(Written::Alone(step));
                    continue;
                }
                (Some(Prepared::Ready { command, .. }), Some((plan, settle))) => (command, plan, settle),
                _ => continue,
            };
            let targets = targets.get(&command.envelope.command_id).cloned().unwrap_or_default();
            let target = row.destination.as_str();
            let conclusion = Conclusion::decide(self.engine(), command, target, plan, settle, targets, now).await?;
            written.push(Written::Concluded(conclusion));
        }
        self.commit(written).await
    }

    /// A row with nothing to hand over, as a step of the batch; settled here on its own when it
    /// has no tenant to write it under.
    async fn settled_step(
        &self,
        row: &ClaimedMessage,
        settle: OutboxSettle,
        now: OffsetDateTime,
    ) -> Result<Option<StepWrite>, EngineError> {
        match TenantId::parse(&row.tenant_id) {
            Ok(tenant) => Ok(Some(StepWrite { outbox_row: Some(settle), ..StepWrite::new(tenant, None, now) })),
            Err(_) => {
                self.engine().database().handover().settle(&settle, now).await?;
                Ok(None)
            }
        }
    }

    async fn commit(&self, written: Vec<Written<'_>>) -> Result<(), EngineError> {
        let steps: Vec<&StepWrite> = written
            .iter()
            .map(|w| match w {
                Written::Alone(step) => step,
                Written::Concluded(conclusion) => &conclusion.step,
            })
            .collect();
        let outcomes = self.engine().database().handover().commit_steps(&steps).await;
        for (written, outcome) in written.into_iter().zip(outcomes) {
            match (written, outcome) {
                (Written::Concluded(conclusion), Ok(StepOutcome::Committed { .. })) => {
                    conclusion.committed(self.engine()).await?
                }
                (_, Ok(StepOutcome::Committed { .. })) => {}
                // Another worker or an ACK moved it meanwhile: the lease ends and the row is
                // looked at again on fresh state.
                (_, Ok(_)) => tracing::info!("dispatch lost a race; it is looked at again"),
                (_, Err(error)) => {
                    tracing::warn!(%error, "dispatch not recorded; the row comes back when its lease ends")
                }
            }
        }
        Ok(())
    }
}
