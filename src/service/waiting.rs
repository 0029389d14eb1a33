//! Waiting one's turn (`lock = "wait"`, issue #47): a mutation that found what it changes held was
//! admitted to `canonicalized` with a `lock_wait` row for the resource. The row comes due when the
//! holder's end releases the resource (the release makes it due at once), or every few seconds in
//! case it raced with a release; its command then takes the resource and is asked to confirm (or,
//! where its executor previews, asked for the preview first) in the same step — or waits on if
//! another waiter took it first, oldest first. One whose TTL runs out first is refused
//! (`lock_wait_expired`), told so. Never two changes of one resource at once, and a waiter never
//! holds anything.

use serde_json::json;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::lifecycle::{Event, State};
use crate::domain::locks::Resource;
use crate::domain::replies::OutcomeDetail;
use crate::service::dispatch::preview_request;
use crate::service::engine::{Engine, EngineError, MoveContext, WAIT_POLL};
use crate::service::previews::{Shown, prompt};
use crate::service::security::Policy;
pub use crate::store::LOCK_WAIT_KIND;
use crate::store::{OutboxSettle, StepOutcome, StepWrite, StoredCommand};

/// Why a command that waited its turn was refused: its TTL ran out first.
pub const LOCK_WAIT_EXPIRED: &str = "lock_wait_expired";

/// What came of one waiter's row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// It took the resource and was asked to confirm (or for its preview).
    Taken,
    /// Another command holds it: it waits on.
    Waits,
    /// Its TTL ran out: refused.
    Expired,
    /// It waits no more (ended meanwhile, or the row was done before).
    Settled,
}

/// Gives `command` its turn on `resource` if it is free; `row` is its `lock_wait` row.
pub async fn take_turn(
    (engine, policy): (&Engine, &Policy),
    command: &StoredCommand,
    (row, resource): (Uuid, &str),
    now: OffsetDateTime,
) -> Result<Turn, EngineError> {
    let handover = engine.database().handover();
    let spec = policy.known_spec_of(command);
    let (Some(spec), Some(resource), Some(reply_to), State::Canonicalized) =
        (spec, Resource::parse(resource), command.reply_to.as_ref(), command.lifecycle.state)
    else {
        handover.settle(&OutboxSettle::Done(row), now).await?;
        return Ok(Turn::Settled);
    };
    let e = &command.envelope;
    let mut step = StepWrite {
        outbox_row: Some(OutboxSettle::Done(row)),
        ..StepWrite::new(e.tenant_id.clone(), Some(e.command_id), now)
    };
    if e.expires_at.is_some_and(|at| at <= now) {
        step.moves = expired(engine, command, &resource, now).map_err(EngineError::InvalidPlan)?;
        handover.commit_step(&step).await?;
        return Ok(Turn::Expired);
    }
    step.take_lock = Some(resource);
    if policy.previews(&spec) {
        step.outbox.push(preview_request(&spec.executor));
    } else {
        step.moves = prompt(engine, (&spec, reply_to), command, Shown::NotAsked, &mut step, now)
            .map_err(EngineError::InvalidPlan)?;
    }
    match handover.commit_step(&step).await? {
        StepOutcome::Committed { .. } => Ok(Turn::Taken),
        StepOutcome::Locked { .. } => {
            let again = e.expires_at.map_or(now + WAIT_POLL, |at| at.min(now + WAIT_POLL));
            let error = "waiting its turn".to_owned();
            handover.settle(&OutboxSettle::Retry { id: row, at: again, error }, now).await?;
            Ok(Turn::Waits)
        }
        // Moved meanwhile: the row comes back when its lease ends, and finds where it stands.
        _ => Ok(Turn::Settled),
    }
}

/// Refused for want of its turn: `canonicalized → authz_pending → rejected`, the person told so.
fn expired(
    engine: &Engine,
    command: &StoredCommand,
    resource: &Resource,
    now: OffsetDateTime,
) -> Result<Vec<crate::store::TransitionWrite>, crate::domain::lifecycle::InvalidTransition> {
    let error = json!({"entity": resource.entity(), "target": resource.target()});
    let deny = MoveContext {
        reason_code: Some(LOCK_WAIT_EXPIRED.to_owned()),
        reply_detail: Some(OutcomeDetail::Error(error)),
        ..MoveContext::default()
    };
    engine.plan_moves(command, vec![(Event::SubmitForAuthorization, MoveContext::default()), (Event::Deny, deny)], now)
}
