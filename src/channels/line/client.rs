//! The Messaging API's push message (`POST {api_base}/v2/bot/message/push`,
//! developers.line.biz/en/reference/messaging-api/#send-push-message): a reply's text, its buttons
//! as quick-reply postback actions (each button's id its `data`, which comes back in the postback
//! event). A webhook's reply token would cost nothing but is good once and for about a minute,
//! and the outbox sends when it can: replies are pushed. Each push carries `X-Line-Retry-Key`,
//! the outbox row's id: LINE runs one request per key, and answers a retry of one it accepted
//! 409 with the messages it sent ("Retry failed API requests") — sent, not refused.
//! What to send is decided in `push_body` (pure), the answer read in `classify` (pure).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::channels::outbound::{Built, ChannelSender, SendResult, error_of, not_sent, send_with, with_token};
use crate::config::Config;
use crate::domain::outbound::Capabilities;
use crate::service::replies::outgoing::{Button, Outgoing};

/// LINE's limits: a text message's characters, a quick reply's buttons, an action's label.
pub const CAPABILITIES: Capabilities =
    Capabilities { max_text_chars: 5000, max_buttons: 13, max_button_title_chars: 20 };

/// The header that makes a push safe to try again.
pub const RETRY_KEY_HEADER: &str = "x-line-retry-key";

/// The push request for one text message to `to` (a user, group or room id).
pub fn push_body(to: &str, text: &str, buttons: &[Button]) -> Value {
    let mut message = json!({"type": "text", "text": text});
    if !buttons.is_empty() {
        let items: Vec<Value> = buttons
            .iter()
            .map(|b| {
                let action = json!({"type": "postback", "label": b.title, "data": b.id, "displayText": b.title});
                json!({"type": "action", "action": action})
            })
            .collect();
        message["quickReply"] = json!({"items": items});
    }
    json!({"to": to, "messages": [message]})
}

/// Reads the Messaging API's answer: `{"sentMessages": [{"id": …}]}` is sent, and so is a 409
/// that carries them (the same retry key, accepted before); 429 and 5xx are tried again (LINE
/// sends no `Retry-After`: the outbox's backoff decides); any other refusal is final.
pub fn classify(status: StatusCode, retry_after: Option<&str>, body: &str, now: OffsetDateTime) -> SendResult {
    let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let sent = parsed["sentMessages"][0]["id"].as_str();
    match sent {
        Some(id) if status.is_success() || status == StatusCode::CONFLICT => SendResult::Sent { id: id.to_owned() },
        None if status.is_success() => {
            SendResult::Retry { error: format!("{status} without sentMessages"), retry_after: None }
        }
        _ => not_sent(status, error_of(&parsed, body), false, None, retry_after, now),
    }
}

#[derive(Debug, Clone)]
pub struct PushClient {
    http: reqwest::Client,
    push_url: String,
    access_token: String,
}

impl PushClient {
    pub fn new(api_base: &str, access_token: &str, timeout: Duration) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder().timeout(timeout).connect_timeout(timeout).build()?;
        let push_url = format!("{}/v2/bot/message/push", api_base.trim_end_matches('/'));
        Ok(Self { http, push_url, access_token: access_token.to_owned() })
    }
}

#[async_trait::async_trait]
impl ChannelSender for PushClient {
    async fn send(&self, o: &Outgoing) -> Option<SendResult> {
        let body = push_body(&o.to, &o.text, &o.buttons);
        let request = self.http.post(&self.push_url).bearer_auth(&self.access_token);
        // The row's id: every attempt at one reply is the same request to LINE.
        let request = request.header(RETRY_KEY_HEADER, o.id.to_string()).json(&body);
        Some(send_with(request, classify).await)
    }
}

/// The push client, once `line.channel_access_token` is set.
pub fn sender_from(config: &Config, timeout: Duration) -> Built {
    let line = &config.line;
    with_token(&line.channel_access_token, |token| PushClient::new(&line.api_base, token, timeout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buttons_become_quick_reply_postbacks_with_their_ids_as_data() {
        let buttons = Button::yes_and_no();
        let body = push_body("U206d25c2ea6bd87c17655609a1c37cb8", "Refund?", &buttons);
        assert_eq!(body["to"], "U206d25c2ea6bd87c17655609a1c37cb8");
        let items = &body["messages"][0]["quickReply"]["items"];
        let no = json!({"type": "action",
            "action": {"type": "postback", "label": "No", "data": "cg:no:n", "displayText": "No"}});
        assert_eq!(items[1], no);
        let plain = push_body("Ca56f94637cc4347f90a25382909b24b9", "Done", &[]);
        assert_eq!(plain["messages"], json!([{"type": "text", "text": "Done"}]));
    }

    #[test]
    fn answers_are_classified_and_a_retry_of_an_accepted_push_is_sent() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let ok = r#"{"sentMessages":[{"id":"461230966842064897","quoteToken":"IStG5h1Tz7b"}]}"#;
        let sent = SendResult::Sent { id: "461230966842064897".into() };
        assert_eq!(classify(StatusCode::OK, None, ok, now), sent);
        let accepted = r#"{"message":"The retry key is already accepted",
            "sentMessages":[{"id":"461230966842064897","quoteToken":"IStG5h1Tz7b"}]}"#;
        assert_eq!(classify(StatusCode::CONFLICT, None, accepted, now), sent);
        let busy = r#"{"message":"Too Many Requests"}"#;
        assert!(matches!(classify(StatusCode::TOO_MANY_REQUESTS, None, busy, now), SendResult::Retry { .. }));
        let invalid = r#"{"message":"The request body has 1 error(s)","details":[{"message":"May not be empty",
            "property":"messages[0].text"}]}"#;
        assert!(matches!(
            classify(StatusCode::BAD_REQUEST, None, invalid, now),
            SendResult::Refused { status: 400, .. }
        ));
        let conflict = r#"{"message":"The retry key is already accepted"}"#;
        assert!(matches!(classify(StatusCode::CONFLICT, None, conflict, now), SendResult::Refused { status: 409, .. }));
        assert!(matches!(classify(StatusCode::OK, None, "{}", now), SendResult::Retry { .. }));
        assert!(matches!(classify(StatusCode::BAD_GATEWAY, None, "", now), SendResult::Retry { .. }));
    }
}
