//! The WhatsApp Cloud API's send endpoint: `POST {api_base}/{version}/{phone_number_id}/messages`
//! with the bearer access token. What to send is decided in `whatsapp_body` (pure); how the
//! provider answered is classified in `classify` (pure): sent with its `wamid`, worth retrying,
//! or refused for good.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::channels::outbound::{Built, ChannelSender, SendResult, error_of, not_sent, send_with, with_token};
use crate::config::Config;

/// WhatsApp's limits: interactive body text, plain text body, buttons per message.
pub const INTERACTIVE_BODY_MAX: usize = 1024;
pub const TEXT_BODY_MAX: usize = 4096;
pub const BUTTONS_MAX: usize = 3;

pub use crate::service::replies::outgoing::Button;
use crate::service::replies::outgoing::Outgoing;

/// The Cloud API request body for a message to `to`: interactive reply buttons when there are
/// any and the text fits, otherwise plain text (a prompt's text always says how to answer by
/// typing, so nothing is lost). `in_reply_to` quotes the message being answered.
pub fn whatsapp_body(to: &str, text: &str, buttons: &[Button], in_reply_to: Option<&str>) -> Value {
    let mut body = if !buttons.is_empty() && text.chars().count() <= INTERACTIVE_BODY_MAX {
        let buttons: Vec<Value> = buttons
            .iter()
            .take(BUTTONS_MAX)
            .map(|b| json!({"type": "reply", "reply": {"id": b.id, "title": b.title}}))
            .collect();
        json!({
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": to,
            "type": "interactive",
            "interactive": {"type": "button", "body": {"text": text}, "action": {"buttons": buttons}},
        })
    } else {
        let text: String = text.chars().take(TEXT_BODY_MAX).collect();
        json!({
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": to,
            "type": "text",
            "text": {"preview_url": false, "body": text},
        })
    };
    if let (Some(id), Some(map)) = (in_reply_to, body.as_object_mut()) {
        map.insert("context".into(), json!({"message_id": id}));
    }
    body
}

/// Graph API error codes that mean "not now" even under a 400: throttling and transient
/// service errors (Meta's error-code reference).
const RETRYABLE_CODES: &[i64] = &[1, 2, 4, 17, 341, 80007, 130429, 131000, 131016, 131056, 133004];

/// Reads the provider's answer.
pub fn classify(status: StatusCode, retry_after: Option<&str>, body: &str, now: OffsetDateTime) -> SendResult {
    let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    if status.is_success() {
        return match parsed["messages"][0]["id"].as_str() {
            Some(wamid) => SendResult::Sent { id: wamid.to_owned() },
            // A 2xx without an id cannot be tracked; Meta always sends one, so treat it as a
            // transient fault rather than guess.
            None => SendResult::Retry { error: format!("{status} without a message id"), retry_after: None },
        };
    }
    let error = error_of(&parsed["error"], body);
    let retryable = error["code"].as_i64().is_some_and(|c| RETRYABLE_CODES.contains(&c));
    not_sent(status, error, retryable, None, retry_after, now)
}

/// The HTTP side.
#[derive(Debug, Clone)]
pub struct GraphClient {
    http: reqwest::Client,
    messages_base: String,
    token: String,
}

impl GraphClient {
    pub fn new(api_base: &str, version: &str, token: &str, timeout: Duration) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder().timeout(timeout).connect_timeout(timeout).build()?;
        let messages_base = format!("{}/{}", api_base.trim_end_matches('/'), version.trim_matches('/'));
        Ok(Self { http, messages_base, token: token.to_owned() })
    }

    pub async fn send(&self, phone_number_id: &str, body: &Value) -> SendResult {
        let url = format!("{}/{phone_number_id}/messages", self.messages_base);
        send_with(self.http.post(&url).bearer_auth(&self.token).json(body), classify).await
    }
}

#[async_trait::async_trait]
impl ChannelSender for GraphClient {
    async fn send(&self, o: &Outgoing) -> Option<SendResult> {
        let body = whatsapp_body(&o.to, &o.text, &o.buttons, o.in_reply_to.as_deref());
        Some(GraphClient::send(self, &o.from, &body).await)
    }
}

/// The Graph API client, once `whatsapp.access_token` is set.
pub fn sender_from(config: &Config, timeout: Duration) -> Built {
    let whatsapp = &config.whatsapp;
    with_token(&whatsapp.access_token, |token| {
        GraphClient::new(&whatsapp.api_base, &whatsapp.api_version, token, timeout)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buttons_make_an_interactive_message_and_no_buttons_a_text() {
        let buttons = [Button { id: "cg:yes:n1".into(), title: "Yes".into() }];
        let body = whatsapp_body("15550000001", "Confirm?", &buttons, Some("wamid.IN"));
        assert_eq!(body["type"], "interactive");
        assert_eq!(body["messaging_product"], "whatsapp");
        assert_eq!(body["interactive"]["action"]["buttons"][0]["reply"]["id"], "cg:yes:n1");
        assert_eq!(body["context"]["message_id"], "wamid.IN");
        let text = whatsapp_body("15550000001", "Done", &[], None);
        assert_eq!((text["type"].as_str(), text["text"]["body"].as_str()), (Some("text"), Some("Done")));
        assert!(text.get("context").is_none());
        let long = "x".repeat(INTERACTIVE_BODY_MAX + 1);
        assert_eq!(whatsapp_body("1", &long, &buttons, None)["type"], "text", "too long for buttons");
    }

    #[test]
    fn answers_are_classified_as_sent_retry_or_refused() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let ok = r#"{"messaging_product":"whatsapp","messages":[{"id":"wamid.OUT"}]}"#;
        assert_eq!(classify(StatusCode::OK, None, ok, now), SendResult::Sent { id: "wamid.OUT".into() });
        assert!(matches!(classify(StatusCode::INTERNAL_SERVER_ERROR, None, "", now), SendResult::Retry { .. }));
        assert!(matches!(
            classify(StatusCode::TOO_MANY_REQUESTS, Some("3"), "{}", now),
            SendResult::Retry { retry_after: Some(d), .. } if d == Duration::from_secs(3)
        ));
        let throttled = r#"{"error":{"message":"pair rate limit","code":131056}}"#;
        assert!(matches!(classify(StatusCode::BAD_REQUEST, None, throttled, now), SendResult::Retry { .. }));
        let invalid = r#"{"error":{"message":"Invalid parameter","code":100}}"#;
        match classify(StatusCode::BAD_REQUEST, None, invalid, now) {
            SendResult::Refused { status, error } => assert_eq!((status, error["code"].as_i64()), (400, Some(100))),
            other => panic!("{other:?}"),
        }
    }
}
