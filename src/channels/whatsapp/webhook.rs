//! Meta's side of the WhatsApp Cloud API webhook: the subscription handshake, and signed
//! deliveries read into messages and statuses that intake handles one at a time.

use axum::http::StatusCode;
use serde::Serialize;
use subtle::ConstantTimeEq;
use time::OffsetDateTime;

use super::{payload, signature};
use crate::channels::{ChannelError, Posted, Refusal, counted};
use crate::config::{Config, WhatsAppApp};
use crate::domain::message::{InboundMessage, StatusUpdate};
use crate::service::intake::{ArrivalCounts, Ingress, Wait};

/// What a delivery came to, as the answer to Meta says it (Messenger's and Instagram's answers
/// say the same, and their channel).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct DeliverySummary {
    pub messages: usize,
    pub statuses: usize,
    /// Messages stored in the inbox by this delivery, for admission.
    pub stored: usize,
    /// Stored messages not admitted when the answer went out (all of them, unless
    /// `ingest.acknowledge` is `admitted`): they are admitted behind it.
    pub pending: usize,
    /// Messages admitted before the answer that started a new command.
    pub commands: usize,
    /// Messages admitted before the answer that repeated a command (its outcome replayed, or it
    /// is in progress).
    pub duplicates: usize,
    /// Messages seen before (a redelivered webhook): nothing new was written.
    pub redelivered: usize,
}

impl DeliverySummary {
    pub fn new(messages: usize, statuses: usize, counts: ArrivalCounts) -> Self {
        let ArrivalCounts { stored, pending, commands, duplicates, redelivered } = counts;
        Self { messages, statuses, stored, pending, commands, duplicates, redelivered }
    }
}

/// The app `name` names (the default app without one).
pub fn app<'a>(config: &'a Config, name: Option<&str>) -> Result<&'a WhatsAppApp, ChannelError> {
    let name = name.unwrap_or(&config.whatsapp.default_app);
    config
        .whatsapp
        .apps
        .get(name)
        .ok_or_else(|| Refusal::not_configured(format!("no WhatsApp app `{name}` is configured")).into())
}

/// The query of Meta's subscription handshake (the same for a WhatsApp, Messenger or Instagram
/// webhook of the app). A parameter left out reads as empty, and fails the check.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Handshake {
    /// `subscribe`.
    #[serde(rename = "hub.mode", default)]
    #[param(rename = "hub.mode", required = true)]
    pub mode: String,
    /// The app's `verify_token`.
    #[serde(rename = "hub.verify_token", default)]
    #[param(rename = "hub.verify_token", required = true)]
    pub verify_token: String,
    /// What to echo.
    #[serde(rename = "hub.challenge", default)]
    #[param(rename = "hub.challenge", required = true)]
    pub challenge: String,
}

/// Meta's subscription handshake: the `hub.challenge` to echo when `hub.verify_token` is ours.
pub fn verify_handshake(config: &Config, name: Option<&str>, query: Handshake) -> Result<String, ChannelError> {
    let app = app(config, name)?;
    let token_ok: bool = query.verify_token.as_bytes().ct_eq(app.verify_token.expose().as_bytes()).into();
    if query.mode != "subscribe" || !token_ok {
        return Err(Refusal::new(StatusCode::FORBIDDEN, "verification_failed", "Verification failed")
            .detail("hub.mode must be `subscribe` and hub.verify_token must match the configured token.")
            .into());
    }
    Ok(query.challenge)
}

/// A signed delivery for app `name`, counted in `chatgate_webhooks_total`.
pub async fn receive(
    ingress: &Ingress,
    config: &Config,
    name: Option<&str>,
    posted: Posted<'_>,
) -> Result<DeliverySummary, ChannelError> {
    let received = async {
        verified(config, name, posted)?;
        let delivery = payload::parse(posted.body).map_err(Refusal::invalid_payload)?;
        store_delivery(ingress, &delivery.messages, &delivery.statuses, delivery.unreadable_statuses).await
    };
    counted("whatsapp", received.await)
}

/// A delivery signed with the secret of the Meta app `name` (`X-Hub-Signature-256`): WhatsApp's,
/// Messenger's and Instagram's alike, one app serving all three.
pub fn verified(config: &Config, name: Option<&str>, posted: Posted<'_>) -> Result<(), ChannelError> {
    let app = app(config, name)?;
    signature::verify(app.app_secret.expose().as_bytes(), posted.header(signature::HEADER), posted.body).map_err(|e| {
        Refusal::new(StatusCode::UNAUTHORIZED, "invalid_signature", "Invalid signature").detail(e.to_string()).into()
    })
}

/// A Meta delivery's messages stored in the inbox together (and, when `ingest.acknowledge` says
/// so, waited for until admitted, bounded), then its statuses (`unreadable` more were not read):
/// WhatsApp's, Messenger's and Instagram's alike. A storage failure answers 503 so that Meta
/// retries, and the retry finds what was stored already there.
pub async fn store_delivery(
    ingress: &Ingress,
    messages: &[InboundMessage],
    statuses: &[StatusUpdate],
    unreadable: usize,
) -> Result<DeliverySummary, ChannelError> {
    let arrivals = ingress.arrive(messages, Wait::AsConfigured).await?;
    let now = OffsetDateTime::now_utc();
    for status in statuses {
        ingress.handle_status(status, now).await?;
    }
    Ok(DeliverySummary::new(messages.len(), statuses.len() + unreadable, ArrivalCounts::of(&arrivals)))
}
