//! Previews (issue #47), the service's part: a mutation whose registry entry says `preview` is
//! admitted to `canonicalized` with a preview request beside it (an outbox row for its executor,
//! in the admission's transaction), and the dispatcher's answer moves it on here, in one step:
//! asked to confirm with the preview in its prompt (the confirmation and the preview bound by its
//! digest), asked without one and told so (`optional`, when none came), or refused
//! (`canonicalized → authz_pending → rejected`) when its executor refused it or a `required`
//! preview did not come.

use serde_json::json;
use time::OffsetDateTime;

use crate::domain::command::{CommandRequest, ExternalId, IdempotencyKey};
use crate::domain::evidence::decision::{ConfirmationStep, Decision, PreviewStep};
use crate::domain::lifecycle::{Event, InvalidTransition, State};
use crate::domain::locks::Resource;
use crate::domain::preview::{BoundPreview, PreviewAnswer, PreviewFault, PreviewRule};
use crate::domain::replies::OutcomeDetail;
use crate::service::confirmations::confirm::{self, PromptFor};
use crate::service::dispatch::preview_request;
use crate::service::engine::{Admission, Engine, EngineError, MoveContext};
use crate::service::security::Spec;
use crate::store::{OutboxSettle, PromptWrite, ReplyTo, StepWrite, StoredCommand, TransitionWrite};

/// Why a command was refused at its preview by its executor.
pub const PREVIEW_REFUSED: &str = "preview_refused";

/// `failed`'s request admitted anew, as a command of its own that names it (its causation) and
/// waits for a fresh preview. Its key is derived from the failed command's id, so a row claimed
/// again after a crash admits it once.
pub async fn ask_again(
    engine: &Engine,
    spec: &Spec,
    failed: &StoredCommand,
    now: OffsetDateTime,
) -> Result<(), EngineError> {
    let e = &failed.envelope;
    let key = format!("stale-preview-{}", e.command_id.simple());
    let asked = CommandRequest {
        tenant_id: e.tenant_id.clone(),
        actor_id: e.actor_id.clone(),
        channel: e.channel.clone(),
        conversation_id: e.conversation_id.clone(),
        message_ids: e.message_ids.clone(),
        correlation_id: Some(e.correlation_id.clone()),
        causation_id: Some(ExternalId::from_uuid(e.command_id)),
        intent: e.intent.clone(),
        args: e.args.clone(),
        command_kind: e.command_kind,
        idempotency_class: e.idempotency_class,
        risk: e.risk,
        supplied_key: IdempotencyKey::parse(&key).ok(),
        ttl: Some(spec.ttl),
        dedupe_window: spec.dedupe_window,
        target_command_id: None,
        registry_version: Some(spec.registry_version().to_owned()),
    };
    let admission = Admission {
        outbox: vec![preview_request(&spec.executor)],
        reply_to: failed.reply_to.clone(),
        lock: Resource::held_by(spec.lock, spec.kind, &e.intent),
        ..Admission::default()
    };
    engine.accept_with(asked, admission, now).await?;
    Ok(())
}

/// What a preview's outcome leads to, as the command's rule reads it.
#[derive(Debug, Clone, PartialEq)]
enum Next {
    Prompt(Option<BoundPreview>),
    Stop { step: PreviewStep, code: String, message: String },
}

fn next(rule: PreviewRule, outcome: Result<PreviewAnswer, PreviewFault>) -> Next {
    match outcome {
        Ok(PreviewAnswer::Shown(preview)) => Next::Prompt(Some(preview.into())),
        Ok(PreviewAnswer::Refused(refusal)) => {
            let message = if refusal.message.is_empty() { refusal.code.clone() } else { refusal.message };
            Next::Stop { step: PreviewStep::Refused, code: refusal.code, message }
        }
        Err(_) if rule == PreviewRule::Optional => Next::Prompt(None),
        Err(fault) => {
            Next::Stop { step: PreviewStep::Failed, code: fault.code().into(), message: fault.detail().into() }
        }
    }
}

/// Moves `command` on after its preview (`outcome`), settling the request's outbox row `row` (if
/// the answer came with it: a bus agent's comes on its own) in the same step. A command no longer
/// waiting for its preview (the row was answered before, or an operator ended the command) only
/// has the row settled.
pub async fn settle(
    engine: &Engine,
    spec: Option<&Spec>,
    command: &StoredCommand,
    outcome: Result<PreviewAnswer, PreviewFault>,
    row: Option<OutboxSettle>,
    now: OffsetDateTime,
) -> Result<(), EngineError> {
    let (tenant, command_id) = (command.envelope.tenant_id.clone(), command.envelope.command_id);
    let mut step = StepWrite { outbox_row: row, ..StepWrite::new(tenant, Some(command_id), now) };
    if command.lifecycle.state == State::Canonicalized {
        if let Some(fault) = outcome.as_ref().err() {
            tracing::info!(command = %command_id, code = fault.code(), detail = fault.detail(), "no preview");
        }
        let rule = spec.map_or(PreviewRule::Required, |spec| spec.preview);
        let planned = match (next(rule, outcome), spec, &command.reply_to) {
            (Next::Prompt(preview), Some(spec), Some(reply_to)) => {
                let shown = preview.map_or(Shown::Missing, Shown::Preview);
                prompt(engine, (spec, reply_to), command, shown, &mut step, now)
            }
            (Next::Stop { step: stopped, code, message }, _, _) => stop(engine, command, stopped, code, message, now),
            // No registry entry or no one to ask any more: nobody confirms it.
            (Next::Prompt(_), _, _) => {
                let message = "the command can no longer be prompted".to_owned();
                stop(engine, command, PreviewStep::Failed, "preview_unavailable".into(), message, now)
            }
        };
        step.moves = planned.map_err(EngineError::InvalidPlan)?;
    }
    let outcome = engine.database().handover().commit_step(&step).await?;
    metrics::counter!("chatgate_previews_total", "outcome" => preview_label(&step)).increment(1);
    tracing::debug!(command = %command_id, ?outcome, "preview settled");
    Ok(())
}

