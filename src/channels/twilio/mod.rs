//! Twilio Messaging (WhatsApp and SMS): `POST /webhooks/twilio`, form-encoded and signed with
//! `X-Twilio-Signature` over the public URL and the parameters. The message goes through the same
//! inbox and admission as Meta's; the answer waits for that admission (bounded) and is TwiML
//! carrying the replies due at once (a prompt, a refusal, help); later replies (outcomes), and
//! those of a message not admitted in time, go through Twilio's Messages API from the outbox.

pub mod client;
pub mod form;
pub mod signature;
pub mod twiml;

use std::time::Duration;

use axum::http::{StatusCode, Uri, header};
use time::OffsetDateTime;

use crate::channels::{ChannelEntry, ChannelError, Posted, Refusal, counted};
use crate::config::Config;
use crate::domain::outbound::Capabilities;
use crate::service::intake::Ingress;
use crate::service::intake::{Arrival, Wait, reply_destination};

/// Where Twilio reports what became of the messages we sent through its Messages API.
pub const STATUS_PATH: &str = "/webhooks/twilio/status";

/// A message webhook, counted: the TwiML to answer with (the replies due at once, or none).
pub async fn receive_message(ingress: &Ingress, config: &Config, posted: Posted<'_>) -> Result<String, ChannelError> {
    counted("twilio", message(ingress, config, posted).await)
}

/// A status callback for a message sent through the Messages API, counted.
pub async fn receive_status(ingress: &Ingress, config: &Config, posted: Posted<'_>) -> Result<(), ChannelError> {
    counted("twilio", status(ingress, config, posted).await)
}

/// The parameters of a form Twilio signed for this gateway's public URL.
fn verified_form(
    config: &Config,
    Posted { uri, headers, body }: Posted<'_>,
) -> Result<Vec<(String, String)>, ChannelError> {
    let auth_token = config.twilio.auth_token.expose();
    if auth_token.is_empty() {
        return Err(Refusal::not_configured("Twilio is not configured.").into());
    }
    let is_form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("application/x-www-form-urlencoded"));
    if !is_form {
        return Err(Refusal::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "Unsupported Media Type",
        )
        .detail("Twilio posts application/x-www-form-urlencoded.")
        .into());
    }
    let params: Vec<(String, String)> = form_urlencoded::parse(body).into_owned().collect();
    let url = public_url(&config.server.public_base_url, uri);
    let given = headers.get(signature::HEADER).map(|v| v.as_bytes());
    signature::verify(auth_token.as_bytes(), &url, &params, given).map_err(|e| {
        ChannelError::from(
            Refusal::new(StatusCode::UNAUTHORIZED, "invalid_signature", "Invalid signature")
                .detail(format!("{e} (signed URL: the public base URL followed by the request path)")),
        )
    })?;
    Ok(params)
}

async fn status(ingress: &Ingress, config: &Config, posted: Posted<'_>) -> Result<(), ChannelError> {
    let params = verified_form(config, posted)?;
    let update = form::status(&params).map_err(Refusal::invalid_payload)?;
    ingress.handle_status(&update, OffsetDateTime::now_utc()).await?;
    Ok(())
}

/// The message goes into the inbox like any other, and the answer waits for its admission (at
/// most the hold of its replies and `ingest.admission_wait_ms`) so that the replies it queued go
/// back inline; past that the answer is empty and they go through the Messages API.
async fn message(ingress: &Ingress, config: &Config, posted: Posted<'_>) -> Result<String, ChannelError> {
    let twilio = &config.twilio;
    let params = verified_form(config, posted)?;
    let hold = Duration::from_millis(twilio.inline_hold_ms);
    let message = form::parse(&params, hold).map_err(Refusal::invalid_payload)?;
    let arrivals = ingress.arrive(std::slice::from_ref(&message), Wait::AtMost(hold)).await?;
    let sending = ingress.engine().sending();
    let redelivered = match arrivals.first() {
        // Not admitted in time: its replies leave through the API once their hold ends.
        Some(Arrival::Pending) => return Ok(twiml::response(&[])),
        Some(Arrival::Admitted(handled)) => handled.is_redelivery(),
        Some(Arrival::Redelivered) | None => true,
    };
    // A redelivered webhook wrote nothing: Twilio retries when it did not get our answer, so it
    // gets the first answer again (its replies were recorded as sent with it).
    if redelivered {
        let first = sending.answer_of(&message.channel, &message.provider_message_id).await?;
        return Ok(first.unwrap_or_else(|| twiml::response(&[])));
    }
    let lease = Duration::from_millis(config.outbound.lease_ms);
    let destination = reply_destination(&message);
    // Claimed, rendered and recorded as sent before the answer goes back; the only window left
    // is an answer lost on its way to Twilio after the record.
    let (templates, held) = (ingress.templates(), (destination.as_str(), lease));
    let now = OffsetDateTime::now_utc();
    let replies = sending.answer_inline(&templates, crate::channels::capabilities_of, held, now).await;
    let answer = twiml::response(&replies);
    if let Err(error) = sending.keep_answer(&message.channel, &message.provider_message_id, &answer).await {
        // The answer still goes out; only a retry of this webhook would miss it.
        tracing::warn!(%error, "cannot keep the TwiML answer for retries");
    }
    Ok(answer)
}

/// The URL Twilio called: the configured public base (which may carry a path a proxy strips)
/// followed by the request's path and query.
fn public_url(base: &str, uri: &Uri) -> String {
    let path = uri.path_and_query().map_or(uri.path(), |pq| pq.as_str());
    format!("{}{path}", base.trim_end_matches('/'))
}

/// Twilio in the gateway's list of channels (`channels::CHANNELS`): no buttons without a
/// pre-approved content template; a prompt's text says how to answer by typing.
pub const ENTRY: ChannelEntry = ChannelEntry {
    name: "twilio",
    capabilities: Capabilities { max_text_chars: client::BODY_MAX, max_buttons: 0, max_button_title_chars: 0 },
    reread: |raw, _| form::read(raw, None).ok(),
    sender: client::sender_from,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signed_url_is_the_public_base_and_the_request_path_and_query() {
        let uri: Uri = "/webhooks/twilio?tenant=demo".parse().unwrap();
        assert_eq!(public_url("https://gw.example.com/", &uri), "https://gw.example.com/webhooks/twilio?tenant=demo");
        let uri: Uri = "/webhooks/twilio".parse().unwrap();
        assert_eq!(public_url("https://example.com/chatgate", &uri), "https://example.com/chatgate/webhooks/twilio");
    }
}
