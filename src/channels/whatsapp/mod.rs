//! WhatsApp Cloud API, both directions: Meta's webhook (handshake, signature, payload) in, the
//! Graph API client out, and the simulator that signs deliveries as Meta does.

pub mod client;
pub mod payload;
pub mod signature;
pub mod simulate;
pub mod webhook;

use serde_json::Value;

use crate::channels::ChannelEntry;
use crate::domain::command::ExternalId;
use crate::domain::message::InboundMessage;
use crate::domain::outbound::Capabilities;

/// WhatsApp in the gateway's list of channels (`channels::CHANNELS`).
pub const ENTRY: ChannelEntry = ChannelEntry {
    name: "whatsapp",
    // Reply buttons: three at most, titles of 20 characters (the Cloud API's limits).
    capabilities: Capabilities {
        max_text_chars: client::TEXT_BODY_MAX,
        max_buttons: client::BUTTONS_MAX,
        max_button_title_chars: 20,
    },
    reread,
    sender: client::sender_from,
};

/// A stored message read again: its conversation (`whatsapp:{phone_number_id}:{wa_id}`) names
/// the business number it went to.
fn reread(raw: &Value, conversation: &ExternalId) -> Option<InboundMessage> {
    let to = conversation.as_str().split(':').nth(1).unwrap_or_default();
    payload::read_stored(raw, to).ok()
}
