//! What became of one inbound message, as intake reports it to the channels (their answers to
//! providers, their counts) and to `chatgate_inbound_messages_total{outcome}`.

use uuid::Uuid;

use crate::domain::lifecycle::State;
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
    NotACommand { status: &'static str },
    /// A command was admitted, or the message repeated one (IDS replay / in progress).
    Command { command_id: Uuid, outcome: CommandOutcome },
    /// A different command under a taken key (only possible with caller-supplied keys).
    Conflict,
    /// An answer to a confirmation.
    Answer(AnswerOutcome),
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
            Admitted::Conflict { .. } => Self::Conflict,
            Admitted::Redelivered { .. } => Self::Redelivered,
        }
    }

    /// The `outcome` label of `chatgate_inbound_messages_total`.
    pub fn outcome(&self) -> &'static str {
        match self {
            Self::Redelivered => "redelivered",
            Self::Unroutable => "unroutable",
            Self::UnknownSender => "unknown_sender",
            Self::NotACommand { status } => status,
            Self::Command { outcome, .. } if outcome.is_duplicate() => "duplicate",
            Self::Command { .. } => "command",
            Self::Conflict => "conflict",
            Self::Answer(AnswerOutcome::Redelivered) => "redelivered",
            Self::Answer(_) => "answer",
            Self::RateLimited => "rate_limited",
            Self::AwaitingIdentity => "awaiting_identity",
        }
    }
}
