//! Approvals as the API and the console show them: what the request is, who asked, what each
//! rule needs, who decided what, and where it stands.

use serde::Serialize;
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::domain::command::TenantId;
use crate::domain::delivery::ApprovalWait;
use crate::domain::instants::rfc3339;
use crate::domain::registry::approvals::{self, Decided as Counted, Missing, Tally, Vote};
use crate::service::engine::Engine;
use crate::store::{ApprovalDecision, ApprovalStatus, AskedBy, StoreError, StoredApproval};

/// One approval.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ApprovalView {
    pub approval_id: Uuid,
    pub command_id: Uuid,
    /// `pending`, `approved`, `denied`, `expired`, `overridden` or `closed`.
    pub status: String,
    /// Who asked (the directory's id): never one of its approvers.
    pub requester: String,
    /// The request as it reads to a person ("refund 250.00 on order 1234").
    pub what: String,
    /// The policy's rules that apply, each of which must be satisfied.
    pub rules: Vec<RuleView>,
    pub decisions: Vec<DecisionView>,
    /// What a pending approval still waits for: per rule, how many more approvals, and the
    /// roles that may give them now (escalation included). Empty once settled.
    pub missing: Vec<MissingView>,
    /// RFC 3339.
    pub requested_at: String,
    /// When it is rejected if not approved by then (RFC 3339).
    pub expires_at: String,
    pub settled_at: Option<String>,
    /// Who denied it, when someone did.
    pub settled_by: Option<String>,
    /// Who asked for the approval: the command's policy, or its executor.
    pub asked_by: AskedByView,
}

/// Who asked for an approval.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(tag = "origin", rename_all = "snake_case")]
pub enum AskedByView {
    /// The command's policy: the command waits in `authz_pending`.
    Policy,
    /// The executor `target`: its execution waits (the delivery is `waiting`), for `wait`.
    Executor { target: String, wait: ApprovalWait },
}

/// What one rule needs.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RuleView {
    pub rule: String,
    /// The roles whose holders decide.
    pub approvers: Vec<String>,
    pub quorum: u32,
    pub within_seconds: u64,
    /// After `after_seconds`, the holders of `to` may decide too.
    pub escalation: Option<EscalationView>,
    pub step_up: bool,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EscalationView {
    pub after_seconds: u64,
    pub to: Vec<String>,
}

/// What one rule still needs.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MissingView {
    pub rule: String,
    pub approvals: u32,
    pub roles: Vec<String>,
}

impl From<Missing> for MissingView {
    fn from(missing: Missing) -> Self {
        Self { rule: missing.rule, approvals: missing.approvals, roles: missing.roles.into_iter().collect() }
    }
}

/// One person's decision.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DecisionView {
    pub approver: String,
    pub decision: Vote,
    /// `api`, or the channel they answered on.
    pub via: String,
    pub reason: Option<String>,
    pub decided_at: String,
}

impl ApprovalView {
    fn of(approval: StoredApproval, decisions: Vec<ApprovalDecision>, what: String, now: OffsetDateTime) -> Self {
        let missing = missing(&approval, &decisions, now);
        let rules = approval
            .needs
            .into_iter()
            .map(|(rule, need)| RuleView {
                rule,
                approvers: need.approvers.into_iter().collect(),
                quorum: need.quorum,
                within_seconds: need.within.as_secs(),
                escalation: need
                    .escalation
                    .map(|e| EscalationView { after_seconds: e.after.as_secs(), to: e.to.into_iter().collect() }),
                step_up: need.step_up,
            })
            .collect();
        let decisions = decisions
            .into_iter()
            .map(|d| DecisionView {
                approver: d.approver,
                decision: d.vote,
                via: d.via,
                reason: d.reason,
                decided_at: rfc3339(d.decided_at),
            })
            .collect();
        ApprovalView {
            approval_id: approval.id,
            command_id: approval.command_id,
            status: approval.status.as_str().to_owned(),
            requester: approval.requester,
            what,
            rules,
            decisions,
            missing,
            requested_at: rfc3339(approval.requested_at),
            expires_at: rfc3339(approval.expires_at),
            settled_at: approval.settled_at.map(rfc3339),
            settled_by: approval.settled_by,
            asked_by: match approval.asked_by {
                AskedBy::Policy => AskedByView::Policy,
                AskedBy::Executor { target, wait } => AskedByView::Executor { target, wait },
            },
        }
    }
}

/// One approval of the tenant, as shown.
pub async fn approval(engine: &Engine, tenant: &TenantId, id: Uuid) -> Result<Option<ApprovalView>, StoreError> {
    let Some(approval) = engine.store().approvals().get(tenant, id).await? else { return Ok(None) };
    Ok(Some(shown(engine, approval).await?))
}

/// The tenant's pending approvals, oldest first (at most `limit`).
pub async fn pending(engine: &Engine, tenant: &TenantId, limit: i64) -> Result<Vec<ApprovalView>, StoreError> {
    let mut views = vec![];
    for approval in engine.store().approvals().pending(tenant, limit).await? {
        views.push(shown(engine, approval).await?);
    }
    Ok(views)
}

/// The approval `command_id` waits (or waited) for last, as shown.
pub async fn of_command(
    engine: &Engine,
    tenant: &TenantId,
    command_id: Uuid,
) -> Result<Option<ApprovalView>, StoreError> {
    let Some(approval) = engine.store().approvals().of_command(tenant, command_id).await? else { return Ok(None) };
    Ok(Some(shown(engine, approval).await?))
}

/// What a pending approval still needs, as the tally says at `now` (nothing once settled).
pub fn missing(approval: &StoredApproval, decisions: &[ApprovalDecision], now: OffsetDateTime) -> Vec<MissingView> {
    if approval.status != ApprovalStatus::Pending {
        return vec![];
    }
    let counted: Vec<Counted> = decisions
        .iter()
        .map(|d| Counted { approver: d.approver.clone(), roles: d.roles.clone(), vote: d.vote })
        .collect();
    let waited = (now - approval.requested_at).try_into().unwrap_or_default();
    match approvals::tally(&approval.needs, &approval.requester, &counted, waited) {
        Tally::Waiting(missing) => missing.into_iter().map(MissingView::from).collect(),
        _ => vec![],
    }
}

async fn shown(engine: &Engine, approval: StoredApproval) -> Result<ApprovalView, StoreError> {
    let decisions = engine.store().approvals().decisions(approval.id).await?;
    let command = engine.store().commands().get(&approval.tenant_id, approval.command_id).await?;
    let what = command
        .map(|c| {
            let reads = c.reply_to.as_ref().and_then(|r| r.what.clone());
            reads.unwrap_or_else(|| format!("{} {}", c.envelope.intent.action, c.envelope.intent.entity))
        })
        .unwrap_or_default();
    Ok(ApprovalView::of(approval, decisions, what, OffsetDateTime::now_utc()))
}
