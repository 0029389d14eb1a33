//! Settling an approval and moving its command in one step: approved — allowed, the requester
//! told, dispatched; denied or expired — rejected, the requester told why (the outcome reply).
//! The approval's compare-and-set on `pending` makes the step stale if it was settled meanwhile.

use time::OffsetDateTime;

use crate::domain::evidence::EvidenceDraft;
use crate::domain::evidence::decision::Decision;
use crate::domain::lifecycle::{Event, State};
use crate::domain::replies::{Confirmed, Reply};
use crate::service::dispatch;
use crate::service::engine::{Engine, EngineError, MoveContext};
use crate::service::security::Policy;
use crate::store::{ApprovalStatus, ApprovalWrite, AskedBy, ConsumedToken, StepOutcome, StepWrite, StoredApproval};

/// The reason code of a request someone who may decide denied.
pub const APPROVAL_DENIED: &str = "approval_denied";
/// The reason code of a request not approved in time.
pub const APPROVAL_EXPIRED: &str = "approval_expired";

/// An approval to settle as `status` (`by`: who denied it), with the step's own evidence.
pub(super) struct Settling<'a> {
    pub(super) approval: &'a StoredApproval,
    pub(super) status: ApprovalStatus,
    pub(super) by: Option<String>,
    pub(super) evidence: Vec<EvidenceDraft>,
    /// A step-up proof the settling uses up (a break-glass override's).
    pub(super) consume: Option<ConsumedToken>,
}

/// Settles it and moves its command; `false` when it was settled (or its command moved)
/// meanwhile, and nothing was written.
pub(super) async fn settle(
    engine: &Engine,
    policy: &Policy,
    settling: Settling<'_>,
    now: OffsetDateTime,
) -> Result<bool, EngineError> {
    let requested_at = settling.approval.requested_at;
    let settled = match settling.approval.asked_by {
        AskedBy::Executor { .. } => super::execution::settle((engine, policy), settling, now).await?,
        AskedBy::Policy => settle_request(engine, policy, settling, now).await?,
    };
    if settled {
        let waited = (now - requested_at).as_seconds_f64().max(0.0);
        metrics::histogram!("chatgate_approval_decision_seconds").record(waited);
    }
    Ok(settled)
}

/// Settles a policy's approval and moves its command out of `authz_pending`.
async fn settle_request(
    engine: &Engine,
    policy: &Policy,
    settling: Settling<'_>,
    now: OffsetDateTime,
) -> Result<bool, EngineError> {
    let Settling { approval, status, by, evidence, consume } = settling;
    let command = engine.command(&approval.tenant_id, approval.command_id).await?;
    if command.lifecycle.state != State::AuthzPending {
        return Ok(false);
    }
    let settled = Decision::ApprovalSettled {
        approval_id: approval.id,
        status,
        by: by.as_deref().map(|by| engine.pseudonym(by)),
    };
    let context = |reason: Option<&str>, outbox| MoveContext {
        reason_code: reason.map(str::to_owned),
        decision: Some(settled.clone().into()),
        outbox,
        reply_detail: None,
    };
    let moves = match (status, policy.spec_of(&command).await?) {
        (ApprovalStatus::Approved | ApprovalStatus::Overridden, Some(spec)) => {
            let name = command.reply_to.as_ref().and_then(|r| r.command.clone()).unwrap_or_else(|| spec.name.clone());
            let what = command.reply_to.as_ref().and_then(|r| r.what.clone());
            let confirmed = Reply::Confirmed(Confirmed { command: name, what, command_id: approval.command_id });
            let told = command.reply_to.iter().map(|r| r.message(&confirmed)).collect();
            vec![(Event::Allow, context(None, told)), dispatch::start(&spec.targets)]
        }
        (ApprovalStatus::Approved | ApprovalStatus::Overridden, None) => {
            vec![(Event::Deny, context(Some("unknown_command"), vec![]))]
        }
        (ApprovalStatus::Denied, _) => vec![(Event::Deny, context(Some(APPROVAL_DENIED), vec![]))],
        _ => vec![(Event::Deny, context(Some(APPROVAL_EXPIRED), vec![]))],
    };
    let Ok(writes) = engine.plan_moves(&command, moves, now) else { return Ok(false) };
    let step = StepWrite {
        approval: Some(ApprovalWrite::Settle { id: approval.id, status, by }),
        moves: writes,
        evidence,
        consume,
        ..StepWrite::new(approval.tenant_id.clone(), Some(approval.command_id), now)
    };
    Ok(matches!(engine.store().commands().commit_step(&step).await?, StepOutcome::Committed { .. }))
}