/// What a prompt shows of a preview: the executor's, a note that none came, or nothing (none was
/// asked for: a command whose turn came after a lock).
pub(crate) enum Shown {
    Preview(BoundPreview),
    Missing,
    NotAsked,
}

/// The prompt on `preview` (or without one): the confirmation and its preview go in `step`.
pub(crate) fn prompt(
    engine: &Engine,
    (spec, reply_to): (&Spec, &ReplyTo),
    command: &StoredCommand,
    shown: Shown,
    step: &mut StepWrite,
    now: OffsetDateTime,
) -> Result<Vec<TransitionWrite>, InvalidTransition> {
    let envelope = &command.envelope;
    let (preview, step_of) = match shown {
        Shown::Preview(bound) => (Some(bound), Some(PreviewStep::Shown)),
        Shown::Missing => (None, Some(PreviewStep::Missing)),
        Shown::NotAsked => (None, None),
    };
    let asked = PromptFor {
        command: spec.name.clone(),
        what: reply_to.what.clone().unwrap_or_else(|| spec.reads(&envelope.args)),
        usage: spec.usage(),
        args: serde_json::to_value(&envelope.args).unwrap_or_default(),
        step_up: spec.step_up,
        preview: preview.as_ref().map(|bound| bound.preview.clone()),
        preview_missing: step_of == Some(PreviewStep::Missing),
    };
    let confirmation = confirm::prompt(reply_to, asked, spec.confirmation_ttl, now);
    let decision = Decision::ConfirmationRequested {
        confirmation: ConfirmationStep::Requested,
        code: confirmation.code.clone(),
        expires_at: confirmation.expires_at.unix_timestamp(),
        preview: step_of,
        preview_digest: preview.as_ref().map(|bound| bound.digest.clone()),
    };
    let outbox = vec![confirm::prompt_message(reply_to, &confirmation)];
    let context = MoveContext { decision: Some(decision.into()), outbox, ..MoveContext::default() };
    let moves = engine.plan_moves(command, vec![(Event::RequestConfirmation, context)], now)?;
    let (key, actor) = (envelope.idempotency_key.clone(), envelope.actor_id.clone());
    step.prompt = Some(PromptWrite { confirmation, key, actor, preview });
    Ok(moves)
}

/// Refused at the preview: `canonicalized → authz_pending → rejected`, the person told why.
fn stop(
    engine: &Engine,
    command: &StoredCommand,
    step: PreviewStep,
    code: String,
    message: String,
    now: OffsetDateTime,
) -> Result<Vec<TransitionWrite>, InvalidTransition> {
    let reason = if step == PreviewStep::Refused { PREVIEW_REFUSED.to_owned() } else { code.clone() };
    let decision = Decision::PreviewStopped { preview: step, code: code.clone(), message: message.clone() };
    let submit = MoveContext { decision: Some(decision.into()), ..MoveContext::default() };
    let deny = MoveContext {
        reason_code: Some(reason),
        reply_detail: Some(OutcomeDetail::Error(json!({"code": code, "message": message}))),
        ..MoveContext::default()
    };
    engine.plan_moves(command, vec![(Event::SubmitForAuthorization, submit), (Event::Deny, deny)], now)
}

fn preview_label(step: &StepWrite) -> &'static str {
    match (&step.prompt, step.moves.last().map(|m| m.transition.to)) {
        (Some(PromptWrite { preview: Some(_), .. }), _) => "shown",
        (Some(_), _) => "missing",
        (None, Some(State::Rejected)) => "stopped",
        _ => "settled",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::preview::{Preview, PreviewRefusal};

    #[test]
    fn a_failed_preview_prompts_without_one_or_stops_as_the_rule_says() {
        let fault = || Err(PreviewFault::Unavailable("no answer in time".into()));
        assert_eq!(next(PreviewRule::Optional, fault()), Next::Prompt(None));
        assert!(matches!(next(PreviewRule::Required, fault()), Next::Stop { step: PreviewStep::Failed, code, .. }
            if code == "preview_unavailable"));
        let shown = Preview { summary: "Order 1234".into(), fields: Default::default() };
        let digest = shown.digest();
        assert!(matches!(next(PreviewRule::Required, Ok(PreviewAnswer::Shown(shown))),
            Next::Prompt(Some(bound)) if bound.digest == digest));
        let refusal = PreviewRefusal { code: "refund_exceeds_balance".into(), message: String::new() };
        assert!(matches!(next(PreviewRule::Optional, Ok(PreviewAnswer::Refused(refusal))),
            Next::Stop { step: PreviewStep::Refused, message, .. } if message == "refund_exceeds_balance"));
    }
}
