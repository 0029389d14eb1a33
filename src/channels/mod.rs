//! Channels: one folder per provider with both directions — reading and verifying its webhooks
//! into channel-neutral messages, and its client for sending replies. Imports `domain`, `config`,
//! `store` and `service`.

pub mod body;
pub mod error;
pub mod hooks;
pub mod line;
pub mod messenger;
pub mod outbound;
pub mod slack;
pub mod standard;
pub mod telegram;
pub mod twilio;
pub mod whatsapp;

pub use error::{ChannelError, Refusal, WebhookOutcome, counted};

use axum::http::{HeaderMap, Uri};
use serde_json::Value;

use crate::channels::outbound::SenderFrom;
use crate::domain::command::ExternalId;
use crate::domain::message::InboundMessage;
use crate::domain::outbound::Capabilities;
use crate::service::intake::StoredMessages;

/// A request a provider posted, as every channel's webhook reads it: where to (Twilio signs the
/// URL), its headers (each channel reads its own signature header) and its body.
#[derive(Debug, Clone, Copy)]
pub struct Posted<'a> {
    pub uri: &'a Uri,
    pub headers: &'a HeaderMap,
    pub body: &'a [u8],
}

impl<'a> Posted<'a> {
    /// A header's value, as it came.
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        self.headers.get(name).map(|value| value.as_bytes())
    }
}

/// A channel as the rest of the gateway knows it. Adding a channel is its folder (webhook,
/// parser, client), its templates, and one line in [`CHANNELS`].
#[derive(Debug)]
pub struct ChannelEntry {
    /// The channel's name (`InboundMessage::channel`, the templates' folder, metrics' label).
    pub name: &'static str,
    /// What its replies can hold.
    pub capabilities: Capabilities,
    /// Reads one of its stored messages again (reprocessing); the conversation names the
    /// business address it went to.
    pub reread: fn(&Value, &ExternalId) -> Option<InboundMessage>,
    /// Its sender, from the configuration.
    pub sender: SenderFrom,
}

/// Every channel a person writes through and is answered on.
pub const CHANNELS: &[ChannelEntry] = &[
    whatsapp::ENTRY,
    twilio::ENTRY,
    standard::ENTRY,
    telegram::ENTRY,
    slack::ENTRY,
    messenger::MESSENGER_ENTRY,
    messenger::INSTAGRAM_ENTRY,
    line::ENTRY,
];

/// The channel named `name`, if there is one.
pub fn channel(name: &str) -> Option<&'static ChannelEntry> {
    CHANNELS.iter().find(|entry| entry.name == name)
}

/// Every name a webhook is counted under: the channels and the hook bridge (which takes no replies).
pub fn counted_names() -> impl Iterator<Item = &'static str> {
    CHANNELS.iter().map(|entry| entry.name).chain([hooks::CHANNEL])
}

/// What a reply on `name` can hold (`service::replies::outgoing::CapabilitiesOf`).
pub fn capabilities_of(name: &str) -> Option<Capabilities> {
    channel(name).map(|entry| entry.capabilities)
}

/// Reads each channel's stored messages again, for reprocessing.
#[derive(Debug, Clone, Copy, Default)]
pub struct StoredMessageReader;

impl StoredMessages for StoredMessageReader {
    fn reread(&self, name: &str, raw: &Value, conversation: &ExternalId) -> Option<InboundMessage> {
        (channel(name)?.reread)(raw, conversation)
    }
}
