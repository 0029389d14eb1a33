//! Recovery commands (SMCL §VIII, RCP): first-class commands with `target_command_id`, their own
//! lifecycle and evidence that links both ways.
//!
//! - `cancel` stops a command that has not finished: the recovery command and the target's
//!   `cancel` move are written in one step.
//! - `retry` re-dispatches a failed command's intent as a new command with the same actor,
//!   arguments and therefore the same idempotency key (the executor sees the key it saw before;
//!   one that honours it does the work once). The failed command stays failed: SMCL never moves a
//!   failed command back into execution. The new command reserves no key (the failed one holds
//!   it), so a retry is refused while another retry of the same command is under way.

use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::CommandRequest;
use crate::domain::command::ExternalId;
use crate::domain::command::IdempotencyClass;
use crate::domain::command::Intent;
use crate::domain::command::Risk;
use crate::domain::command::TenantId;
use crate::domain::evidence::EvidenceDraft;
use crate::domain::evidence::decision::{Decision, Follows};
use crate::domain::lifecycle::CommandKind;
use crate::domain::lifecycle::EvidenceKind;
use crate::domain::lifecycle::State;
use crate::domain::lifecycle::recovery::RecoveryAction;
use crate::domain::lifecycle::recovery::allowed;
use crate::service::engine::Engine;
use crate::service::engine::EngineError;
use crate::service::intake::Ingress;
use crate::service::security::Policy;
use crate::service::security::Spec;
use crate::store::{Store, StoreError, StoredCommand};

mod actions;
pub mod bulk;

use actions::{cancel, compensate, reprocess, retry};

/// The scope that recovers commands: over the API, in the console and from the chat.
pub const WRITE_SCOPE: &str = "recovery:write";

#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    #[error("command not found")]
    NotFound,
    #[error("{action} is not allowed while the command is {state}")]
    NotAllowed { action: RecoveryAction, state: State, allowed: Vec<RecoveryAction> },
    #[error("{0}")]
    Conflict(String),
    /// The action is risky: a fresh step-up proof of the operator is needed (RFC 9470).
    #[error("{0}")]
    StepUpRequired(String),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl From<crate::store::StoreError> for RecoveryError {
    fn from(error: crate::store::StoreError) -> Self {
        Self::Engine(error.into())
    }
}

/// What a recovery did.
#[derive(Debug, Clone, PartialEq)]
pub struct Recovered {
    pub recovery_command_id: Uuid,
    pub state: State,
    pub target_state: State,
}

/// Who asked, and why.
#[derive(Debug, Clone)]
pub struct Operator<'a> {
    pub tenant: &'a TenantId,
    /// The token's issuer and subject.
    pub id: &'a str,
    /// The token's subject, whom a step-up proof must name.
    pub subject: &'a str,
    pub reason: &'a str,
    /// How the operator proved who they are, for actions on risky commands.
    pub step_up: StepUp<'a>,
}

/// The operator's proof of identity for a risky action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepUp<'a> {
    None,
    /// A step-up token (the API's `Step-Up` header), checked and used up here.
    Token(&'a str),
    /// Proved already for this very request: the chat command asking for the action went
    /// through its own single-use step-up before it was authorized.
    Proved,
}

/// The stored message a command came from (what reprocessing reads again), if any.
type SourceMessage = Option<(String, Value)>;

/// The recovery actions `target`'s state allows now (the status view shows them), with the
/// stored message it came from (what reprocessing reads again).
pub async fn allowed_actions(
    store: &Store,
    policy: &Policy,
    target: &StoredCommand,
) -> Result<(Vec<RecoveryAction>, SourceMessage), StoreError> {
    let message = store.inbound().message_of(target.envelope.command_id).await?;
    let compensable = policy.compensation_of(target).await?.is_some();
    let actions = allowed(target.lifecycle.state, compensable, message.is_some());
    Ok((actions, message))
}

/// Whether `action` may run on `target` now: its state allows it, and a high-risk command the
/// action would run has a proof of the operator coming (`proving`). The chat asks this before it
/// prompts for confirmation and `recover` when it runs, so both refuse alike. Returns the
/// target's stored message.
pub async fn admissible(
    store: &Store,
    policy: &Policy,
    target: &StoredCommand,
    action: RecoveryAction,
    proving: bool,
) -> Result<SourceMessage, RecoveryError> {
    let (actions, message) = allowed_actions(store, policy, target).await?;
    if !actions.contains(&action) {
        return Err(RecoveryError::NotAllowed { action, state: target.lifecycle.state, allowed: actions });
    }
    if !proving && needs_step_up(policy, target, action).await? {
        return Err(RecoveryError::StepUpRequired("this action on a high-risk command needs a step-up proof".into()));
    }
    Ok(message)
}

/// Whether what `action` would run is risky (the registry says `high`), so that the operator
/// proves it is them, once (the proof names them, the target and its key).
async fn needs_step_up(policy: &Policy, target: &StoredCommand, action: RecoveryAction) -> Result<bool, StoreError> {
    let runs = match action {
        RecoveryAction::Compensate => policy.compensation_of(target).await?,
        RecoveryAction::Retry | RecoveryAction::Reprocess => policy.spec_of(target).await?,
        RecoveryAction::Cancel => None,
    };
    Ok(runs.is_some_and(|spec| spec.risk == Risk::High))
}

