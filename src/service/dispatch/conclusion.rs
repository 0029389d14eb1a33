//! A delivery that ended, and the command's move it decides: one step, committed alone or with a
//! batch's, then what follows once it is on record.

use serde_json::Value;
use time::OffsetDateTime;

use crate::domain::delivery::{Ack, DeliveryOutcome, LogOutcome};
use crate::domain::evidence::decision::Decision;
use crate::domain::lifecycle::Event;
use crate::service::dispatch::{DeliveryPlan, Finished, command_moves, finished};
use crate::service::engine::{Engine, MoveContext};
use crate::store::{StepOutcome, StepWrite, StoredCommand, TransitionWrite};

/// Writes a delivery's change with, when it decides the command, the command's move — one step,
/// together with the claimed row's fate. With several targets the command moves once every
/// target has ended (or one has failed): each finisher checks again after its own commit, so the
/// last one to commit always sees them all, and the command's version makes the move happen once.
/// Returns whether the delivery's change was written.
pub async fn conclude(
    engine: &Engine,
    command: &StoredCommand,
    target: &str,
    plan: DeliveryPlan,
    settle: Option<crate::store::OutboxSettle>,
    now: OffsetDateTime,
) -> Result<bool, crate::service::engine::EngineError> {
    let targets = engine.store().deliveries().dispatch_targets(command.envelope.command_id).await?;
    let conclusion = Conclusion::decide(engine, command, target, plan, settle, targets, now).await?;
    if !matches!(engine.store().commands().commit_step(&conclusion.step).await?, StepOutcome::Committed { .. }) {
        return Ok(false);
    }
    conclusion.committed(engine).await?;
    Ok(true)
}

/// A delivery's change and, when it decides the command, the command's move, as one step to
/// commit (alone, or with a batch's); then what follows once it is committed.
pub struct Conclusion<'a> {
    pub step: StepWrite,
    command: &'a StoredCommand,
    target: &'a str,
    /// Every target the command was dispatched to.
    targets: Vec<String>,
    done: Option<Finished>,
    acks: Vec<Ack>,
}

impl<'a> Conclusion<'a> {
    pub async fn decide(
        engine: &Engine,
        command: &'a StoredCommand,
        target: &'a str,
        plan: DeliveryPlan,
        settle: Option<crate::store::OutboxSettle>,
        targets: Vec<String>,
        now: OffsetDateTime,
    ) -> Result<Self, crate::service::engine::EngineError> {
        let e = &command.envelope;
        let done = finished(&plan);
        let mut moves = match (&done, targets.len() <= 1) {
            (Some(done), true) => command_moves(engine, command, target, done.clone(), now),
            _ => vec![],
        };
        moves.extend(compensated(engine, command, &moves, now).await?);
        let acks = plan.change.log.iter().filter(|l| l.outcome == LogOutcome::Moved).filter_map(|l| l.ack).collect();
        let step = StepWrite {
            delivery: Some(plan.change),
            moves,
            outbox_row: settle,
            approval: plan.with.approval,
            consume: plan.with.consume,
            outbox: plan.with.outbox,
            evidence: plan.with.evidence,
            ..StepWrite::new(e.tenant_id.clone(), Some(e.command_id), now)
        };
        Ok(Self { step, command, target, targets, done, acks })
    }

    /// After the step is committed: the latency from the command's receipt to its delivery ACK
    /// and to its result (Bloodbank OBS-1), and a multi-target command's move once its targets
    /// decide it.
    pub async fn committed(self, engine: &Engine) -> Result<(), crate::service::engine::EngineError> {
        let now = self.step.at;
        let since_receipt = (now - self.command.envelope.received_at).as_seconds_f64().max(0.0);
        for ack in &self.acks {
            match ack {
                Ack::Delivery => {
                    metrics::histogram!("chatgate_ack_latency_seconds", "executor" => self.target.to_owned())
                        .record(since_receipt)
                }
                Ack::Execution if self.done.is_some() => {
                    metrics::histogram!("chatgate_result_latency_seconds", "executor" => self.target.to_owned())
                        .record(since_receipt)
                }
                _ => {}
            }
        }
        if self.done.is_some() && self.targets.len() > 1 {
            settle_command(engine, self.command, &self.targets, now).await?;
        }
        Ok(())
    }
}

