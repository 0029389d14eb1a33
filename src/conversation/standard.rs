//! Replies to people who wrote through a Standard Webhooks source (`[standard_webhooks.NAME.message]`):
//! a JSON POST to the source's `reply_url`, signed with its first secret the same way the source
//! signs to us, with the outbox row's id as `webhook-id` so that the receiver can drop a retry.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;
use time::OffsetDateTime;

use super::graph::{SendResult, transient, truncate};
use crate::config::Config;
use crate::delivery::backoff::parse_retry_after;
use crate::delivery::executor::{signed, standard_webhooks_key};

/// What a reply is sent with: where, and the key it is signed with.
#[derive(Debug, Clone)]
struct Destination {
    url: String,
    key: Option<Vec<u8>>,
}

#[derive(Debug, Clone)]
pub struct StandardReplies {
    http: reqwest::Client,
    sources: BTreeMap<String, Destination>,
}

/// One reply, as the source's system receives it.
pub struct Reply<'a> {
    pub id: &'a str,
    pub source: &'a str,
    pub to: &'a str,
    pub conversation: Option<&'a str>,
    pub in_reply_to: Option<&'a str>,
    pub text: &'a str,
}

impl StandardReplies {
    /// The sources that take replies; `None` when none does.
    pub fn from_config(config: &Config, timeout: Duration) -> Result<Option<Self>, reqwest::Error> {
        let sources: BTreeMap<String, Destination> = config
            .standard_webhooks
            .iter()
            .filter_map(|(name, source)| {
                let url = source.message.as_ref()?.reply_url.clone()?;
                let key = source.secrets.first().and_then(|s| standard_webhooks_key(s.expose()).ok());
                Some((name.clone(), Destination { url, key }))
            })
            .collect();
        if sources.is_empty() {
            return Ok(None);
        }
        let http = reqwest::Client::builder().timeout(timeout).connect_timeout(timeout).build()?;
        Ok(Some(Self { http, sources }))
    }

    /// `None` when the source takes no replies.
    pub async fn send(&self, reply: &Reply<'_>) -> Option<SendResult> {
        let destination = self.sources.get(reply.source)?;
        let body = json!({
            "type": "message.reply",
            "source": reply.source,
            "to": reply.to,
            "conversation": reply.conversation,
            "in_reply_to": reply.in_reply_to,
            "text": reply.text,
        });
        let now = OffsetDateTime::now_utc();
        let request = self.http.post(&destination.url).header(reqwest::header::CONTENT_TYPE, "application/json");
        let request = signed(request, destination.key.as_deref(), reply.id, now, body.to_string().into_bytes());
        let response = match request.send().await {
            Ok(response) => response,
            Err(error) => return Some(SendResult::Retry { error: format!("network: {error}"), retry_after: None }),
        };
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, now));
        let text = response.text().await.unwrap_or_default();
        Some(if status.is_success() {
            SendResult::Sent { id: reply.id.to_owned() }
        } else if transient(status) {
            SendResult::Retry { error: format!("{status}: {}", truncate(&text, 500)), retry_after }
        } else {
            SendResult::Refused { status: status.as_u16(), error: json!({"body": truncate(&text, 500)}) }
        })
    }
}