pub async fn recover(
    ingress: &Ingress,
    engine: &Engine,
    policy: &Policy,
    operator: &Operator<'_>,
    target_id: Uuid,
    action: RecoveryAction,
    now: OffsetDateTime,
) -> Result<Recovered, RecoveryError> {
    let target = engine.store().commands().get(operator.tenant, target_id).await?.ok_or(RecoveryError::NotFound)?;
    let proving = operator.step_up != StepUp::None;
    let message = match admissible(engine.store(), policy, &target, action, proving).await {
        Err(RecoveryError::NotAllowed { action, state, allowed }) => {
            // A recovery the target's state does not allow is an invalid attempt (SMCL §XIII).
            let asked = json!({"attempted_recovery": action, "allowed": allowed, "by": operator.id});
            engine.record_refusal(&target, "recovery_not_allowed", asked, now).await?;
            return Err(RecoveryError::NotAllowed { action, state, allowed });
        }
        admitted => admitted?,
    };
    if let StepUp::Token(token) = operator.step_up
        && needs_step_up(policy, &target, action).await?
    {
        let proof = policy
            .security
            .stepup
            .verify_for(token, operator.subject, &target, now)
            .map_err(|e| RecoveryError::StepUpRequired(e.to_string()))?;
        let consumed = proof.consumed();
        if !engine.store().tokens().consume(&consumed, target_id, now).await? {
            return Err(RecoveryError::StepUpRequired("the step-up token was used before".into()));
        }
    }
    let recovering = Recovering { engine, operator, target: &target, now };
    match action {
        RecoveryAction::Cancel => cancel(&recovering).await,
        RecoveryAction::Retry => retry(&recovering, policy).await,
        RecoveryAction::Compensate => compensate(&recovering, policy).await,
        RecoveryAction::Reprocess => reprocess(&recovering, ingress, message).await,
    }
}

/// One recovery under way: who asks for it, of which command, as of when.
#[derive(Clone, Copy)]
pub(super) struct Recovering<'a> {
    pub engine: &'a Engine,
    pub operator: &'a Operator<'a>,
    pub target: &'a StoredCommand,
    pub now: OffsetDateTime,
}

pub(super) fn decision(action: RecoveryAction, operator: &Operator<'_>, target: &StoredCommand) -> Value {
    Decision::Recovery {
        recovery: action,
        by: operator.id.to_owned(),
        reason: operator.reason.to_owned(),
        target_command_id: target.envelope.command_id,
    }
    .into()
}

/// A command that follows `target` (its retry, its compensation): the same tenant, actor,
/// conversation and correlation, caused by the target and naming it, with the target's arguments.
pub(super) fn follow_up(
    target: &StoredCommand,
    intent: Intent,
    kind: CommandKind,
    idempotency_class: IdempotencyClass,
    risk: Risk,
    spec: Option<&Spec>,
) -> CommandRequest {
    let e = &target.envelope;
    // A command no registry entry describes (a hook call, a Standard Webhooks event) keeps the
    // lifetime it was given, and is deduplicated by its key alone.
    let own_ttl = e.expires_at.map(|at| (at - e.received_at).unsigned_abs());
    CommandRequest {
        tenant_id: e.tenant_id.clone(),
        actor_id: e.actor_id.clone(),
        channel: e.channel.clone(),
        conversation_id: e.conversation_id.clone(),
        message_ids: vec![],
        correlation_id: Some(e.correlation_id.clone()),
        causation_id: Some(ExternalId::from_uuid(e.command_id)),
        intent,
        args: e.args.clone(),
        command_kind: kind,
        idempotency_class,
        risk,
        supplied_key: None,
        ttl: spec.map(|s| s.ttl).or(own_ttl),
        dedupe_window: spec.map_or(std::time::Duration::ZERO, |s| s.dedupe_window),
        target_command_id: Some(e.command_id),
        // Its own entry's registry, else the target's.
        registry_version: spec.map(|s| s.registry_version().to_owned()).or_else(|| e.registry_version.clone()),
    }
}

/// Writes `recovery.requested` on the target, naming the recovery command that acts on it (the
/// recovery command's own evidence names the target), and answers with both states.
pub(super) async fn linked(
    recovering: &Recovering<'_>,
    follows: Follows,
    recovery_id: Uuid,
) -> Result<Recovered, RecoveryError> {
    let Recovering { engine, operator, target, now } = *recovering;
    let e = &target.envelope;
    let decision = Decision::RecoveryRequested {
        recovery: follows.action(),
        recovery_command_id: recovery_id,
        by: operator.id.to_owned(),
        reason: operator.reason.to_owned(),
        follows,
    };
    let link = EvidenceDraft::new(EvidenceKind::RecoveryRequested, e.command_id, engine.trace_for(e))
        .stage(target.lifecycle.state)
        .decision(decision.into());
    engine.store().evidence().record(e.tenant_id.as_str(), &[link], now).await?;
    status_of(engine, operator.tenant, recovery_id, e.command_id).await
}

pub(super) async fn status_of(
    engine: &Engine,
    tenant: &TenantId,
    recovery: Uuid,
    target: Uuid,
) -> Result<Recovered, RecoveryError> {
    let state = engine.command(tenant, recovery).await?.lifecycle.state;
    let target_state = engine.command(tenant, target).await?.lifecycle.state;
    Ok(Recovered { recovery_command_id: recovery, state, target_state })
}

/// An operator id as an actor id: letters, digits and a few separators; anything else becomes `-`.
pub(super) fn slug(raw: &str) -> String {
    raw.chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '-' })
        .take(100)
        .collect()
}
