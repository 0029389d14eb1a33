//! Meta's Send API for Messenger and Instagram (`POST {api_base}/{version}/{page_id}/messages`,
//! the page's or the Instagram account's access token): a reply's text, its buttons as quick
//! replies (each `payload` the button's id, which a tap sends back). What to send is decided in
//! `send_body` (pure); the answer is classified in `classify` (pure) as the Graph API answers.

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::channels::outbound::{ChannelSender, SendResult, error_of, not_sent, send_with};
use crate::config::{Config, MetaMessagingConfig};
use crate::service::replies::outgoing::{Button, Outgoing};

/// The Send API's limits: a text message, quick replies, a quick reply's title.
pub const TEXT_MAX: usize = 2000;
pub const QUICK_REPLIES_MAX: usize = 13;
pub const TITLE_MAX: usize = 20;

/// Graph API error codes that mean "not now" (throttling, transient service errors).
const RETRYABLE_CODES: &[i64] = &[1, 2, 4, 17, 32, 341, 613];

/// The Send API request for a reply to `person`.
pub fn send_body(person: &str, text: &str, buttons: &[Button]) -> Value {
    let mut message = json!({"text": text});
    if !buttons.is_empty() {
        let replies: Vec<Value> =
            buttons.iter().map(|b| json!({"content_type": "text", "title": b.title, "payload": b.id})).collect();
        message["quick_replies"] = replies.into();
    }
    json!({"recipient": {"id": person}, "messaging_type": "RESPONSE", "message": message})
}

/// Reads the Send API's answer.
pub fn classify(status: StatusCode, retry_after: Option<&str>, body: &str, now: OffsetDateTime) -> SendResult {
    let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    if status.is_success() {
        return match parsed["message_id"].as_str() {
            Some(id) => SendResult::Sent { id: id.to_owned() },
            None => SendResult::Retry { error: format!("{status} without a message_id"), retry_after: None },
        };
    }
    let error = error_of(&parsed["error"], body);
    let retryable = error["code"].as_i64().is_some_and(|c| RETRYABLE_CODES.contains(&c));
    not_sent(status, error, retryable, None, retry_after, now)
}

#[derive(Debug, Clone)]
pub struct SendApi {
    http: reqwest::Client,
    base: String,
    token: String,
}

#[async_trait::async_trait]
impl ChannelSender for SendApi {
    async fn send(&self, o: &Outgoing) -> Option<SendResult> {
        let url = format!("{}/{}/messages", self.base, o.from);
        let request = self.http.post(url).bearer_auth(&self.token).json(&send_body(&o.to, &o.text, &o.buttons));
        Some(send_with(request, classify).await)
    }
}

fn sender(
    config: &Config,
    own: &MetaMessagingConfig,
    timeout: Duration,
) -> Result<Option<Arc<dyn ChannelSender>>, reqwest::Error> {
    let token = own.access_token.expose();
    if token.is_empty() {
        return Ok(None);
    }
    let http = reqwest::Client::builder().timeout(timeout).connect_timeout(timeout).build()?;
    let graph = &config.whatsapp;
    let base = format!("{}/{}", graph.api_base.trim_end_matches('/'), graph.api_version);
    Ok(Some(Arc::new(SendApi { http, base, token: token.to_owned() })))
}

/// Messenger's sender, once `messenger.access_token` (the page's) is set.
pub fn messenger_from(config: &Config, timeout: Duration) -> Result<Option<Arc<dyn ChannelSender>>, reqwest::Error> {
    sender(config, &config.messenger, timeout)
}

/// Instagram's sender, once `instagram.access_token` is set.
pub fn instagram_from(config: &Config, timeout: Duration) -> Result<Option<Arc<dyn ChannelSender>>, reqwest::Error> {
    sender(config, &config.instagram, timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buttons_become_quick_replies_with_their_ids_as_payloads() {
        let buttons = [Button { id: "cg:yes:n".into(), title: "Yes".into() }];
        let body = send_body("PSID1", "Refund?", &buttons);
        assert_eq!(body["recipient"]["id"], "PSID1");
        assert_eq!(
            body["message"]["quick_replies"][0],
            json!({"content_type": "text", "title": "Yes", "payload": "cg:yes:n"})
        );
        assert!(send_body("PSID1", "Done", &[])["message"].get("quick_replies").is_none());
    }

    #[test]
    fn answers_are_classified_as_the_graph_api_answers() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let ok = r#"{"recipient_id":"PSID1","message_id":"m_AG5Hz2Uq7tuwNEhXfYYKj8mJEM_QPpz5jdCK48PnKAjSdjfipqxqM"}"#;
        assert!(matches!(classify(StatusCode::OK, None, ok, now), SendResult::Sent { id } if id.starts_with("m_AG5")));
        let throttled = r#"{"error":{"message":"(#613) Calls to this api have exceeded the rate limit.","code":613}}"#;
        assert!(matches!(classify(StatusCode::BAD_REQUEST, None, throttled, now), SendResult::Retry { .. }));
        let outside = r#"{"error":{"message":"(#10) Outside of allowed window.","code":10,"error_subcode":2018278}}"#;
        assert!(matches!(
            classify(StatusCode::BAD_REQUEST, None, outside, now),
            SendResult::Refused { status: 400, .. }
        ));
    }
}
