//! Break-glass (issue #46): an operator whose token holds `approvals:override` settles a pending
//! approval as `overridden` — the command goes ahead as if approved — without its approvers, but
//! only with a step-up proof of their own for that command (used once, in the settling
//! transaction) and a written reason. The override is evidence of its own kind
//! (`approval.overridden`), shown on the command and counted by a metric.

use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::TenantId;
use crate::domain::evidence::decision::Decision;
use crate::domain::evidence::{EvidenceDraft, TraceBindings};
use crate::domain::lifecycle::EvidenceKind;
use crate::service::engine::Engine;
use crate::service::security::{Policy, StepUpFailure};
use crate::store::ApprovalStatus;

use super::settle::{Settling, settle};

/// The fewest characters a break-glass reason has: a sentence, not a word.
pub const SHORTEST_REASON: usize = 10;

/// Who overrides which approval, why, and their proof.
#[derive(Debug, Clone)]
pub struct Overriding<'a> {
    pub tenant: &'a TenantId,
    pub approval_id: Uuid,
    /// The operator, as their token names them.
    pub operator: &'a str,
    pub reason: &'a str,
    pub step_up_token: &'a str,
}

/// What an override came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Overridden {
    /// Settled `overridden`: the command goes ahead.
    Done,
    /// The approval was settled before (approved, denied, expired, overridden, closed).
    Settled { status: ApprovalStatus },
    /// The reason is shorter than [`SHORTEST_REASON`].
    ReasonTooShort,
}

/// Overrides the approval when the proof holds; an unknown approval is `StepUpFailure::NotFound`.
pub async fn break_glass(
    engine: &Engine,
    policy: &Policy,
    overriding: &Overriding<'_>,
    now: OffsetDateTime,
) -> Result<Overridden, StepUpFailure> {
    let reason = overriding.reason.trim();
    if reason.chars().count() < SHORTEST_REASON {
        return Ok(Overridden::ReasonTooShort);
    }
    let approvals = engine.store().approvals();
    let approval = approvals.get(overriding.tenant, overriding.approval_id).await?.ok_or(StepUpFailure::NotFound)?;
    if approval.status != ApprovalStatus::Pending {
        return Ok(Overridden::Settled { status: approval.status });
    }
    let command = engine.command(&approval.tenant_id, approval.command_id).await?;
    let stepup = &policy.security.stepup;
    let proof = stepup.verify_for(overriding.step_up_token, overriding.operator, &command, now)?;
    if engine.store().tokens().used(&proof.issuer, &proof.jti).await? {
        return Err(StepUpFailure::Used);
    }
    let operator = engine.pseudonym(overriding.operator);
    let decision = Decision::ApprovalOverridden {
        approval_id: approval.id,
        operator: operator.clone(),
        reason: reason.to_owned(),
        step_up_proof: proof.evidence(),
    };
    let trace = TraceBindings { actor: Some(operator), ..TraceBindings::default() };
    let mut draft = EvidenceDraft::new(EvidenceKind::ApprovalOverridden, approval.command_id, trace);
    draft.stage = Some(command.lifecycle.state);
    draft.decision = Some(decision.into());
    let consume = proof.consumed();
    let settling = Settling {
        approval: &approval,
        status: ApprovalStatus::Overridden,
        by: Some(overriding.operator.to_owned()),
        evidence: vec![draft],
        consume: Some(consume),
    };
    if settle(engine, policy, settling, now).await? {
        metrics::counter!("chatgate_approval_overrides_total").increment(1);
        return Ok(Overridden::Done);
    }
    // Settled meanwhile (or the proof was used by a racing request: its step changed nothing).
    let now_stands = approvals.get(overriding.tenant, approval.id).await?;
    match now_stands.map(|a| a.status) {
        Some(ApprovalStatus::Pending) => Err(StepUpFailure::Used),
        status => Ok(Overridden::Settled { status: status.unwrap_or(ApprovalStatus::Closed) }),
    }
}
