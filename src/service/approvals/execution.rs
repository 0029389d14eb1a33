//! Executor-requested approvals (workflow seed §6.10): an executor answers that the execution
//! waits (`RUNNING → WAITING`), the delivery moves to `waiting` and an approval is opened in the
//! same step, asking the roles the executor named (or the command's own approval rules'); the
//! requester is told by whom it waits. Once approved, the same delivery goes back to `delivered`
//! and a dispatch row carries the grant to the same executor under the same idempotency key
//! (`WAITING → RUNNING`, "without replaying side effects"); denied or expired, the delivery closes
//! and the command fails as `approval_rejected`. The command stays `started` all along: the SMCL
//! has no waiting state after `started`, and needs none.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::json;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::delivery::{ApprovalGrant, ApprovalWait, DeliveryEvent, DeliveryState, GrantedBy};
use crate::domain::evidence::decision::Decision;
use crate::domain::evidence::{EvidenceDraft, TraceBindings};
use crate::domain::instants::rfc3339;
use crate::domain::lifecycle::{EvidenceKind, State};
use crate::domain::registry::approvals::{Need, RuleOutcome, Vote};
use crate::service::dispatch::{DeliveryPlan, DispatchOrder, cancel_notices, conclude};
use crate::service::engine::{Engine, EngineError};
use crate::service::security::Policy;
use crate::service::security::approval::{Asked, asks, opening};
use crate::store::{ApprovalStatus, ApprovalWrite, AskedBy, StoredApproval, StoredCommand};

use super::settle::Settling;

/// The reason code of an execution whose approval was denied or not given in time.
pub const APPROVAL_REJECTED: &str = "approval_rejected";
/// The reason code of an execution that asked for an approval no one can give.
pub const APPROVAL_UNAVAILABLE: &str = "approval_unavailable";
/// How long an execution waits when neither the executor nor the command's rules say.
const DEFAULT_WAIT: Duration = Duration::from_secs(3600);

/// Why a waiting answer cannot be asked of anyone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unaskable(pub String);

/// Puts the approval `wait` asks for into `plan`'s step, once the plan has moved the delivery
/// of `command` to `target` to `waiting`: the approval, the approvers' and the requester's
/// messages, the evidence. `Unaskable` when it names no approvers and the command's policy has
/// none either.
pub async fn ask(
    (engine, policy): (&Engine, &Policy),
    command: &StoredCommand,
    (target, wait): (&str, &ApprovalWait),
    plan: &mut DeliveryPlan,
    now: OffsetDateTime,
) -> Result<Result<(), Unaskable>, EngineError> {
    let spec = policy.spec_of(command).await?;
    let rules: Vec<Need> = spec
        .iter()
        .flat_map(|spec| &spec.approvals)
        .filter_map(|rule| match &rule.outcome {
            RuleOutcome::Approval(need) => Some(need.clone()),
            RuleOutcome::Refuse => None,
        })
        .collect();
    let approvers: BTreeSet<String> = if wait.roles.is_empty() {
        rules.iter().flat_map(|need| need.approvers.iter().cloned()).collect()
    } else {
        wait.roles.iter().cloned().collect()
    };
    if approvers.is_empty() {
        let why = "the executor named no approvers' roles, and the command's policy names none";
        return Ok(Err(Unaskable(why.into())));
    }
    let within = wait.within_secs.map(Duration::from_secs);
    let within = within.or_else(|| rules.iter().map(|need| need.within).max()).unwrap_or(DEFAULT_WAIT);
    // Never past the command's TTL, which closes the delivery whatever it waits for.
    let left = command.envelope.expires_at.map(|at| Duration::try_from(at - now).unwrap_or_default());
    let within = left.map_or(within, |left| within.min(left));
    let quorum = wait.quorum.unwrap_or(1).max(1);
    let need = Need { approvers, quorum, within, escalation: None, step_up: false };
    let name = spec.as_ref().map(|s| s.name.clone());
    let name = command.reply_to.as_ref().and_then(|r| r.command.clone()).or(name).unwrap_or_else(|| "request".into());
    let asked_by = AskedBy::Executor { target: target.to_owned(), wait: wait.clone() };
    let rule = wait.message.clone().unwrap_or_else(|| wait.reason.clone());
    let opened = opening(command, (vec![(rule, need)], asked_by), &name, now);
    if let ApprovalWrite::Open(new) = &opened.write {
        // The approvers see the preview the requester confirmed, if there was one.
        let preview = engine.reads().preview_of(command.envelope.command_id).await?;
        plan.with.outbox.extend(asks(policy, (command, preview.as_ref()), &Asked::approvers(new), &name).await?);
    }
    let mut draft = started_evidence(command.envelope.command_id, EvidenceKind::ApprovalRequested);
    draft.decision = Some(json!({"approval": opened.decision, "target": target, "waiting": wait}));
    plan.with.evidence.push(draft);
    plan.with.outbox.extend(opened.notice);
    plan.with.approval = Some(opened.write);
    Ok(Ok(()))
}

