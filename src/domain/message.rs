//! What every channel's message becomes before it is interpreted: one shape for all providers.

use std::time::Duration;

use serde_json::Value;

use crate::domain::command::Channel;

use crate::domain::command::ExternalId;

/// A message a person sent, as a channel adapter parsed it (and as the inbox keeps it until it
/// is admitted).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct InboundMessage {
    pub channel: Channel,
    /// The provider's id (`wamid...`, `SM...`): the transport dedupe key.
    pub provider_message_id: ExternalId,
    /// The business number it was sent to (WhatsApp `phone_number_id`): the routing key.
    pub to: String,
    /// The sender (WhatsApp `wa_id`, a phone number).
    pub from: String,
    pub sender_name: Option<String>,
    /// The provider's timestamp, seconds since the epoch.
    pub sent_at: Option<i64>,
    pub content: Content,
    /// The message this one answers (WhatsApp `context.id`).
    pub in_reply_to: Option<String>,
    /// The message as the provider sent it, kept for reprocessing.
    pub raw: Value,
    /// The provider's own addresses, between which replies travel, when they are not `to` and
    /// `from` (Twilio writes `whatsapp:+14155238886`; routing uses the bare numbers).
    pub addresses: Option<Addresses>,
    /// The provider waits for our HTTP answer, which can carry the replies queued while this
    /// message is handled (Twilio's TwiML): they are held this long for it before the outbox
    /// sends them the usual way.
    pub answered_inline: Option<Duration>,
}

/// Where replies go from and to, in the provider's own terms.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Addresses {
    /// Ours: the number the person wrote to.
    pub business: String,
    /// Theirs.
    pub person: String,
    /// The sender system's own conversation id (a Standard Webhooks source's), handed back with
    /// every reply.
    pub conversation: Option<String>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Content {
    Text(String),
    /// A tap on an interactive button or list row, or on a template's quick-reply button.
    Reply {
        id: String,
        title: String,
    },
    Reaction {
        emoji: String,
        to_message: String,
    },
    Media {
        kind: String,
        caption: Option<String>,
    },
    Location,
    Contacts,
    /// A type this gateway does not know (yet): stored and answered, never an error.
    Unsupported {
        kind: String,
    },
    /// Not written by the person to ask for something (a number or identity change, a deleted or
    /// edited message): stored, not answered.
    Notice {
        kind: String,
    },
    /// A message that cannot be read: the provider could not give its content (its `errors` say
    /// why), or a field it needs is missing or malformed (`reason`). Stored, not answered.
    Unreadable {
        kind: String,
        reason: String,
        errors: Option<Value>,
    },
}

/// Why a message started no command: its inbound row's status and its outcome as counted and
/// answered (`chatgate_inbound_messages_total{outcome}`, a Standard Webhooks source's answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoCommand {
    /// Asked for help: answered with what the person may write.
    Help,
    /// Read as nothing the registry knows: answered with the help.
    NoMatch,
    /// Read as more than one command.
    Ambiguous,
    /// A value broke its rule (a refund of -25).
    InvalidValue,
    /// An amount with two readings, asked back.
    TwoReadings,
    /// Close to a command: "did you mean …?".
    Suggested,
    /// "Don't refund 1234".
    Negated,
    /// Several commands in one message.
    Several,
    /// Not text (media, a location, a type not known yet): answered with the help.
    NotACommand,
    /// A reaction: stored, not answered.
    Reaction,
    /// Not written by the person to ask for something: stored, not answered.
    Notice,
    /// Its content could not be read: stored, not answered.
    Unreadable,
    /// Began or carried on a command written in turns: its next value asked for.
    AskedValue,
    /// Ended a command written in turns without sending it (cancelled, or answers missed).
    TurnsEnded,
    /// Courtesy alone (a thank-you, an emoji): answered in a few words.
    Courtesy,
    /// "link" from a listed person: answered with a one-time code for another channel.
    LinkCode,
    /// "link CODE" that linked its sender's address to the code's person.
    Linked,
    /// "link CODE" that linked nothing (a wrong code, too many tries, an address already listed).
    LinkRefused,
    /// "stop" after a link's notice: the link undone.
    Unlinked,
}

impl NoCommand {
    pub const ALL: [Self; 19] = [
        Self::Help,
        Self::NoMatch,
        Self::Ambiguous,
        Self::InvalidValue,
        Self::TwoReadings,
        Self::Suggested,
        Self::Negated,
        Self::Several,
        Self::NotACommand,
        Self::Reaction,
        Self::Notice,
        Self::Unreadable,
        Self::AskedValue,
        Self::TurnsEnded,
        Self::Courtesy,
        Self::LinkCode,
        Self::Linked,
        Self::LinkRefused,
        Self::Unlinked,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Help => "help",
            Self::NoMatch => "no_match",
            Self::Ambiguous => "ambiguous",
            Self::InvalidValue => "invalid_value",
            Self::TwoReadings => "two_readings",
            Self::Suggested => "suggested",
            Self::Negated => "negated",
            Self::Several => "several",
            Self::NotACommand => "not_a_command",
            Self::Reaction => "reaction",
            Self::Notice => "notice",
            Self::Unreadable => "unreadable",
            Self::AskedValue => "asked_value",
            Self::TurnsEnded => "turns_ended",
            Self::Courtesy => "courtesy",
            Self::LinkCode => "link_code",
            Self::Linked => "linked",
            Self::LinkRefused => "link_refused",
            Self::Unlinked => "unlinked",
        }
    }
}

