//! LINE Official Accounts, both directions: the Messaging API's webhook (`POST /webhooks/line`,
//! any number of events per request, `x-line-signature` — the body's HMAC-SHA256 under the
//! channel secret — checked before the body is read) in, the push API out, and the simulator that
//! posts events as LINE does. A redelivered event has the same `webhookEventId`, the inbox's key.
//! The whole channel is this folder and its line in `channels::CHANNELS`; what else it touches
//! (its configuration section, its address kind, its route) docs/ARCHITECTURE.md lists.

pub mod client;
pub mod events;
pub mod signature;
pub mod simulate;

use axum::http::StatusCode;

use crate::channels::{ChannelEntry, ChannelError, Posted, Refusal, counted};
use crate::config::Config;
use crate::service::intake::{Ingress, Wait};

/// The channel's name.
pub const CHANNEL: &str = "line";

/// LINE in the gateway's list of channels (`channels::CHANNELS`).
pub const ENTRY: ChannelEntry = ChannelEntry {
    name: CHANNEL,
    capabilities: client::CAPABILITIES,
    // Each event is stored with the bot it came to.
    reread: |raw, _| events::read_stored(raw),
    sender: client::sender_from,
};

/// One webhook, counted in `chatgate_webhooks_total`: its events' messages stored in the inbox
/// together (a redelivery recognized there), admission behind the answer. LINE wants a 2xx
/// quickly and redelivers what did not get one.
pub async fn receive(ingress: &Ingress, config: &Config, posted: Posted<'_>) -> Result<(), ChannelError> {
    let (given, body) = (posted.header(signature::SIGNATURE_HEADER), posted.body);
    let received = async {
        let secret = config.line.channel_secret.expose();
        if secret.is_empty() {
            return Err(Refusal::not_configured("no LINE channel is configured (`line.channel_secret`)").into());
        }
        signature::verify(secret.as_bytes(), given.and_then(|v| std::str::from_utf8(v).ok()), body).map_err(|e| {
            Refusal::new(StatusCode::UNAUTHORIZED, "invalid_signature", "Invalid signature").detail(format!(
                "{e}: x-line-signature is the base64 HMAC-SHA256 of the body under the channel secret."
            ))
        })?;
        let messages = events::parse(body).map_err(Refusal::invalid_payload)?;
        if !messages.is_empty() {
            ingress.arrive(&messages, Wait::AsConfigured).await?;
        }
        Ok(())
    };
    counted(CHANNEL, received.await)
}
