//! Replies to people who wrote through a Standard Webhooks source (`[standard_webhooks.NAME.message]`):
//! a JSON POST to the source's `reply_url`, signed with its first secret the same way the source
//! signs to us, with the outbox row's id as `webhook-id` so that the receiver can drop a retry.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use time::OffsetDateTime;

use reqwest::StatusCode;

use crate::channels::outbound::ChannelSender;
use crate::channels::outbound::SendResult;
use crate::channels::outbound::send_with;
use crate::channels::outbound::transient;
use crate::channels::outbound::truncate;
use crate::config::Config;
use crate::domain::retry::parse_retry_after;
use crate::domain::standard_webhooks;
use crate::service::replies::outgoing::Outgoing;

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
                let key = source.secrets.first().and_then(|s| standard_webhooks::key(s.expose()).ok());
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
        let body = body.to_string().into_bytes();
        let headers = standard_webhooks::headers(destination.key.as_deref(), reply.id, now.unix_timestamp(), &body);
        let request =
            headers.into_iter().fold(request, |request, (name, value)| request.header(name, value)).body(body);
        let id = reply.id.to_owned();
        Some(send_with(request, |status, retry_after, text, now| classify(status, retry_after, text, now, id)).await)
    }
}

#[async_trait::async_trait]
impl ChannelSender for StandardReplies {
    async fn send(&self, o: &Outgoing) -> Option<SendResult> {
        let reply = Reply {
            id: &o.id.to_string(),
            source: &o.from,
            to: &o.to,
            conversation: o.conversation.as_deref(),
            in_reply_to: o.in_reply_to.as_deref(),
            text: &o.text,
        };
        StandardReplies::send(self, &reply).await
    }
}

/// The replies to every source with a `reply_url`.
pub fn sender_from(config: &Config, timeout: Duration) -> Result<Option<Arc<dyn ChannelSender>>, reqwest::Error> {
    Ok(StandardReplies::from_config(config, timeout)?.map(|replies| Arc::new(replies) as Arc<dyn ChannelSender>))
}

/// Any 2xx is taken (the reply's id is ours); 5xx, 429 and 408 are worth another attempt.
fn classify(status: StatusCode, retry_after: Option<&str>, body: &str, now: OffsetDateTime, id: String) -> SendResult {
    if status.is_success() {
        SendResult::Sent { id }
    } else if transient(status) {
        let retry_after = retry_after.and_then(|v| parse_retry_after(v, now));
        SendResult::Retry { error: format!("{status}: {}", truncate(body, 500)), retry_after }
    } else {
        SendResult::Refused { status: status.as_u16(), error: json!({"body": truncate(body, 500)}) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_2xx_is_sent_with_our_id_5xx_and_429_are_retried_and_other_4xx_refused() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let sent = classify(StatusCode::NO_CONTENT, None, "", now, "r1".into());
        assert_eq!(sent, SendResult::Sent { id: "r1".into() });
        assert!(matches!(classify(StatusCode::BAD_GATEWAY, None, "", now, "r1".into()), SendResult::Retry { .. }));
        assert!(matches!(
            classify(StatusCode::TOO_MANY_REQUESTS, Some("4"), "", now, "r1".into()),
            SendResult::Retry { retry_after: Some(d), .. } if d == Duration::from_secs(4)
        ));
        match classify(StatusCode::GONE, None, "no such conversation", now, "r1".into()) {
            SendResult::Refused { status, error } => {
                assert_eq!((status, error["body"].as_str()), (410, Some("no such conversation")))
            }
            other => panic!("{other:?}"),
        }
    }
}
