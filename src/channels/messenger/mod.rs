//! Messenger and Instagram messaging, both directions: Meta's webhook (`/webhooks/messenger`,
//! the same `X-Hub-Signature-256` and subscription handshake as WhatsApp's, with the same Meta
//! app's secret and verify token: one app may serve all three) carrying `object: page` or `object:
//! instagram`, and the Send API out. Two channels, one folder: their deliveries differ only in
//! their `object`.

pub mod client;
pub mod payload;

use serde::Serialize;

use crate::channels::whatsapp::webhook;
use crate::channels::{ChannelEntry, ChannelError, Posted, Refusal, counted};
use crate::config::Config;
use crate::domain::outbound::Capabilities;
use crate::service::intake::Ingress;

pub const MESSENGER: &str = "messenger";
pub const INSTAGRAM: &str = "instagram";

const CAPABILITIES: Capabilities = Capabilities {
    max_text_chars: client::TEXT_MAX,
    max_buttons: client::QUICK_REPLIES_MAX,
    max_button_title_chars: client::TITLE_MAX,
};

/// Messenger in the gateway's list of channels (`channels::CHANNELS`).
pub const MESSENGER_ENTRY: ChannelEntry = ChannelEntry {
    name: MESSENGER,
    capabilities: CAPABILITIES,
    reread: |raw, _| payload::read(&crate::domain::command::Channel::parse(MESSENGER).ok()?, raw),
    sender: client::messenger_from,
};

/// Instagram in the gateway's list of channels (`channels::CHANNELS`).
pub const INSTAGRAM_ENTRY: ChannelEntry = ChannelEntry {
    name: INSTAGRAM,
    capabilities: CAPABILITIES,
    reread: |raw, _| payload::read(&crate::domain::command::Channel::parse(INSTAGRAM).ok()?, raw),
    sender: client::instagram_from,
};

/// What a delivery came to: what WhatsApp's answer says, its channel, and what it skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct DeliverySummary {
    /// `messenger` or `instagram`, by the delivery's `object`.
    pub channel: &'static str,
    #[serde(flatten)]
    pub delivery: webhook::DeliverySummary,
    /// Items with nothing to act on (the page's own messages, reads) or that could not be read.
    pub skipped: usize,
}

/// A signed delivery for the Meta app `name`, counted in `chatgate_webhooks_total`: its messages
/// stored (and admitted, as `ingest.acknowledge` says) as WhatsApp's are.
pub async fn receive(
    ingress: &Ingress,
    config: &Config,
    name: Option<&str>,
    posted: Posted<'_>,
) -> Result<DeliverySummary, ChannelError> {
    let received = async {
        webhook::verified(config, name, posted)?;
        let delivery = payload::parse(posted.body).map_err(Refusal::invalid_payload)?;
        let summary = webhook::store_delivery(ingress, &delivery.messages, &delivery.statuses, 0).await?;
        Ok(DeliverySummary { channel: delivery.channel, delivery: summary, skipped: delivery.skipped })
    };
    // Counted under the delivery's channel; one that could not be read, under Messenger's.
    let received = received.await;
    counted(received.as_ref().map_or(MESSENGER, |summary| summary.channel), received)
}
