//! Channels: one folder per provider with both directions — reading and verifying its webhooks
//! into channel-neutral messages, and its client for sending replies. Imports `domain`, `config`,
//! `store` and `service`.

pub mod error;
pub mod hooks;
pub mod standard;
pub mod twilio;
pub mod whatsapp;

pub use error::{ChannelError, Refusal, WebhookOutcome, counted};

use serde_json::Value;

use crate::domain::command::ExternalId;
use crate::domain::message::InboundMessage;
use crate::service::intake::StoredMessages;

/// Reads each channel's stored messages again, for reprocessing.
#[derive(Debug, Clone, Copy, Default)]
pub struct StoredMessageReader;

impl StoredMessages for StoredMessageReader {
    fn reread(&self, channel: &str, raw: &Value, conversation: &ExternalId) -> Option<InboundMessage> {
        match channel {
            "whatsapp" => {
                // The conversation names the business number the message went to.
                let to = conversation.as_str().split(':').nth(1).unwrap_or_default();
                whatsapp::payload::read_stored(raw, to).ok()
            }
            "twilio" => twilio::form::read(raw, None).ok(),
            "standard" => standard::reread(raw),
            _ => None,
        }
    }
}
