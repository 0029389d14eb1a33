//! Group commit for steps: the dispatcher's (and any worker's) steps of one batch in one
//! transaction, each table written with multi-row statements, so that a batch of commands costs
//! a few round trips to the database instead of a dozen each.
//!
//! Only the common case is batched: steps that carry no message, answer no confirmation and use
//! no token, each about commands no other step of the batch touches. If one step finds its
//! delivery or command moved meanwhile (a lost race), the whole batch is rolled back and each step
//! goes through [`Commands::commit_step`] alone, which the conformance suite proves: being fast
//! never changes an answer.

use std::collections::HashSet;

use sqlx::AnyConnection;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::store::commands::{TransitionWrite, insert_transitions, move_commands, transition_row};
use crate::store::dedupe::lock_dedupes;
use crate::store::deliveries::{DeliveryChange, create_deliveries, log_events, update_deliveries};
use crate::store::figures::Moves;
use crate::store::outbox::{NewOutboxMessage, insert_outboxes, settle_outboxes};
use crate::store::step::append_and_settle;
use crate::store::{Commands, OutboxSettle, StepOutcome, StepWrite, Store, StoreError, Tx};

impl Commands<'_> {
    /// Commits `steps`, one outcome each, in order: as one transaction when they are the common
    /// case, else one by one. The outcomes are those each step would get alone.
    pub async fn commit_steps(self, steps: &[&StepWrite]) -> Vec<Result<StepOutcome, StoreError>> {
        if steps.len() > 1 && batchable(steps) {
            match self.store.commit_batch(steps).await {
                Ok(Some(outcomes)) => {
                    let stats = &self.store.stats;
                    stats.step_batches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    stats.steps_batched.fetch_add(steps.len() as u64, std::sync::atomic::Ordering::Relaxed);
                    metrics::counter!("chatgate_step_batches_total").increment(1);
                    metrics::counter!("chatgate_steps_batched_total").increment(steps.len() as u64);
                    return outcomes.into_iter().map(Ok).collect();
                }
                Ok(None) => tracing::debug!("a step of the batch lost a race; committing one at a time"),
                Err(error) => tracing::debug!(%error, "batch of steps failed; committing one at a time"),
            }
        }
        let mut outcomes = Vec::with_capacity(steps.len());
        for step in steps {
            outcomes.push(self.store.commands().commit_step(step).await);
        }
        outcomes
    }
}

impl Store {
    /// `None` (with nothing written) when a delivery or a command moved since its step was decided.
    async fn commit_batch(&self, steps: &[&StepWrite]) -> Result<Option<Vec<StepOutcome>>, StoreError> {
        let mut tx = self.begin().await?;
        if !write_deliveries(&mut tx, steps).await? || !move_every_command(&mut tx, steps).await? {
            tx.rollback().await?;
            return Ok(None);
        }
        lock_dedupes(&mut tx, steps.iter().flat_map(|step| step.moves.iter().map(TransitionWrite::ends_in))).await?;
        let released: Vec<Uuid> = steps.iter().flat_map(|s| &s.moves).filter_map(TransitionWrite::releases).collect();
        crate::store::locks::release_locks(&mut tx, &released).await?;
        write_outboxes(&mut tx, steps).await?;
        let evidence = append_and_settle(&mut tx, steps).await?;
        tx.commit().await?;
        let written: Vec<&NewOutboxMessage> =
            steps.iter().flat_map(|s| s.outbox.iter().chain(s.moves.iter().flat_map(|m| &m.outbox))).collect();
        self.signals().written(written);
        self.moved(steps.iter().flat_map(|s| s.moves.iter().map(TransitionWrite::committed)));
        Ok(Some(
            evidence.into_iter().map(|(evidence_ids, moves)| StepOutcome::Committed { moves, evidence_ids }).collect(),
        ))
    }
}