/// Settles an executor's approval as `status` and moves its delivery: approved, back to
/// `delivered` with the grant on its way to the executor; otherwise closed, failing the command.
/// `false` when the delivery no longer waits, or the approval was settled meanwhile.
pub(super) async fn settle(
    (engine, policy): (&Engine, &Policy),
    settling: Settling<'_>,
    now: OffsetDateTime,
) -> Result<bool, EngineError> {
    let Settling { approval, status, by, evidence, consume } = settling;
    let AskedBy::Executor { target, wait } = &approval.asked_by else { return Ok(false) };
    let command = engine.command(&approval.tenant_id, approval.command_id).await?;
    let delivery = engine.store().deliveries().get(approval.command_id, target).await?;
    let Some(delivery) = delivery.filter(|d| d.state == DeliveryState::Waiting) else { return Ok(false) };
    let mut plan = DeliveryPlan::existing(&delivery);
    let settled = Decision::ApprovalSettled {
        approval_id: approval.id,
        status,
        by: by.as_deref().map(|by| engine.pseudonym(by)),
    };
    let mut draft = started_evidence(approval.command_id, EvidenceKind::ApprovalDecided);
    draft.decision = Some(settled.into());
    plan.with.evidence = evidence.into_iter().chain([draft]).collect();
    plan.with.consume = consume;
    if matches!(status, ApprovalStatus::Approved | ApprovalStatus::Overridden) {
        let grant = grant(engine, approval, (wait, status)).await?;
        let detail = json!({"approval_id": approval.id, "approvers": grant.approvers.len()});
        if plan.apply(DeliveryEvent::ApprovalGranted, Some(detail)).is_err() {
            return Ok(false);
        }
        let timeout = policy.known_spec_of(&command).map_or(Duration::from_secs(30), |spec| spec.timeout);
        plan.expect_execution_by(now + timeout);
        plan.with.outbox.push(DispatchOrder { target: target.clone(), resume: Some(grant) }.row());
    } else {
        let message = match (status, &by) {
            (ApprovalStatus::Denied, Some(_)) => "the approval was denied",
            _ => "the approval was not given in time",
        };
        let detail = json!({"code": APPROVAL_REJECTED, "message": message, "approval_id": approval.id,
            "status": status});
        if plan.apply(DeliveryEvent::ApprovalRejected, Some(detail)).is_err() {
            return Ok(false);
        }
        // The executor still holds the waiting execution: it is told, as of an operator's cancel
        // (where it takes such notices: `cancel_url`, `announce_cancel`).
        plan.with.outbox.extend(cancel_notices(std::slice::from_ref(target), approval.command_id, APPROVAL_REJECTED));
    }
    plan.with.approval = Some(ApprovalWrite::Settle { id: approval.id, status, by });
    conclude(engine, &command, target, plan, None, now).await
}

/// What the executor is told: who approved, when, where the evidence is.
async fn grant(
    engine: &Engine,
    approval: &StoredApproval,
    (wait, status): (&ApprovalWait, ApprovalStatus),
) -> Result<ApprovalGrant, EngineError> {
    let decisions = engine.store().approvals().decisions(approval.id).await?;
    let approvers = decisions
        .into_iter()
        .filter(|d| d.vote == Vote::Approve)
        .map(|d| GrantedBy {
            approver: d.approver,
            roles: d.roles.into_iter().collect(),
            decided_at: rfc3339(d.decided_at),
            via: d.via,
        })
        .collect();
    Ok(ApprovalGrant {
        approval_id: approval.id,
        decision: status.as_str().to_owned(),
        reason: wait.reason.clone(),
        approvers,
        evidence: format!("/v1/commands/{}/evidence", approval.command_id),
    })
}

/// Evidence of an approval while its command is `started`.
fn started_evidence(command_id: Uuid, kind: EvidenceKind) -> EvidenceDraft {
    let mut draft = EvidenceDraft::new(kind, command_id, TraceBindings::default());
    draft.stage = Some(State::Started);
    draft
}
