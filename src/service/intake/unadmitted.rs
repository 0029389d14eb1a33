//! What a message that reads as no command is answered: why, in the person's language, and what
//! they could write instead — one place for every reading that is not a command (help, a value
//! that breaks its rule, an amount asked back, "did you mean …?", a negation, two at once).

use serde_json::json;

use crate::domain::message::NoCommand;
use crate::domain::outbound::OutboxMessage;
use crate::domain::registry::{ACCEPT_PREFIX, Interpretation};
use crate::domain::replies::{Courtesy, Help, Rejection, RejectionReason, Reply, Suggestion};
use crate::store::{NewOutboxMessage, ReplyTo, Store, StoreError};

/// Why a reading is no command, and its reply.
pub(super) fn answer(
    interpretation: &Interpretation<'_>,
    reply_to: &ReplyTo,
    commands: impl FnOnce() -> Vec<String>,
) -> (NoCommand, NewOutboxMessage) {
    let rejected = |rejection| reply_to.message(&Reply::Rejected(rejection));
    let help = |help: Vec<String>| reply_to.message(&Reply::Help(Help { commands: help, unsupported: None }));
    match interpretation {
        Interpretation::BrokenRule { spec, broken } => {
            let rejection = Rejection {
                value: Some(broken.value.clone()),
                rule: Some(broken.rule.as_str().to_owned()),
                limit: Some(broken.limit.clone()),
                usage: Some(spec.usage()),
                ..Rejection::because(RejectionReason::InvalidValue)
            };
            (NoCommand::InvalidValue, rejected(rejection))
        }
        Interpretation::TwoReadings { spec, value, readings: (ours, other) } => {
            let rejection = Rejection {
                value: Some(value.to_string()),
                readings: Some(vec![ours.to_string(), other.to_string()]),
                usage: Some(spec.usage()),
                ..Rejection::because(RejectionReason::TwoReadings)
            };
            (NoCommand::TwoReadings, rejected(rejection))
        }
        Interpretation::DidYouMean { spec, accept } => {
            (NoCommand::Suggested, suggestion(reply_to, spec.usage(), accept))
        }
        Interpretation::Negated(_) => (NoCommand::Negated, rejected(Rejection::because(RejectionReason::Negated))),
        Interpretation::Several => (NoCommand::Several, rejected(Rejection::because(RejectionReason::Several))),
        Interpretation::Ambiguous(specs) => {
            let candidates: Vec<String> = specs.iter().map(|s| s.usage()).collect();
            (
                NoCommand::Ambiguous,
                rejected(Rejection { candidates: Some(candidates), ..Rejection::because(RejectionReason::Ambiguous) }),
            )
        }
        Interpretation::Help => (NoCommand::Help, help(commands())),
        Interpretation::Courtesy => (NoCommand::Courtesy, reply_to.message(&Reply::Courtesy(Courtesy {}))),
        Interpretation::NoMatch | Interpretation::Command { .. } => (NoCommand::NoMatch, help(commands())),
    }
}

/// "Did you mean …?": with the whole command, a button that sends it (read again exactly, so
/// a mutation still asks for its confirmation); without, the command's usage.
fn suggestion(reply_to: &ReplyTo, usage: String, accept: &Option<String>) -> NewOutboxMessage {
    let mut message = reply_to.message(&Reply::Suggestion(Suggestion { usage, suggestion: accept.clone() }));
    if let (Some(text), Some(map)) = (accept, message.payload.as_object_mut()) {
        let id = format!("{ACCEPT_PREFIX}{text}");
        map.insert("buttons".into(), json!([{"id": id, "template": "button_accept"}]));
    }
    message
}

/// A bare "1" that answers a suggestion — the last message to its sender offered one — is that
/// suggestion's button id, as if tapped: the numbered choice of channels without buttons (SMS).
/// Only a suggestion is answered so (a confirmation's buttons are never a number: "1" is no "yes").
pub(super) async fn suggestion_chosen(
    store: &Store,
    text: &str,
    reply_to: &ReplyTo,
) -> Result<Option<String>, StoreError> {
    if text.trim().trim_end_matches(['.', '!']) != "1" {
        return Ok(None);
    }
    let last = store.outbox().last_message_to(&reply_to.destination).await?;
    let last = last.and_then(|payload| OutboxMessage::from_payload(&payload).ok());
    let id = last.as_ref().and_then(|m| m.message().buttons.first()).map(|b| b.id.as_str());
    Ok(id.filter(|id| id.starts_with(ACCEPT_PREFIX)).map(str::to_owned))
}
