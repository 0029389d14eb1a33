//! Twilio's Messages API: `POST {api_base}/2010-04-01/Accounts/{AccountSid}/Messages.json`, a form
//! with `From`, `To`, `Body` and `StatusCallback` (this gateway's `/webhooks/twilio/status`, which
//! records what became of the message), HTTP Basic with the account SID and auth token. How Twilio
//! answered is classified in `classify` (pure), into the same outcomes as Meta's.

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;
use time::OffsetDateTime;

use crate::channels::outbound::ChannelSender;
use crate::channels::outbound::SendResult;
use crate::channels::outbound::send_with;
use crate::channels::outbound::{error_of, not_sent};
use crate::config::Config;
use crate::service::replies::outgoing::Outgoing;

/// Twilio's longest message body (longer ones are refused, not split).
pub const BODY_MAX: usize = 1600;

/// Twilio error codes that mean "not now" whatever the status: too many requests, and the
/// queue of a sender that is over its rate.
const RETRYABLE_CODES: &[i64] = &[20429, 30001];

pub fn classify(status: StatusCode, retry_after: Option<&str>, body: &str, now: OffsetDateTime) -> SendResult {
    let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    if status.is_success() {
        return match parsed["sid"].as_str() {
            Some(sid) => SendResult::Sent { id: sid.to_owned() },
            None => SendResult::Retry { error: format!("{status} without a message sid"), retry_after: None },
        };
    }
    let retryable = parsed["code"].as_i64().is_some_and(|c| RETRYABLE_CODES.contains(&c));
    not_sent(status, error_of(&parsed, body), retryable, None, retry_after, now)
}

#[derive(Debug, Clone)]
pub struct TwilioClient {
    http: reqwest::Client,
    messages_url: String,
    account_sid: String,
    auth_token: String,
    /// Where Twilio reports the message's fate (`sent`, `delivered`, `read`, `undelivered`).
    status_callback: String,
}

impl TwilioClient {
    /// A client for the account; `public_base_url` is where Twilio reaches this gateway.
    pub fn new(
        api_base: &str,
        account_sid: &str,
        auth_token: &str,
        public_base_url: &str,
        timeout: Duration,
    ) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder().timeout(timeout).connect_timeout(timeout).build()?;
        let messages_url =
            format!("{}/2010-04-01/Accounts/{account_sid}/Messages.json", api_base.trim_end_matches('/'));
        let status_callback =
            format!("{}{}", public_base_url.trim_end_matches('/'), crate::channels::twilio::STATUS_PATH);
        Ok(Self {
            http,
            messages_url,
            account_sid: account_sid.to_owned(),
            auth_token: auth_token.to_owned(),
            status_callback,
        })
    }

    /// Sends `text` from our address to theirs (`whatsapp:+...` or a plain number).
    pub async fn send(&self, from: &str, to: &str, text: &str) -> SendResult {
        let body: String = text.chars().take(BODY_MAX).collect();
        let form = [("From", from), ("To", to), ("Body", body.as_str()), ("StatusCallback", &self.status_callback)];
        let request = self.http.post(&self.messages_url).basic_auth(&self.account_sid, Some(&self.auth_token));
        let encoded = form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
        let request = request.header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded").body(encoded);
        send_with(request, classify).await
    }
}

// Buttons need a pre-approved content template on Twilio; the prompt's text always says how to
// answer by typing (its capabilities have no buttons).
#[async_trait::async_trait]
impl ChannelSender for TwilioClient {
    async fn send(&self, o: &Outgoing) -> Option<SendResult> {
        Some(TwilioClient::send(self, &o.from, &o.to, &o.text).await)
    }
}

/// The Messages API client, once `twilio.account_sid` and `twilio.auth_token` are set.
pub fn sender_from(config: &Config, timeout: Duration) -> Result<Option<Arc<dyn ChannelSender>>, reqwest::Error> {
    let twilio = &config.twilio;
    let auth_token = twilio.auth_token.expose();
    if twilio.account_sid.is_empty() || auth_token.is_empty() {
        return Ok(None);
    }
    let public = &config.server.public_base_url;
    Ok(Some(Arc::new(TwilioClient::new(&twilio.api_base, &twilio.account_sid, auth_token, public, timeout)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_classified_as_sent_retry_or_refused() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let created = r#"{"sid":"SM0123","status":"queued"}"#;
        assert_eq!(classify(StatusCode::CREATED, None, created, now), SendResult::Sent { id: "SM0123".into() });
        assert!(matches!(classify(StatusCode::SERVICE_UNAVAILABLE, None, "", now), SendResult::Retry { .. }));
        assert!(matches!(
            classify(StatusCode::TOO_MANY_REQUESTS, Some("2"), r#"{"code":20429}"#, now),
            SendResult::Retry { retry_after: Some(d), .. } if d == Duration::from_secs(2)
        ));
        let invalid = r#"{"code":21211,"message":"The 'To' number is not a valid phone number.","status":400}"#;
        match classify(StatusCode::BAD_REQUEST, None, invalid, now) {
            SendResult::Refused { status, error } => assert_eq!((status, error["code"].as_i64()), (400, Some(21211))),
            other => panic!("{other:?}"),
        }
    }
}
