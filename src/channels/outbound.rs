//! What sending is with any provider, apart from the provider: what became of a send, the answers
//! worth another attempt, and the call itself with the provider's classification of its answer.
//! Each channel's client (`whatsapp`, `twilio`, `standard`) builds its request and reads its
//! answer; this module is what they share.

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;
use time::OffsetDateTime;

use crate::config::Config;
use crate::service::replies::outgoing::Outgoing;

/// What became of one send.
#[derive(Debug, Clone, PartialEq)]
pub enum SendResult {
    /// Accepted: the provider's id for the message.
    Sent { id: String },
    /// Worth another attempt (5xx, 429, a throttling error code, the network), after
    /// `retry_after` if the provider said.
    Retry { error: String, retry_after: Option<Duration> },
    /// Refused for good (other 4xx): the provider's error is kept.
    Refused { status: u16, error: Value },
}

/// Statuses worth another attempt with any provider: theirs (5xx), "slow down" (429) and a
/// timeout (408).
pub(crate) fn transient(status: StatusCode) -> bool {
    status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::REQUEST_TIMEOUT
}

/// A provider's answer that did not take the message: worth another attempt when its status is
/// `transient` or the provider says "not now" (`retryable`: its own error code), after `told`
/// (the provider's own wait, from its body) or the `Retry-After` header; else refused for good,
/// with the provider's `error`.
pub(crate) fn not_sent(
    status: StatusCode,
    error: Value,
    retryable: bool,
    told: Option<Duration>,
    retry_after: Option<&str>,
    now: OffsetDateTime,
) -> SendResult {
    if transient(status) || retryable || told.is_some() {
        let retry_after = told.or_else(|| retry_after.and_then(|v| crate::domain::retry::parse_retry_after(v, now)));
        SendResult::Retry { error: format!("{status}: {error}"), retry_after }
    } else {
        SendResult::Refused { status: status.as_u16(), error }
    }
}

/// A provider's answer as kept with a failed send: its JSON, else the start of its text.
pub(crate) fn error_of(parsed: &Value, body: &str) -> Value {
    if parsed.is_object() { parsed.clone() } else { serde_json::json!({"body": truncate(body, 500)}) }
}

pub(crate) fn truncate(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// Sends `request` and reads the provider's answer with `classify` (status, `Retry-After`, body,
/// now); the network failing, or the answer not arriving whole, is worth another attempt.
pub(crate) async fn send_with(
    request: reqwest::RequestBuilder,
    classify: impl FnOnce(StatusCode, Option<&str>, &str, OffsetDateTime) -> SendResult,
) -> SendResult {
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) => return SendResult::Retry { error: format!("network: {error}"), retry_after: None },
    };
    let status = response.status();
    let retry_after =
        response.headers().get(reqwest::header::RETRY_AFTER).and_then(|v| v.to_str().ok()).map(str::to_owned);
    match response.text().await {
        Ok(text) => classify(status, retry_after.as_deref(), &text, OffsetDateTime::now_utc()),
        Err(error) => SendResult::Retry { error: format!("reading the answer: {error}"), retry_after: None },
    }
}

/// A channel's sending half, as the outbound worker uses it: a rendered reply in, what became of
/// it out. `None`: this sender cannot reach the addressee (a source that takes no replies).
#[async_trait::async_trait]
pub trait ChannelSender: Send + Sync + std::fmt::Debug {
    async fn send(&self, outgoing: &Outgoing) -> Option<SendResult>;
}

/// A channel's sender as built from the configuration; `None` without its credentials (its
/// replies wait in the outbox until they are set).
pub type Built = Result<Option<Arc<dyn ChannelSender>>, reqwest::Error>;

/// Builds a channel's sender from the configuration.
pub type SenderFrom = fn(&Config, Duration) -> Built;

/// The sender `build` makes with `token`, once the token is set.
pub(crate) fn with_token<S: ChannelSender + 'static>(
    token: &crate::config::Secret,
    build: impl FnOnce(&str) -> Result<S, reqwest::Error>,
) -> Built {
    let token = token.expose();
    if token.is_empty() {
        return Ok(None);
    }
    Ok(Some(Arc::new(build(token)?)))
}
