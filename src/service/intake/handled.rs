//! What became of one inbound message, as intake reports it to the channels (their answers to
//! providers, their counts) and to `chatgate_inbound_messages_total{outcome}`.

use uuid::Uuid;

use crate::domain::lifecycle::State;
use crate::domain::message::{MessageOutcome, NoCommand};
use crate::service::confirmations::answers::AnswerOutcome;
use crate::store::Admitted;

/// What became of one inbound message.
#[derive(Debug, Clone, PartialEq)]
pub enum Handled {
    /// Seen before (a redelivered webhook): nothing new was written.
    Redelivered,
    /// Sent to a number no tenant owns: stored as unroutable.
    Unroutable,
    /// From someone the tenant does not list: refused (with a reply) or ignored, per policy.
    UnknownSender,
    /// Not a command (help, no match, ambiguous, media, reactions): stored, answered when useful.
    NotACommand { status: NoCommand },
    /// A command was admitted, or the message repeated one (IDS replay / in progress).
    Command { command_id: Uuid, outcome: CommandOutcome },
    /// A different command under a taken key (only possible with caller-supplied keys).
    Conflict,
    /// An answer to a confirmation.
    Answer(AnswerOutcome),
    /// An approver's decision on an approval request, and what it came to.
    ApprovalDecision(crate::domain::replies::ApprovalOutcome),
    /// Over the actor's or the tenant's rate limit: stored, not acted on.
    RateLimited,
    /// From someone the directory does not list: kept until the tenant's identity resolver says
    /// who they are, then handled.
    AwaitingIdentity,
}

/// What a message that names a command came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandOutcome {
    /// A new command, in the state its first moves left it.
    Admitted(State),
    /// The same command again after it ended: its outcome is replayed (IDS).
    Replayed,
    /// The same command again while it runs: "in progress" (IDS).
    InProgress,
}

impl CommandOutcome {
    pub fn is_duplicate(self) -> bool {
        !matches!(self, Self::Admitted(_))
    }
}

impl Handled {
    /// The message was seen before (a redelivered webhook, or a repeated answer): nothing new.
    pub fn is_redelivery(&self) -> bool {
        matches!(self, Self::Redelivered | Self::Answer(AnswerOutcome::Redelivered))
    }

    /// What admitting a message's command came to.
    pub(super) fn admitted(admitted: Admitted) -> Self {
        match admitted {
            Admitted::New { command_id, lifecycle, .. } => {
                Self::Command { command_id, outcome: CommandOutcome::Admitted(lifecycle.state) }
            }
            Admitted::Replayed(d) => Self::Command { command_id: d.command_id, outcome: CommandOutcome::Replayed },
            Admitted::InProgress(d) => Self::Command { command_id: d.command_id, outcome: CommandOutcome::InProgress },
            // The engine decides a locked admission again (refused, told which request holds it).
            Admitted::Conflict { .. } | Admitted::Locked { .. } => Self::Conflict,
            Admitted::Redelivered { .. } => Self::Redelivered,
        }
    }

    /// What the message came to, as counted and answered.
    pub fn outcome(&self) -> MessageOutcome {
        match self {
            Self::Redelivered | Self::Answer(AnswerOutcome::Redelivered) => MessageOutcome::Redelivered,
            Self::Unroutable => MessageOutcome::Unroutable,
            Self::UnknownSender => MessageOutcome::UnknownSender,
            Self::NotACommand { status } => MessageOutcome::NoCommand(*status),
            Self::Command { outcome, .. } if outcome.is_duplicate() => MessageOutcome::Duplicate,
            Self::Command { .. } => MessageOutcome::Command,
            Self::Conflict => MessageOutcome::Conflict,
            Self::Answer(_) | Self::ApprovalDecision(_) => MessageOutcome::Answer,
            Self::RateLimited => MessageOutcome::RateLimited,
            Self::AwaitingIdentity => MessageOutcome::AwaitingIdentity,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The labels are an interface (the metric's `outcome`, the Standard Webhooks answer): each
    /// outcome keeps the name the docs give it, and the answer says it as a plain string.
    #[test]
    fn each_outcome_keeps_its_documented_name() {
        let id = Uuid::nil();
        let cases = [
            (Handled::Redelivered, "redelivered"),
            (Handled::Answer(AnswerOutcome::Redelivered), "redelivered"),
            (Handled::NotACommand { status: NoCommand::TwoReadings }, "two_readings"),
            (Handled::NotACommand { status: NoCommand::NotACommand }, "not_a_command"),
            (Handled::Command { command_id: id, outcome: CommandOutcome::Replayed }, "duplicate"),
            (Handled::Command { command_id: id, outcome: CommandOutcome::Admitted(State::Received) }, "command"),
            (Handled::RateLimited, "rate_limited"),
            (Handled::AwaitingIdentity, "awaiting_identity"),
        ];
        for (handled, name) in cases {
            assert_eq!(handled.outcome().as_str(), name, "{handled:?}");
            assert_eq!(serde_json::to_value(handled.outcome()).expect("json"), serde_json::json!(name));
        }
        assert_eq!(serde_json::to_value(MessageOutcome::Accepted).expect("json"), serde_json::json!("accepted"));
    }
}