/// Creates and moves every step's delivery and logs their events; `false` when one moved (or
/// was created by another worker) since its step was decided.
async fn write_deliveries(tx: &mut Tx, steps: &[&StepWrite]) -> Result<bool, StoreError> {
    let Some(at) = steps.first().map(|s| s.at) else { return Ok(true) };
    let changes: Vec<(&DeliveryChange, OffsetDateTime)> =
        steps.iter().filter_map(|s| s.delivery.as_ref().map(|d| (d, s.at))).collect();
    // A new delivery is written as its change leaves it; only the others are moved.
    let (new, moving): (Vec<_>, Vec<_>) = changes.iter().partition(|(change, _)| change.create.is_some());
    if create_deliveries(tx, &new, at).await? != new.len() || update_deliveries(tx, &moving).await? != moving.len() {
        return Ok(false);
    }
    let logs: Vec<(Uuid, &[crate::store::DeliveryLogEntry])> =
        changes.iter().map(|(c, _)| (c.delivery_id, c.log.as_slice())).collect();
    log_events(tx, &logs, at).await?;
    tx.figures.merge(Moves::of_deliveries(changes));
    Ok(true)
}

/// The outbox rows every step and move writes, and the rows the steps settle.
async fn write_outboxes(tx: &mut Tx, steps: &[&StepWrite]) -> Result<(), StoreError> {
    let Some(at) = steps.first().map(|s| s.at) else { return Ok(()) };
    let outbox = steps.iter().flat_map(|step| {
        let of_moves = step
            .moves
            .iter()
            .flat_map(move |m| m.outbox.iter().map(move |o| (m.tenant_id.as_str(), Some(m.command_id), o, at)));
        of_moves.chain(step.outbox.iter().map(move |o| (step.tenant_id.as_str(), step.command_id, o, at)))
    });
    let moved = insert_outboxes(tx, outbox.collect()).await?;
    tx.figures.merge(moved);
    let settled: Vec<_> = steps.iter().filter_map(|s| s.outbox_row.as_ref().map(|row| (row, s.at))).collect();
    let moved = settle_outboxes(tx, &settled).await?;
    tx.figures.merge(moved);
    Ok(())
}

/// Moves every command of every step, each in one statement, and records the transitions;
/// `false` when a command moved since its step was decided.
async fn move_every_command(tx: &mut AnyConnection, steps: &[&StepWrite]) -> Result<bool, StoreError> {
    let all_runs: Vec<&[TransitionWrite]> = steps.iter().flat_map(|s| runs(&s.moves)).collect();
    if move_commands(tx, &all_runs).await? != all_runs.len() {
        return Ok(false);
    }
    let mut transitions = vec![];
    for step in steps {
        transitions.extend(step.moves.iter().map(|write| {
            let (version, reason) = (write.expected_version + 1, write.reason_code.as_deref());
            transition_row(write.command_id, version, &write.transition, reason, write.at)
        }));
    }
    insert_transitions(tx, transitions).await?;
    Ok(true)
}

/// A step's moves split into runs of one command each.
fn runs(moves: &[TransitionWrite]) -> impl Iterator<Item = &[TransitionWrite]> {
    moves.chunk_by(|a, b| a.command_id == b.command_id)
}

/// The common case: no step carries a message, answers or opens a confirmation, opens or settles
/// an approval or uses a token; each
/// command is touched by one run of moves in one step, each run follows on from itself, and no
/// delivery or claimed row appears twice.
fn batchable(steps: &[&StepWrite]) -> bool {
    let mut commands = HashSet::new();
    let mut deliveries = HashSet::new();
    let mut rows = HashSet::new();
    steps.iter().all(|step| {
        let plain = step.inbound.is_none()
            && step.settle.is_none()
            && step.consume.is_none()
            && step.approval.is_none()
            && step.prompt.is_none()
            && step.take_lock.is_none();
        // A delivery that stops waiting closes its approval: written alone (`store::step`).
        let delivery = step.delivery.as_ref().is_none_or(|d| !d.stops_waiting() && deliveries.insert(d.delivery_id));
        let row = step.outbox_row.as_ref().is_none_or(|r| rows.insert(settled_id(r)));
        let moves = runs(&step.moves).all(|run| {
            let chained = run.windows(2).all(|pair| {
                pair[1].expected_version == pair[0].expected_version + 1
                    && pair[1].transition.from == pair[0].transition.to
            });
            chained && commands.insert(run[0].command_id)
        });
        plain && delivery && row && moves
    })
}

fn settled_id(settle: &OutboxSettle) -> Uuid {
    match settle {
        OutboxSettle::Done(id) | OutboxSettle::Retry { id, .. } | OutboxSettle::Dead { id, .. } => *id,
    }
}
