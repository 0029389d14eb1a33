//! Slack apps, both directions: the Events API (`POST /webhooks/slack/events`: the
//! `url_verification` handshake, message events; a retry, with `X-Slack-Retry-Num`, repeats the
//! `event_id` the inbox knows), slash commands (`/webhooks/slack/commands`) and interactivity
//! (`/webhooks/slack/interactivity`: a confirmation's buttons), every request signed
//! (`signature`: `X-Slack-Signature` v0, five minutes' tolerance); out, `chat.postMessage` in
//! the thread of what the person wrote. The answer goes out once the message is in the inbox,
//! well within Slack's three seconds.

pub mod client;
pub mod payload;
pub mod signature;

use axum::http::{HeaderMap, StatusCode};
use serde::Serialize;
use time::OffsetDateTime;

use crate::channels::{ChannelEntry, ChannelError, Posted, Refusal, counted};
use crate::config::Config;
use crate::domain::message::InboundMessage;
use crate::service::intake::{Ingress, Wait};

/// The channel's name.
pub const CHANNEL: &str = "slack";

/// Slack in the gateway's list of channels (`channels::CHANNELS`).
pub const ENTRY: ChannelEntry = ChannelEntry {
    name: CHANNEL,
    capabilities: client::CAPABILITIES,
    reread: |raw, _| payload::read(raw),
    sender: client::sender_from,
};

/// The answer to an Events API request: the challenge of the handshake, else nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct EventAnswer {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub challenge: Option<String>,
}

/// An Events API request, counted in `chatgate_webhooks_total`.
pub async fn receive_event(
    ingress: &Ingress,
    config: &Config,
    Posted { headers, body, .. }: Posted<'_>,
) -> Result<EventAnswer, ChannelError> {
    let received = async {
        verified(config, headers, body)?;
        match payload::event(body).map_err(Refusal::invalid_payload)? {
            payload::Event::UrlVerification(challenge) => Ok(EventAnswer { challenge: Some(challenge) }),
            payload::Event::Callback(message) => {
                if let Some(message) = message {
                    store(ingress, &message).await?;
                }
                Ok(EventAnswer::default())
            }
        }
    };
    counted(CHANNEL, received.await)
}

/// What a form-encoded request from Slack is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// A slash command.
    Command,
    /// An interaction (`payload=<JSON>`): a button tapped, or another kind that carries nothing.
    Interaction,
}

/// A slash command or an interaction, counted in `chatgate_webhooks_total`.
pub async fn receive_form(
    ingress: &Ingress,
    config: &Config,
    Posted { headers, body, .. }: Posted<'_>,
    form: Form,
) -> Result<(), ChannelError> {
    let received = async {
        if form == Form::Command && is_ssl_check(config, body)? {
            return Ok(());
        }
        verified(config, headers, body)?;
        let params: Vec<(String, String)> = form_urlencoded::parse(body).into_owned().collect();
        let message = match form {
            Form::Command => payload::command(&params).map(Some),
            Form::Interaction => payload::interaction(&params),
        };
        if let Some(message) = message.map_err(Refusal::invalid_payload)? {
            store(ingress, &message).await?;
        }
        Ok(())
    };
    counted(CHANNEL, received.await)
}

/// Slack's certificate check on a slash command's URL (a POST of `ssl_check=1` and a token, "Slash
/// commands" in Slack's docs): answered 200 with nothing stored, before the signature is read, as
/// Slack's Bolt framework does (slackapi/bolt-python `slack_bolt/middleware/ssl_check/ssl_check.py`
/// at 16cc456c, ahead of its request verification); 404 while Slack is not configured.
fn is_ssl_check(config: &Config, body: &[u8]) -> Result<bool, ChannelError> {
    if config.slack.signing_secret.expose().is_empty() {
        return Err(Refusal::not_configured("Slack is not configured (`slack.signing_secret`)").into());
    }
    Ok(form_urlencoded::parse(body).any(|(name, value)| name == "ssl_check" && value == "1"))
}

/// The request's signature, before anything of it is read; 404 while Slack is not configured.
fn verified(config: &Config, headers: &HeaderMap, body: &[u8]) -> Result<(), ChannelError> {
    let secret = config.slack.signing_secret.expose();
    if secret.is_empty() {
        return Err(Refusal::not_configured("Slack is not configured (`slack.signing_secret`)").into());
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let (timestamp, given) = (header(signature::TIMESTAMP_HEADER), header(signature::SIGNATURE_HEADER));
    let now = OffsetDateTime::now_utc().unix_timestamp();
    signature::verify(secret.as_bytes(), timestamp, given, body, now).map_err(|e| {
        Refusal::new(StatusCode::UNAUTHORIZED, "invalid_signature", "Invalid signature").detail(e.to_string()).into()
    })
}

/// The message into the inbox (and admitted, as `ingest.acknowledge` says: within Slack's three
/// seconds as long as `ingest.admission_wait_ms` is below them); a redelivery (the same event or
/// trigger id) writes nothing.
async fn store(ingress: &Ingress, message: &InboundMessage) -> Result<(), ChannelError> {
    ingress.arrive(std::slice::from_ref(message), Wait::AsConfigured).await?;
    Ok(())
}