/// When `moves` make a compensation command succeed, the move of the command it compensates to
/// `compensated`, in the same step (SMCL §VIII.B: only once the compensation succeeded). A
/// compensation is a recovery command with an intent other than its target's (a retry has the
/// same intent).
async fn compensated(
    engine: &Engine,
    command: &StoredCommand,
    moves: &[TransitionWrite],
    now: OffsetDateTime,
) -> Result<Vec<TransitionWrite>, crate::service::engine::EngineError> {
    let succeeded = moves.iter().any(|m| {
        m.command_id == command.envelope.command_id && m.transition.to == crate::domain::lifecycle::State::Executed
    });
    let Some(target_id) = command.envelope.target_command_id.filter(|_| succeeded) else { return Ok(vec![]) };
    let Some(target) = engine.store().commands().get(&command.envelope.tenant_id, target_id).await? else {
        return Ok(vec![]);
    };
    if target.envelope.intent == command.envelope.intent {
        return Ok(vec![]);
    }
    let context = MoveContext {
        reason_code: Some("compensated".into()),
        decision: Some(
            Decision::Compensated {
                compensated_by: command.envelope.command_id,
                compensation: command.envelope.intent.clone(),
            }
            .into(),
        ),
        ..MoveContext::default()
    };
    Ok(engine.plan_moves(&target, vec![(Event::Compensate, context)], now).unwrap_or_default())
}

/// Moves a multi-target command once its targets' outcomes decide it (the seed's default policy).
async fn settle_command(
    engine: &Engine,
    command: &StoredCommand,
    targets: &[String],
    now: OffsetDateTime,
) -> Result<(), crate::service::engine::EngineError> {
    let deliveries = engine.store().deliveries().of_command(command.envelope.command_id).await?;
    let outcome_of = |target: &String| {
        let outcome = deliveries.iter().find(|d| &d.target == target).and_then(|d| d.outcome);
        outcome.map(|outcome| outcome == DeliveryOutcome::Succeeded)
    };
    let outcomes: Vec<Option<bool>> = targets.iter().map(outcome_of).collect();
    let finished = match crate::domain::delivery::aggregate(&outcomes) {
        crate::domain::delivery::Overall::Pending => return Ok(()),
        crate::domain::delivery::Overall::Succeeded => {
            let results: serde_json::Map<String, Value> =
                deliveries.iter().map(|d| (d.target.clone(), d.detail.clone().unwrap_or(Value::Null))).collect();
            Finished::Succeeded { result: Value::Object(results) }
        }
        crate::domain::delivery::Overall::Failed => {
            let failed = deliveries.iter().find(|d| d.outcome == Some(DeliveryOutcome::Failed));
            let detail = failed.and_then(|d| d.detail.clone()).unwrap_or(Value::Null);
            let reason = failed
                .and_then(|d| d.failure_class.clone().or_else(|| detail["code"].as_str().map(str::to_owned)))
                .unwrap_or_else(|| "executor_error".into());
            Finished::Failed { reason, detail }
        }
    };
    // Read again: another finisher may have moved it already (then there is nothing to do).
    let current = engine.command(&command.envelope.tenant_id, command.envelope.command_id).await?;
    let moves = command_moves(engine, &current, "all targets", finished, now);
    if moves.is_empty() {
        return Ok(());
    }
    let e = &current.envelope;
    let step = StepWrite { moves, ..StepWrite::new(e.tenant_id.clone(), Some(e.command_id), now) };
    engine.store().commands().commit_step(&step).await?;
    Ok(())
}
