//! Telegram bots, both directions: the webhook (`POST /webhooks/telegram`, one `Update` per
//! request, `X-Telegram-Bot-Api-Secret-Token` compared in constant time with the token the
//! webhook was set with) in, the Bot API's `sendMessage` out, and the simulator that posts
//! updates as Telegram does. A redelivered update has the same `update_id`, the inbox's key. A
//! button tap (`callback_query`) is answered in the webhook's own answer (`answerCallbackQuery`,
//! which Telegram runs for a webhook that answers with a method), so the person's spinner stops
//! without a call of ours.

pub mod client;
pub mod simulate;
pub mod update;

use axum::http::StatusCode;
use serde::Serialize;
use subtle::ConstantTimeEq;

use crate::channels::{ChannelEntry, ChannelError, Posted, Refusal, counted};
use crate::config::Config;
use crate::service::intake::{Ingress, Wait};

/// The channel's name.
pub const CHANNEL: &str = "telegram";

/// The header Telegram sends the webhook's secret token in.
pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// Telegram in the gateway's list of channels (`channels::CHANNELS`).
pub const ENTRY: ChannelEntry = ChannelEntry {
    name: CHANNEL,
    capabilities: client::CAPABILITIES,
    // The conversation (`telegram:{bot}:tg:{user}`) names the bot.
    reread: |raw, conversation| update::read_stored(conversation.as_str().split(':').nth(1)?, raw),
    sender: client::sender_from,
};

/// The webhook's answer: empty, or the method Telegram is to run with it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct WebhookAnswer {
    /// `answerCallbackQuery` for a button tap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callback_query_id: Option<String>,
}

/// One update, counted in `chatgate_webhooks_total`: its message stored in the inbox (a
/// redelivery recognized there), admission behind the answer.
pub async fn receive(ingress: &Ingress, config: &Config, posted: Posted<'_>) -> Result<WebhookAnswer, ChannelError> {
    let (secret, body) = (posted.header(SECRET_HEADER), posted.body);
    let received = async {
        let telegram = &config.telegram;
        if telegram.bot.is_empty() {
            return Err(Refusal::not_configured("no Telegram bot is configured (`telegram.bot`)").into());
        }
        let expected = telegram.secret_token.expose().as_bytes();
        let matches: bool = secret.unwrap_or_default().ct_eq(expected).into();
        if !matches || expected.is_empty() {
            return Err(ChannelError::from(
                Refusal::new(StatusCode::UNAUTHORIZED, "invalid_secret_token", "Invalid secret token")
                    .detail("X-Telegram-Bot-Api-Secret-Token must be the secret_token the webhook was set with."),
            ));
        }
        let update = update::parse(&telegram.bot, body).map_err(Refusal::invalid_payload)?;
        if let Some(message) = &update.message {
            // A redelivered update is recognized by the inbox and writes nothing.
            ingress.arrive(std::slice::from_ref(message), Wait::AsConfigured).await?;
        }
        let method = update.callback_query_id.is_some().then_some("answerCallbackQuery");
        Ok(WebhookAnswer { method, callback_query_id: update.callback_query_id })
    };
    counted(CHANNEL, received.await)
}
