//! Slack's `chat.postMessage` (`POST {api_base}/chat.postMessage`, the bot token as a bearer):
//! a reply in the thread of what the person wrote (`thread_ts`), its buttons as an `actions`
//! block (each button's `value` and `action_id` its id, which a tap sends back). What to send is
//! decided in `slack_body` (pure); the answer is classified in `classify` (pure): Slack answers
//! 200 with `{"ok": false, "error": ...}` for most refusals; 429 carries `Retry-After`.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::channels::outbound::{Built, ChannelSender, SendResult, error_of, not_sent, send_with, with_token};
use crate::config::Config;
use crate::domain::outbound::Capabilities;
use crate::service::replies::outgoing::{Button, Outgoing};

/// Slack's limits: a section block's text, buttons in an `actions` block as this gateway sends
/// them, a button's text.
pub const CAPABILITIES: Capabilities =
    Capabilities { max_text_chars: 3000, max_buttons: 5, max_button_title_chars: 75 };

/// Errors Slack answers with that mean "not now".
const RETRYABLE: &[&str] = &["ratelimited", "service_unavailable", "fatal_error", "internal_error", "request_timeout"];

/// The `chat.postMessage` arguments for a reply in `channel` (in `thread`, when given).
pub fn slack_body(channel: &str, thread: Option<&str>, text: &str, buttons: &[Button]) -> Value {
    let mut body = json!({"channel": channel, "text": text});
    if let Some(thread) = thread {
        body["thread_ts"] = thread.into();
    }
    if !buttons.is_empty() {
        let elements: Vec<Value> = buttons
            .iter()
            .map(|b| {
                let text = json!({"type": "plain_text", "text": b.title});
                json!({"type": "button", "text": text, "action_id": b.id, "value": b.id})
            })
            .collect();
        // `text` stays as the notification's and the fallback's text.
        body["blocks"] = json!([
            {"type": "section", "text": {"type": "plain_text", "text": text}},
            {"type": "actions", "elements": elements},
        ]);
    }
    body
}

/// Reads Slack's answer.
pub fn classify(status: StatusCode, retry_after: Option<&str>, body: &str, now: OffsetDateTime) -> SendResult {
    let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    if status.is_success() && parsed["ok"] == true {
        return match (parsed["channel"].as_str(), parsed["ts"].as_str()) {
            (Some(channel), Some(ts)) => SendResult::Sent { id: format!("{channel}:{ts}") },
            _ => SendResult::Retry { error: format!("{status} without a ts"), retry_after: None },
        };
    }
    let retryable = parsed["error"].as_str().is_some_and(|code| RETRYABLE.contains(&code));
    not_sent(status, error_of(&parsed, body), retryable, None, retry_after, now)
}

#[derive(Debug, Clone)]
pub struct SlackClient {
    http: reqwest::Client,
    post_url: String,
    token: String,
}

impl SlackClient {
    pub fn new(api_base: &str, bot_token: &str, timeout: Duration) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder().timeout(timeout).connect_timeout(timeout).build()?;
        let post_url = format!("{}/chat.postMessage", api_base.trim_end_matches('/'));
        Ok(Self { http, post_url, token: bot_token.to_owned() })
    }
}

#[async_trait::async_trait]
impl ChannelSender for SlackClient {
    async fn send(&self, o: &Outgoing) -> Option<SendResult> {
        let body = slack_body(&o.to, o.conversation.as_deref(), &o.text, &o.buttons);
        let request = self.http.post(&self.post_url).bearer_auth(&self.token).json(&body);
        Some(send_with(request, classify).await)
    }
}

/// The Web API client, once `slack.bot_token` is set.
pub fn sender_from(config: &Config, timeout: Duration) -> Built {
    let slack = &config.slack;
    with_token(&slack.bot_token, |token| SlackClient::new(&slack.api_base, token, timeout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_is_a_threaded_message_with_an_actions_block_of_its_buttons() {
        let buttons = [Button { id: "cg:yes:n".into(), title: "Yes".into() }];
        let body = slack_body("D0DM", Some("1.5"), "Refund?", &buttons);
        assert_eq!((body["channel"].as_str(), body["thread_ts"].as_str()), (Some("D0DM"), Some("1.5")));
        assert_eq!(body["blocks"][1]["elements"][0]["value"], "cg:yes:n");
        assert_eq!(body["blocks"][0]["text"]["text"], "Refund?");
        let plain = slack_body("C1", None, "Done", &[]);
        assert!(plain.get("blocks").is_none() && plain.get("thread_ts").is_none());
    }

    #[test]
    fn answers_are_classified_with_slacks_errors_and_retry_after() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let ok = r#"{"ok":true,"channel":"D0DM","ts":"1503435956.000247","message":{"text":"Done"}}"#;
        assert_eq!(classify(StatusCode::OK, None, ok, now), SendResult::Sent { id: "D0DM:1503435956.000247".into() });
        assert!(matches!(
            classify(StatusCode::TOO_MANY_REQUESTS, Some("30"), r#"{"ok":false,"error":"ratelimited"}"#, now),
            SendResult::Retry { retry_after: Some(d), .. } if d == Duration::from_secs(30)
        ));
        let gone = r#"{"ok":false,"error":"channel_not_found"}"#;
        assert!(matches!(classify(StatusCode::OK, None, gone, now), SendResult::Refused { status: 200, .. }));
        let busy = r#"{"ok":false,"error":"service_unavailable"}"#;
        assert!(matches!(classify(StatusCode::OK, None, busy, now), SendResult::Retry { .. }));
    }
}
