//! A message to a person as the outbox keeps it: typed and versioned, written in one place
//! (`OutboxMessage::to_payload`, from `store::ReplyTo`) and read in one place
//! (`OutboxMessage::from_payload`, by `service::replies::outgoing`), and what became of a send.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::command::Channel;

/// Where the replies of one conversation go. Its field names are those the stored addresses
/// (`commands.reply_to`) and outbox rows have always had.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyAddress {
    pub channel: Channel,
    /// Ours, as routing knows it: WhatsApp's `phone_number_id`, the business number.
    #[serde(rename = "phone_number_id")]
    pub business: String,
    /// Theirs, as routing knows it: a `wa_id`, a number, a source's user.
    #[serde(rename = "to")]
    pub person: String,
    /// The provider's id of the message answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<String>,
    #[serde(default = "fallback_locale")]
    pub locale: String,
    /// The provider's own addresses, when they are not the routing ones (Twilio's
    /// `whatsapp:+1...`).
    #[serde(flatten)]
    pub provider: Option<ProviderAddresses>,
    /// The sender system's own conversation id, handed back with every reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
}

/// A provider's own addresses for both ends (flattened: `from_address`, `to_address`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderAddresses {
    #[serde(rename = "from_address")]
    pub business: String,
    #[serde(rename = "to_address")]
    pub person: String,
}

fn fallback_locale() -> String {
    "en".into()
}

impl ReplyAddress {
    /// An address between routing ids alone, answering no message in particular.
    pub fn new(channel: Channel, business: &str, person: &str, locale: &str) -> Self {
        let (business, person, locale) = (business.to_owned(), person.to_owned(), locale.to_owned());
        Self { channel, business, person, in_reply_to: None, locale, provider: None, conversation: None }
    }

    /// The addresses a provider sends between: its own when it has them, else the routing ones.
    pub fn endpoints(&self) -> (&str, &str) {
        match &self.provider {
            Some(p) => (&p.business, &p.person),
            None => (&self.business, &self.person),
        }
    }
}

/// Why a message is sent: the reply to something the person did, or a confirmation prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    #[default]
    Reply,
    Prompt,
}

impl Purpose {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reply => "reply",
            Self::Prompt => "prompt",
        }
    }
}

/// A button offered with a message: the id the provider hands back when it is tapped, and the
/// template its title is rendered from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ButtonSpec {
    pub id: String,
    pub template: String,
}

/// A message to a person, rendered from `template` with `vars` when it leaves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    #[serde(flatten)]
    pub address: ReplyAddress,
    #[serde(default)]
    pub purpose: Purpose,
    pub template: String,
    #[serde(default = "no_vars")]
    pub vars: Value,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub buttons: Vec<ButtonSpec>,
}

fn no_vars() -> Value {
    Value::Object(serde_json::Map::new())
}

/// What an outbox row of kind `message` or `notice` holds, by version. Rows written before the
/// version was stored are version 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "version")]
pub enum OutboxMessage {
    #[serde(rename = "1")]
    V1(ChatMessage),
}

impl OutboxMessage {
    /// The row's payload: the one place a message is written.
    pub fn to_payload(&self) -> Value {
        // A struct of strings, enums and JSON values always serializes.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The one place a message is read; `Err` says what is wrong with the row.
    pub fn from_payload(payload: &Value) -> Result<Self, String> {
        use serde::Deserialize as _;
        // Read from the tree in place: no copy of it per message sent.
        let read = if payload.get("version").is_some() {
            Self::deserialize(payload)
        } else {
            ChatMessage::deserialize(payload).map(Self::V1)
        };
        read.map_err(|e| format!("the outbox message: {e}"))
    }

    pub fn message(&self) -> &ChatMessage {
        match self {
            Self::V1(message) => message,
        }
    }

    pub fn message_mut(&mut self) -> &mut ChatMessage {
        match self {
            Self::V1(message) => message,
        }
    }
}

/// What a channel's messages can hold: a reply is fitted to it when it is rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Characters of text, past which the text is cut (ending in "…").
    pub max_text_chars: usize,
    /// Buttons shown with a message; past it they are left out (a prompt's text always says how
    /// to answer by typing). 0: a channel without buttons.
    pub max_buttons: usize,
    /// Characters of a button's title.
    pub max_button_title_chars: usize,
}

impl Capabilities {
    /// `text` cut to `max` characters, the last of them "…" when anything was cut.
    pub fn cut(text: &str, max: usize) -> String {
        if text.chars().count() <= max {
            return text.to_owned();
        }
        let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// What became of one send: the evidence kind and its reason follow from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    /// Through the provider's API.
    Sent,
    /// In the answer to its own webhook (Twilio's TwiML).
    SentInline,
    /// Not sent: why, as a reason code (`provider_rejected`, `render_failed`, ...).
    Failed(String),
}

impl SendOutcome {
    /// A row that cannot be rendered (its template or variables are wrong): never tried again.
    pub fn unrendered() -> Self {
        Self::Failed("render_failed".into())
    }

    pub fn is_sent(&self) -> bool {
        matches!(self, Self::Sent | Self::SentInline)
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::Sent => "sent",
            Self::SentInline => "sent_inline",
            Self::Failed(reason) => reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn legacy_row() -> Value {
        json!({
            "channel": "twilio", "phone_number_id": "+14155238886", "to": "+15551234567",
            "in_reply_to": "SM1", "locale": "en", "from_address": "whatsapp:+14155238886",
            "to_address": "whatsapp:+15551234567", "purpose": "prompt", "template": "confirmation_prompt",
            "vars": {"code": "K7"}, "buttons": [{"id": "cg:yes:n", "template": "button_yes"}],
        })
    }

    #[test]
    fn a_row_written_before_the_version_reads_as_version_1_and_is_written_back_with_it() {
        let read = OutboxMessage::from_payload(&legacy_row()).expect("a version 1 row");
        let message = read.message();
        assert_eq!(message.purpose, Purpose::Prompt);
        assert_eq!(message.address.endpoints(), ("whatsapp:+14155238886", "whatsapp:+15551234567"));
        assert_eq!(message.buttons[0].template, "button_yes");
        let mut written = legacy_row();
        written["version"] = "1".into();
        assert_eq!(read.to_payload(), written, "the same fields, and the version");
        assert_eq!(OutboxMessage::from_payload(&written), Ok(read));
    }

    #[test]
    fn an_unknown_version_or_a_row_without_its_address_is_refused() {
        let mut future = legacy_row();
        future["version"] = "9".into();
        assert!(OutboxMessage::from_payload(&future).is_err());
        let mut missing = legacy_row();
        missing.as_object_mut().map(|m| m.remove("to"));
        assert!(OutboxMessage::from_payload(&missing).unwrap_err().contains("to"));
    }

    #[test]
    fn a_text_is_cut_only_past_its_limit_and_says_so() {
        assert_eq!(Capabilities::cut("héllo", 5), "héllo");
        assert_eq!(Capabilities::cut("héllo wörld", 6), "héllo…");
        assert_eq!(Capabilities::cut("abc", 0), "…", "nothing fits: the mark alone");
    }

    #[test]
    fn only_a_send_counts_as_sent() {
        assert!(SendOutcome::Sent.is_sent() && SendOutcome::SentInline.is_sent());
        let failed = SendOutcome::Failed("sent_nowhere".into());
        assert!(!failed.is_sent(), "a reason that starts like a send is still a failure");
    }
}
