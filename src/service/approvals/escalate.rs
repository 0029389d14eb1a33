//! Escalation: when a pending approval has waited as long as one of its rules' `escalate.after`,
//! the holders of that escalation's roles may decide too (`domain::registry::approvals::
//! deciders`) — and they are asked, once, as the approvers were, with its evidence
//! (`approval.escalated`). Run periodically beside the expiry; several instances may run it at
//! once: asking is a compare-and-set on the escalation's moment, so the people are asked once.

use time::OffsetDateTime;

use crate::domain::evidence::decision::Decision;
use crate::domain::evidence::{EvidenceDraft, TraceBindings};
use crate::domain::lifecycle::EvidenceKind;
use crate::domain::registry::approvals::{escalating_roles, next_escalation};
use crate::service::engine::{Engine, EngineError};
use crate::service::security::Policy;
use crate::service::security::approval::{Asked, asks};
use crate::store::{ApprovalWrite, StepOutcome, StepWrite, StoredApproval};

use super::decide::waited;

/// Asks the escalation roles of the approvals whose escalation is due at `now`, at most `limit`;
/// returns how many approvals escalated.
pub async fn escalate_due(
    engine: &Engine,
    policy: &Policy,
    now: OffsetDateTime,
    limit: i64,
) -> Result<usize, EngineError> {
    let mut escalated = 0;
    for approval in engine.store().approvals().escalation_due(now, limit).await? {
        if escalate(engine, policy, &approval, now).await? {
            escalated += 1;
        }
    }
    Ok(escalated)
}

/// Asks one approval's escalation roles; `false` when another instance did, or it settled.
async fn escalate(
    engine: &Engine,
    policy: &Policy,
    approval: &StoredApproval,
    now: OffsetDateTime,
) -> Result<bool, EngineError> {
    let Some(was) = approval.escalates_at else { return Ok(false) };
    let waited = waited(approval, now);
    // The escalations due since this one's moment: earlier ones were asked by earlier sweeps.
    let since = (was - approval.requested_at).try_into().unwrap_or_default();
    let roles = escalating_roles(&approval.needs, since, waited);
    let command = engine.command(&approval.tenant_id, approval.command_id).await?;
    let name = command.asked_name();
    let asked = Asked { id: approval.id, requester: &approval.requester, needs: &approval.needs, roles };
    let preview = engine.reads().preview_of(approval.command_id).await?;
    let outbox = asks(policy, (&command, preview.as_ref()), &asked, &name).await?;
    let next = next_escalation(&approval.needs, waited)
        .map(|after| approval.requested_at + after)
        .filter(|due| *due < approval.expires_at);
    let decision = Decision::ApprovalEscalated {
        approval_id: approval.id,
        roles: asked.roles.iter().cloned().collect(),
        asked: outbox.len(),
        next: next.map(OffsetDateTime::unix_timestamp),
    };
    let mut draft = EvidenceDraft::new(EvidenceKind::ApprovalEscalated, approval.command_id, TraceBindings::default());
    draft.stage = Some(command.lifecycle.state);
    draft.decision = Some(decision.into());
    let step = StepWrite {
        approval: Some(ApprovalWrite::Escalated { id: approval.id, was, next }),
        outbox,
        evidence: vec![draft],
        ..StepWrite::new(approval.tenant_id.clone(), Some(approval.command_id), now)
    };
    Ok(matches!(engine.store().commands().commit_step(&step).await?, StepOutcome::Committed { .. }))
}
