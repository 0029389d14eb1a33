//! The Bot API's `sendMessage` (`POST {api_base}/bot{token}/sendMessage`): a reply's text, its
//! buttons as an inline keyboard (each button's `callback_data` is its id, which comes back in
//! the `callback_query` of a tap). What to send is decided in `telegram_body` (pure); the answer
//! is classified in `classify` (pure): `{"ok": true, "result": Message}` is sent; a 429 or any
//! answer with `parameters.retry_after` is tried again after that many seconds; 5xx, 408 too;
//! any other refusal is final.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::channels::outbound::{Built, ChannelSender, SendResult, error_of, not_sent, send_with, with_token};
use crate::config::Config;
use crate::domain::outbound::Capabilities;
use crate::service::replies::outgoing::{Button, Outgoing};

/// Telegram's limits: a message's text (after entities), an inline keyboard's buttons as this
/// gateway lays them out (one row), a button's text as shown on a phone.
pub const CAPABILITIES: Capabilities =
    Capabilities { max_text_chars: 4096, max_buttons: 8, max_button_title_chars: 64 };

/// The `sendMessage` parameters for a message to `chat_id`; the buttons in one row.
pub fn telegram_body(chat_id: &str, text: &str, buttons: &[Button]) -> Value {
    // A private chat's id is a number; a public channel's may be `@name`.
    let chat: Value = chat_id.parse::<i64>().map_or_else(|_| chat_id.into(), Value::from);
    let mut body = json!({"chat_id": chat, "text": text});
    if !buttons.is_empty() {
        let row: Vec<Value> = buttons.iter().map(|b| json!({"text": b.title, "callback_data": b.id})).collect();
        body["reply_markup"] = json!({"inline_keyboard": [row]});
    }
    body
}

/// Reads the Bot API's answer.
pub fn classify(status: StatusCode, retry_after: Option<&str>, body: &str, now: OffsetDateTime) -> SendResult {
    let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    if status.is_success() && parsed["ok"] == true {
        let (chat, id) = (&parsed["result"]["chat"]["id"], &parsed["result"]["message_id"]);
        return match id.as_i64() {
            Some(id) => SendResult::Sent { id: format!("{chat}:{id}") },
            None => SendResult::Retry { error: format!("{status} without a message_id"), retry_after: None },
        };
    }
    // core.telegram.org/bots/api#responseparameters: `retry_after`, the seconds to wait.
    let told = parsed["parameters"]["retry_after"].as_u64().map(Duration::from_secs);
    not_sent(status, error_of(&parsed, body), false, told, retry_after, now)
}

#[derive(Debug, Clone)]
pub struct BotClient {
    http: reqwest::Client,
    send_url: String,
}

impl BotClient {
    pub fn new(api_base: &str, bot_token: &str, timeout: Duration) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder().timeout(timeout).connect_timeout(timeout).build()?;
        let send_url = format!("{}/bot{bot_token}/sendMessage", api_base.trim_end_matches('/'));
        Ok(Self { http, send_url })
    }
}

#[async_trait::async_trait]
impl ChannelSender for BotClient {
    async fn send(&self, o: &Outgoing) -> Option<SendResult> {
        let body = telegram_body(&o.to, &o.text, &o.buttons);
        Some(send_with(self.http.post(&self.send_url).json(&body), classify).await)
    }
}

/// The Bot API client, once `telegram.bot_token` is set.
pub fn sender_from(config: &Config, timeout: Duration) -> Built {
    let telegram = &config.telegram;
    with_token(&telegram.bot_token, |token| BotClient::new(&telegram.api_base, token, timeout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buttons_become_one_row_of_an_inline_keyboard_with_their_ids_as_callback_data() {
        let buttons = Button::yes_and_no();
        let body = telegram_body("700000001", "Refund?", &buttons);
        assert_eq!(body["chat_id"], 700000001);
        assert_eq!(body["reply_markup"]["inline_keyboard"][0][1], json!({"text": "No", "callback_data": "cg:no:n"}));
        let plain = telegram_body("@channel", "Done", &[]);
        assert_eq!((plain["chat_id"].as_str(), plain.get("reply_markup")), (Some("@channel"), None));
    }

    #[test]
    fn answers_are_classified_with_telegrams_retry_after() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let ok = r#"{"ok":true,"result":{"message_id":43,"chat":{"id":700000001,"type":"private"},"date":1}}"#;
        assert_eq!(classify(StatusCode::OK, None, ok, now), SendResult::Sent { id: "700000001:43".into() });
        // core.telegram.org/bots/api#responseparameters: `retry_after`, seconds to wait.
        let flood = r#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 7",
            "parameters":{"retry_after":7}}"#;
        assert!(matches!(
            classify(StatusCode::TOO_MANY_REQUESTS, None, flood, now),
            SendResult::Retry { retry_after: Some(d), .. } if d == Duration::from_secs(7)
        ));
        let blocked = r#"{"ok":false,"error_code":403,"description":"Forbidden: bot was blocked by the user"}"#;
        assert!(matches!(classify(StatusCode::FORBIDDEN, None, blocked, now), SendResult::Refused { status: 403, .. }));
        assert!(matches!(
            classify(StatusCode::BAD_GATEWAY, None, "", now),
            SendResult::Retry { retry_after: None, .. }
        ));
    }
}
