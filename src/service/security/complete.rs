//! Completing a step-up: a valid, unused proof for a command waiting in `authz_pending` lets it
//! be authorized, and the proof's `jti` is used up in the same transaction as that move.

use serde_json::json;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::TenantId;
use crate::domain::evidence::decision::ProofRecord;
use crate::domain::evidence::{EvidenceDraft, TraceBindings};
use crate::domain::lifecycle::Event;
use crate::domain::lifecycle::EvidenceKind;
use crate::domain::lifecycle::State;
use crate::domain::replies::{Confirmed, Reply};
use crate::service::dispatch;
use crate::service::engine::Engine;
use crate::service::engine::EngineError;
use crate::service::engine::MoveContext;
use crate::service::security::StepUpError;
use crate::service::security::approval::{Asked, asks, opening};
use crate::service::security::authz::AuthzDecision;
use crate::service::security::{Authorization, Policy};
use crate::store::{ApprovalWrite, AskedBy, StepOutcome, StepWrite, StoredCommand};

#[derive(Debug, thiserror::Error)]
pub enum StepUpFailure {
    /// No such command in the caller's tenant (another tenant's looks the same).
    #[error("command not found")]
    NotFound,
    #[error(transparent)]
    Proof(#[from] StepUpError),
    #[error("the step-up token was used before")]
    Used,
    #[error("the command is not waiting for a step-up (it is {0})")]
    NotAwaiting(State),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl From<crate::store::StoreError> for StepUpFailure {
    fn from(error: crate::store::StoreError) -> Self {
        Self::Engine(error.into())
    }
}

/// Verifies `token` for the command and, if it holds, authorizes the command (or refuses it, if
/// the actor no longer has the scopes). Returns the state the command is in afterwards.
pub async fn complete_step_up(
    engine: &Engine,
    policy: &Policy,
    tenant: &TenantId,
    command_id: Uuid,
    token: &str,
    now: OffsetDateTime,
) -> Result<State, StepUpFailure> {
    let command = engine.store().commands().get(tenant, command_id).await?.ok_or(StepUpFailure::NotFound)?;
    let proof = policy.security.stepup.verify(token, &command, now)?;
    if engine.store().tokens().used(&proof.issuer, &proof.jti).await? {
        return Err(StepUpFailure::Used);
    }
    if command.lifecycle.state != State::AuthzPending {
        return Err(StepUpFailure::NotAwaiting(command.lifecycle.state));
    }
    let consume = proof.consumed();
    // Proved once already, and now waiting for other people's approval.
    if engine.store().approvals().of_command(tenant, command_id).await?.is_some() {
        return Err(StepUpFailure::NotAwaiting(command.lifecycle.state));
    }
    let standing = policy.standing_of(&command).await?;
    let authorization = policy.authorize(&command, standing, true).await?;
    let mut step = StepWrite { consume: Some(consume), ..StepWrite::new(tenant.clone(), Some(command_id), now) };
    match authorization {
        // Proved, and the policy asks other people too: it keeps waiting, now for them.
        Some(Authorization { decision: AuthzDecision::Approval { needs }, .. }) => {
            let name = command.asked_name();
            let opening = opening(&command, (needs, AskedBy::Policy), &name, now);
            let mut draft = EvidenceDraft::new(EvidenceKind::ApprovalRequested, command_id, TraceBindings::default());
            draft.stage = Some(State::AuthzPending);
            draft.decision = Some(json!({"approval": opening.decision, "step_up_proof": proof.evidence()}));
            step.evidence.push(draft);
            step.outbox.extend(opening.notice);
            if let ApprovalWrite::Open(opened) = &opening.write {
                let preview = engine.reads().preview_of(command_id).await?;
                let asked = (&command, preview.as_ref());
                step.outbox.extend(asks(policy, asked, &Asked::approvers(opened), &name).await?);
            }
            step.approval = Some(opening.write);
        }
        authorization => step.moves = decided_moves(engine, (&command, authorization), &proof.evidence(), now)?,
    }
    match engine.store().commands().commit_step(&step).await? {
        StepOutcome::Committed { .. } => {
            Ok(step.moves.last().map(|m| m.transition.to).unwrap_or(command.lifecycle.state))
        }
        StepOutcome::TokenUsed => Err(StepUpFailure::Used),
        // Moved meanwhile (another proof won, or an operator canceled it).
        StepOutcome::Stale | StepOutcome::Redelivered { .. } | StepOutcome::Locked { .. } => {
            let now_state = engine.command(tenant, command_id).await?.lifecycle.state;
            Err(StepUpFailure::NotAwaiting(now_state))
        }
    }
}

/// The decision with the proof in hand: allow (and tell the person), or deny.
fn decided_moves(
    engine: &Engine,
    (command, authorization): (&StoredCommand, Option<Authorization>),
    proof: &ProofRecord,
    now: OffsetDateTime,
) -> Result<Vec<crate::store::TransitionWrite>, StepUpFailure> {
    let name = command.asked_name();
    let (event, reason, mut decision, outbox, targets) = match authorization {
        Some(authorization) if authorization.decision == AuthzDecision::Allow => {
            let told = command.reply_to.iter().map(|r| {
                r.message(&Reply::Confirmed(Confirmed {
                    command: name.clone(),
                    what: None,
                    command_id: command.envelope.command_id,
                }))
            });
            let targets = Some(authorization.spec.targets.clone());
            (Event::Allow, None, authorization.evidence(), told.collect(), targets)
        }
        Some(authorization) => {
            let reason = authorization.decision.reason_code().unwrap_or("missing_scope");
            (Event::Deny, Some(reason), authorization.evidence(), vec![], None)
        }
        None => (Event::Deny, Some("unknown_command"), json!({"authz": "deny"}), vec![], None),
    };
    decision["step_up_proof"] = json!(proof);
    let context =
        MoveContext { reason_code: reason.map(str::to_owned), decision: Some(decision), outbox, reply_detail: None };
    // Allowed: started at once, with its dispatch row.
    let moves = std::iter::once((event, context)).chain(targets.as_deref().map(dispatch::start)).collect();
    engine.plan_moves(command, moves, now).map_err(|error| {
        StepUpFailure::Engine(EngineError::InvalidTransition {
            error,
            state: command.lifecycle.state,
            evidence_id: Uuid::nil(),
        })
    })
}