/// What a message came to: the `outcome` label of `chatgate_inbound_messages_total`, and the
/// `outcome` of a Standard Webhooks `message` source's answer (a string there, as here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageOutcome {
    /// Stored in the inbox and admitted behind the answer, which did not wait for it.
    Accepted,
    /// Seen before: nothing new was written.
    Redelivered,
    Unroutable,
    UnknownSender,
    /// Stored as no command, and why.
    NoCommand(NoCommand),
    /// A new command.
    Command,
    /// A command repeated (replayed, or in progress).
    Duplicate,
    Conflict,
    /// An answer to a confirmation.
    Answer,
    RateLimited,
    AwaitingIdentity,
}

impl MessageOutcome {
    /// Every outcome `chatgate_inbound_messages_total` counts (all but `Accepted`, which only a
    /// webhook's answer says), each series present at 0 from the first scrape.
    pub fn counted() -> impl Iterator<Item = Self> {
        let stored = [
            Self::Command,
            Self::Duplicate,
            Self::Redelivered,
            Self::Unroutable,
            Self::UnknownSender,
            Self::AwaitingIdentity,
            Self::Answer,
            Self::Conflict,
            Self::RateLimited,
        ];
        stored.into_iter().chain(NoCommand::ALL.map(Self::NoCommand))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Redelivered => "redelivered",
            Self::Unroutable => "unroutable",
            Self::UnknownSender => "unknown_sender",
            Self::NoCommand(why) => why.as_str(),
            Self::Command => "command",
            Self::Duplicate => "duplicate",
            Self::Conflict => "conflict",
            Self::Answer => "answer",
            Self::RateLimited => "rate_limited",
            Self::AwaitingIdentity => "awaiting_identity",
        }
    }
}

impl serde::Serialize for MessageOutcome {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// What an inbound message's row says became of it: a fact the store keeps and the API and the
/// console show (`inbound_messages.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboundStatus {
    /// Stored with the command it asks for, before that command is admitted.
    Received,
    /// It started a command.
    Command,
    /// It repeated a command (replayed, or in progress).
    Duplicate,
    /// It answered a confirmation.
    Answer,
    /// Sent to a number no tenant owns.
    Unroutable,
    /// Over the rate limit of its sender or tenant: not acted on.
    RateLimited,
    /// From someone the tenant does not list: ignored, as its policy says (or handled as its role).
    IgnoredUnknownSender,
    /// From someone the tenant does not list: refused, with a reply when the budget allows.
    RefusedUnknownSender,
    /// It started no command, and why.
    NoCommand(NoCommand),
}

impl InboundStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Received => "received",
            Self::Command => "command",
            Self::Duplicate => "duplicate",
            Self::Answer => "answer",
            Self::Unroutable => "unroutable",
            Self::RateLimited => "rate_limited",
            Self::IgnoredUnknownSender => "ignored_unknown_sender",
            Self::RefusedUnknownSender => "refused_unknown_sender",
            Self::NoCommand(why) => why.as_str(),
        }
    }
}

impl Content {
    /// Why content that is stored and never answered starts no command, or `None`.
    pub fn unanswered(&self) -> Option<NoCommand> {
        match self {
            Self::Reaction { .. } => Some(NoCommand::Reaction),
            Self::Notice { .. } => Some(NoCommand::Notice),
            Self::Unreadable { .. } => Some(NoCommand::Unreadable),
            _ => None,
        }
    }

    /// Why the message cannot be read, when it cannot.
    pub fn unreadable_reason(&self) -> Option<&str> {
        match self {
            Self::Unreadable { reason, .. } => Some(reason),
            _ => None,
        }
    }

    /// A short name for logs and the inbound row's status.
    pub fn kind(&self) -> &str {
        match self {
            Self::Text(_) => "text",
            Self::Reply { .. } => "reply",
            Self::Reaction { .. } => "reaction",
            Self::Media { kind, .. }
            | Self::Unsupported { kind }
            | Self::Notice { kind }
            | Self::Unreadable { kind, .. } => kind,
            Self::Location => "location",
            Self::Contacts => "contacts",
        }
    }
}

/// A provider's report about a message we sent.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusUpdate {
    pub channel: Channel,
    pub provider_message_id: String,
    /// What the channel's own word means here; `None` for a step this gateway does not track
    /// (Twilio's `queued`, `sending`, ...).
    pub status: Option<DeliveryStatus>,
    /// The provider's own word for it.
    pub reported: String,
    pub recipient: Option<String>,
    pub errors: Option<Value>,
}

/// How far a sent message got, whatever the channel calls it (each channel maps its own words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryStatus {
    Sent,
    Delivered,
    Read,
    Failed,
}

impl DeliveryStatus {
    /// The words most providers share (`sent`, `delivered`, `read`, `failed`).
    pub fn parse(raw: &str) -> Option<Self> {
        Some(match raw {
            "sent" => Self::Sent,
            "delivered" => Self::Delivered,
            "read" => Self::Read,
            "failed" => Self::Failed,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sent => "sent",
            Self::Delivered => "delivered",
            Self::Read => "read",
            Self::Failed => "failed",
        }
    }

    /// Order of progress; `failed` ends it.
    pub fn rank(self) -> i64 {
        match self {
            Self::Sent => 1,
            Self::Delivered => 2,
            Self::Read => 3,
            Self::Failed => 4,
        }
    }
}

#[cfg(test)]
mod outcome_tests {
    use super::MessageOutcome;

    #[test]
    fn every_counted_outcome_has_a_name_of_its_own_and_accepted_is_not_counted() {
        let names: std::collections::BTreeSet<&str> = MessageOutcome::counted().map(MessageOutcome::as_str).collect();
        assert_eq!(names.len(), MessageOutcome::counted().count());
        assert!(!names.contains(MessageOutcome::Accepted.as_str()));
        assert!(names.iter().all(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '_')), "{names:?}");
    }
}
