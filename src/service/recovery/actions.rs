//! The recovery actions, each a command of its own that names its target: cancel, retry,
//! compensate and reprocess.

use serde_json::{Value, json};

use crate::domain::command::ActorId;
use crate::domain::command::Channel;
use crate::domain::command::CommandRequest;
use crate::domain::command::ExternalId;
use crate::domain::command::IdempotencyClass;
use crate::domain::command::Intent;
use crate::domain::command::Risk;
use crate::domain::evidence::decision::{Decision, Follows};
use crate::domain::lifecycle::CommandKind;
use crate::domain::lifecycle::Event;
use crate::domain::lifecycle::State;
use crate::domain::lifecycle::recovery::RecoveryAction;
use crate::domain::locks::Resource;
use crate::service::dispatch;
use crate::service::engine::Admission;
use crate::service::engine::MoveContext;
use crate::service::intake::Ingress;
use crate::service::intake::Reprocessed;
use crate::service::security::Policy;
use crate::store::{Admitted, StepOutcome, StepWrite, StoredCommand};

use super::{Operator, Recovered, Recovering, RecoveryError, decision, follow_up, linked, slug, status_of};

/// The operator's `cancel` as a command of its own, naming the target.
fn cancel_request(operator: &Operator<'_>, target: &StoredCommand) -> Result<CommandRequest, RecoveryError> {
    let e = &target.envelope;
    let invalid = |what: &str| RecoveryError::Conflict(format!("cannot build the recovery command: {what}"));
    Ok(CommandRequest {
        // The gateway's own cancel: no registry entry describes it.
        registry_version: None,
        tenant_id: e.tenant_id.clone(),
        actor_id: ActorId::parse(&format!("operator:{}", slug(operator.id))).map_err(|_| invalid("operator id"))?,
        channel: Channel::parse("api").map_err(|_| invalid("channel"))?,
        conversation_id: ExternalId::parse(&format!("api:{}", operator.id)).map_err(|_| invalid("conversation"))?,
        message_ids: vec![],
        correlation_id: Some(e.correlation_id.clone()),
        causation_id: Some(ExternalId::from_uuid(e.command_id)),
        intent: Intent::parse("command", "cancel", Some(&e.command_id.to_string())).map_err(|_| invalid("intent"))?,
        args: serde_json::from_value(json!({"reason": operator.reason})).unwrap_or_default(),
        command_kind: CommandKind::Mutation,
        idempotency_class: IdempotencyClass::I1,
        risk: Risk::Low,
        supplied_key: None,
        ttl: None,
        dedupe_window: std::time::Duration::from_secs(86_400),
        target_command_id: Some(e.command_id),
    })
}

pub(super) async fn cancel(recovering: &Recovering<'_>) -> Result<Recovered, RecoveryError> {
    let Recovering { engine, operator, target, now } = *recovering;
    let e = &target.envelope;
    let request = cancel_request(operator, target)?;
    let admission = Admission {
        then: dispatch::authorized_at_once(CommandKind::Mutation),
        decision: Some(decision(RecoveryAction::Cancel, operator, target)),
        ..Admission::default()
    };
    let recovery_id = match admit(recovering, (request, admission), "the recovery command").await? {
        FollowUp::New(command_id) => command_id,
        FollowUp::AskedBefore(recovered) => return Ok(recovered),
    };
    let recovery = engine.command(operator.tenant, recovery_id).await?;
    let (stop, done) = cancel_contexts(operator, e.command_id, recovery_id);
    let mut moves = engine.plan_moves(target, vec![(Event::Cancel, stop)], now).unwrap_or_default();
    moves.extend(engine.plan_moves(&recovery, vec![(Event::Succeed, done)], now).unwrap_or_default());
    // A started command may be with its executors: they are told, those that can be.
    let notices = if target.lifecycle.state == State::Started {
        let targets = engine.store().deliveries().dispatch_targets(e.command_id).await?;
        dispatch::cancel_notices(&targets, e.command_id, operator.reason)
    } else {
        vec![]
    };
    let step = StepWrite { moves, outbox: notices, ..StepWrite::new(e.tenant_id.clone(), Some(recovery_id), now) };
    if !matches!(engine.store().commands().commit_step(&step).await?, StepOutcome::Committed { .. }) {
        // The target moved on meanwhile (it finished): the recovery command says so.
        let failed = MoveContext { reason_code: Some("target_moved".into()), ..MoveContext::default() };
        let recovery = engine.command(operator.tenant, recovery_id).await?;
        let moves = engine.plan_moves(&recovery, vec![(Event::Fail, failed)], now).unwrap_or_default();
        engine
            .store()
            .commands()
            .commit_step(&StepWrite { moves, ..StepWrite::new(e.tenant_id.clone(), Some(recovery_id), now) })
            .await?;
    }
    status_of(engine, operator.tenant, recovery_id, e.command_id).await
}

/// What admitting a recovery's own command came to.
enum FollowUp {
    New(uuid::Uuid),
    /// The same recovery was asked for before: what it came to.
    AskedBefore(Recovered),
}

