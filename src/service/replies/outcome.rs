//! What the person hears when their command ends: one reply per terminal state, chosen here
//! and queued by the engine in the same transaction as the move, so it is sent once.

use serde_json::Value;
use uuid::Uuid;

use crate::domain::lifecycle::State;
use crate::domain::outbound::OutboxMessage;
use crate::domain::replies::{Outcome, OutcomeDetail, Progress, Rejection, RejectionReason, Reply};
use crate::store::{Admitted, DuplicateOf, NewOutboxMessage, ReplyTo};

/// The reason codes of a confirmation that ends its command.
pub const DECLINED: &str = "confirmation_declined";
pub const EXPIRED: &str = "confirmation_expired";

/// The reply for a command that reached `state`, or none (a non-terminal state, or
/// `compensated`, which follows an outcome already reported). `detail` is what the mover knows
/// (the executor's `result`, a refusal's `error`, the expired confirmation's `code`).
pub fn outcome_reply(
    reply_to: &ReplyTo,
    command_id: Uuid,
    state: State,
    reason_code: Option<&str>,
    detail: Option<&OutcomeDetail>,
) -> Option<NewOutboxMessage> {
    let reason = reason_code.unwrap_or(state.as_str());
    let template = match state {
        State::Executed => reply_to.executed_template.as_deref().unwrap_or("executed"),
        State::Failed => "failed",
        // A refusal that explains itself (an `error` with what is allowed instead, say) reads
        // the same whether it came before the confirmation or when the command ran.
        State::Rejected if matches!(detail, Some(OutcomeDetail::Error(_))) => "failed",
        State::Rejected => "rejected",
        State::Canceled if reason == DECLINED => "declined",
        State::Canceled if reason == EXPIRED => "expired",
        State::Canceled => "canceled",
        _ => return None,
    };
    let mut outcome = Outcome {
        template: template.to_owned(),
        command: reply_to.command.clone().unwrap_or_else(|| "request".into()),
        what: reply_to.what.clone().or_else(|| reply_to.command.clone()).unwrap_or_else(|| "request".into()),
        command_id,
        state,
        reason: reason.to_owned(),
        result: Value::Null,
        error: None,
        code: None,
    };
    match detail.cloned() {
        Some(OutcomeDetail::Result(result)) => outcome.result = result,
        Some(OutcomeDetail::Error(error)) => outcome.error = Some(error),
        Some(OutcomeDetail::Code(code)) => outcome.code = Some(code),
        None => {}
    }
    Some(reply_to.message(&Reply::Outcome(outcome)))
}

/// What a duplicate is told (IDS §IX): the outcome it repeats, or that it is under way. One still
/// waiting for its confirmation gets the same prompt again (same code, same buttons), never a
/// second confirmation.
pub fn duplicate_reply(
    reply_to: &ReplyTo,
    answer: &Admitted,
    prompt: Option<OutboxMessage>,
) -> Option<NewOutboxMessage> {
    let progress = |d: &DuplicateOf, done| Reply::Progress(Progress { done, command_id: d.command_id, state: d.state });
    match answer {
        Admitted::InProgress(d) if d.state == State::ConfirmationRequired && prompt.is_some() => {
            prompt.map(|prompt| reply_to.outbox(&prompt))
        }
        Admitted::Replayed(d) => Some(reply_to.message(&progress(d, true))),
        Admitted::InProgress(d) => Some(reply_to.message(&progress(d, false))),
        Admitted::Conflict { existing_command_id, .. } => {
            let conflict = Rejection {
                command_id: Some(*existing_command_id),
                ..Rejection::because(RejectionReason::IdempotencyConflict)
            };
            Some(reply_to.message(&Reply::Rejected(conflict)))
        }
        Admitted::New { .. } | Admitted::Redelivered { .. } | Admitted::Locked { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn address() -> ReplyTo {
        ReplyTo {
            destination: "whatsapp:1:2".into(),
            base: crate::domain::outbound::ReplyAddress::new(
                crate::domain::command::Channel::parse("whatsapp").expect("a channel"),
                "1",
                "2",
                "en",
            ),
            command: Some("refund".into()),
            what: Some("refund 25 on order 1234".into()),
            executed_template: None,
            hold: None,
        }
    }

    #[test]
    fn each_terminal_state_has_its_reply_and_the_others_none() {
        let id = Uuid::nil();
        let template = |state, reason| {
            outcome_reply(&address(), id, state, reason, None)
                .map(|m| m.payload["template"].as_str().map(str::to_owned))
        };
        assert_eq!(template(State::Executed, None), Some(Some("executed".into())));
        assert_eq!(template(State::Failed, Some("executor_error")), Some(Some("failed".into())));
        assert_eq!(template(State::Rejected, Some("missing_scope")), Some(Some("rejected".into())));
        assert_eq!(template(State::Canceled, Some(DECLINED)), Some(Some("declined".into())));
        assert_eq!(template(State::Canceled, Some(EXPIRED)), Some(Some("expired".into())));
        assert_eq!(template(State::Canceled, Some("ttl_expired")), Some(Some("canceled".into())));
        for state in State::ALL.iter().filter(|s| !s.is_terminal()) {
            assert_eq!(template(*state, None), None, "{state}");
        }
        assert_eq!(template(State::Compensated, None), None);
    }

    #[test]
    fn the_mover_adds_what_it_knows() {
        let result = OutcomeDetail::Result(json!({"refund_id": "R-9"}));
        let reply = outcome_reply(&address(), Uuid::nil(), State::Executed, None, Some(&result)).expect("reply");
        assert_eq!(reply.payload["vars"]["result"]["refund_id"], "R-9");
        assert_eq!(reply.payload["vars"]["command"], "refund");
        assert_eq!(reply.payload["to"], "2");
        let refusal = OutcomeDetail::Error(json!({"code": "not_allowed", "allowed": ["compensate"]}));
        let refused = outcome_reply(&address(), Uuid::nil(), State::Rejected, Some("not_allowed"), Some(&refusal));
        assert_eq!(refused.expect("reply").payload["template"], "failed", "explained like a refusal at execution");
    }
}