/// Admits a recovery's own command (`what` names it in a conflict).
async fn admit(
    recovering: &Recovering<'_>,
    (request, admission): (CommandRequest, Admission<'_>),
    what: &str,
) -> Result<FollowUp, RecoveryError> {
    let Recovering { engine, operator, target, now } = *recovering;
    match engine.accept_with(request, admission, now).await?.1 {
        Admitted::New { command_id, .. } => Ok(FollowUp::New(command_id)),
        Admitted::Replayed(d) | Admitted::InProgress(d) => {
            let recovered = status_of(engine, operator.tenant, d.command_id, target.envelope.command_id).await?;
            Ok(FollowUp::AskedBefore(recovered))
        }
        other => Err(RecoveryError::Conflict(format!("{what} was not created: {other:?}"))),
    }
}

/// The target's cancel, naming the recovery command, and the recovery command's success, naming
/// what it did to the target.
fn cancel_contexts(
    operator: &Operator<'_>,
    target_id: uuid::Uuid,
    recovery_id: uuid::Uuid,
) -> (MoveContext, MoveContext) {
    let by = operator.id.to_owned();
    let canceled_by = Decision::CanceledBy { recovery_command_id: recovery_id, by, reason: operator.reason.to_owned() };
    let stop = MoveContext {
        reason_code: Some("operator_canceled".into()),
        decision: Some(canceled_by.into()),
        ..MoveContext::default()
    };
    let recovered = Decision::Recovered { target_command_id: target_id, target_state: State::Canceled };
    (stop, MoveContext { decision: Some(recovered.into()), ..MoveContext::default() })
}

pub(super) async fn retry(recovering: &Recovering<'_>, policy: &Policy) -> Result<Recovered, RecoveryError> {
    let Recovering { engine, operator, target, now } = *recovering;
    let e = &target.envelope;
    // A registry command goes to the targets of the entry it was admitted under; one submitted for
    // an agent (the hook bridge, a Standard Webhooks source) to the agents it went to.
    let spec = policy.spec_of(target).await?;
    let targets = match &spec {
        Some(spec) => spec.targets.clone(),
        None => engine.store().deliveries().dispatch_targets(e.command_id).await?,
    };
    if targets.is_empty() {
        return Err(RecoveryError::Conflict("nothing says where this command goes any more".into()));
    }
    if engine.store().commands().open_recoveries(e.command_id).await? > 0 {
        return Err(RecoveryError::Conflict("a recovery of this command is under way".into()));
    }
    // The failed command holds the key; this one carries it to the executor unreserved.
    let mut request = follow_up(target, e.intent.clone(), e.command_kind, IdempotencyClass::I0, e.risk, spec.as_ref());
    request.message_ids = e.message_ids.clone();
    let admission = Admission {
        then: dispatch::authorized_at_once(e.command_kind),
        decision: Some(decision(RecoveryAction::Retry, operator, target)),
        outbox: dispatch::dispatch_rows(&targets),
        reply_to: target.reply_to.clone(),
        // A retry changes what the failed command would have: held as a new request would.
        lock: spec.as_ref().and_then(|spec| Resource::held_by(spec.lock, spec.kind, &request.intent)),
        ..Admission::default()
    };
    let (envelope, admitted) = engine.accept_with(request, admission, now).await?;
    let Admitted::New { command_id, .. } = admitted else {
        return Err(RecoveryError::Conflict(format!("the retry was not created: {admitted:?}")));
    };
    // The failed command's own record says a retry was made, and by whom.
    let follows = Follows::Retry { idempotency_key: envelope.idempotency_key };
    linked(recovering, follows, command_id).await
}

/// Runs the registry's compensation command for the target, with the target's arguments; the
/// target becomes `compensated` only when that command has executed (see `delivery::dispatch`).
pub(super) async fn compensate(recovering: &Recovering<'_>, policy: &Policy) -> Result<Recovered, RecoveryError> {
    let Recovering { operator, target, .. } = *recovering;
    let e = &target.envelope;
    let Some(spec) = policy.compensation_of(target).await? else {
        return Err(RecoveryError::Conflict("the registry declares no compensation for this command".into()));
    };
    let intent = Intent::parse(&spec.entity, &spec.action, e.intent.target.as_deref())
        .map_err(|_| RecoveryError::Conflict("cannot build the compensation's intent".into()))?;
    // Its own key: compensating the same command twice is one compensation.
    let request = follow_up(target, intent, spec.kind, spec.idempotency_class, spec.risk, Some(&spec));
    let admission = Admission {
        then: dispatch::authorized_at_once(spec.kind),
        decision: Some(decision(RecoveryAction::Compensate, operator, target)),
        outbox: dispatch::dispatch_rows(&spec.targets),
        lock: Resource::held_by(spec.lock, spec.kind, &request.intent),
        ..Admission::default()
    };
    let command_id = match admit(recovering, (request, admission), "the compensation").await? {
        FollowUp::New(command_id) => command_id,
        FollowUp::AskedBefore(recovered) => return Ok(recovered),
    };
    let follows = Follows::Compensation { command: spec.name.clone() };
    linked(recovering, follows, command_id).await
}

/// Interprets the target's stored message again (after a registry or directory fix, say) and
/// admits what it now means as a new command naming the target.
pub(super) async fn reprocess(
    recovering: &Recovering<'_>,
    ingress: &Ingress,
    message: Option<(String, Value)>,
) -> Result<Recovered, RecoveryError> {
    let Recovering { engine, target, now, .. } = *recovering;
    let e = &target.envelope;
    let Some((channel, raw)) = message else {
        return Err(RecoveryError::Conflict("the command did not come from a stored message".into()));
    };
    if engine.store().commands().open_recoveries(e.command_id).await? > 0 {
        return Err(RecoveryError::Conflict("a recovery of this command is under way".into()));
    }
    let Some(message) = ingress.reread(&channel, &raw, &e.conversation_id) else {
        return Err(RecoveryError::Conflict(format!("the stored {channel} message cannot be read again")));
    };
    match ingress.reprocess(target, &message, now).await? {
        Reprocessed::Command(command_id) => linked(recovering, Follows::Reprocess {}, command_id).await,
        Reprocessed::NotACommand(why) => Err(RecoveryError::Conflict(format!(
            "under the current registry the message starts no command ({})",
            why.as_str()
        ))),
    }
}
