//! Standard Webhooks senders (`POST /webhooks/standard/{source}`): the signature is checked over
//! `{webhook-id}.{webhook-timestamp}.{body}` with any of the source's `whsec_` secrets (several
//! during a rotation) against any `v1,` entry of `webhook-signature`; a timestamp outside the
//! tolerance is refused; `webhook-id` is the transport dedupe key. Each delivery becomes a
//! command for the source's agent, or, for a source with a `message` mapping, a chat message
//! that the ingress handles like a WhatsApp one (confirmation, replies to the source's
//! `reply_url`).

pub mod client;

use axum::http::HeaderMap;
use serde_json::{Map, Value};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::channels::hooks::{Submission, Unkeyed, submit};
use crate::channels::{ChannelEntry, ChannelError, Posted, Refusal};
use crate::config::Config;
use crate::config::{StandardMessage, StandardSource};
use crate::domain::command::Channel;
use crate::domain::command::ExternalId;
use crate::domain::command::Intent;
use crate::domain::command::TenantId;
use crate::domain::message::Addresses;
use crate::domain::message::Content;
use crate::domain::message::InboundMessage;
use crate::domain::message::InboundStatus;
use crate::domain::outbound::Capabilities;
use crate::domain::standard_webhooks::{self, Signed};
use crate::service::intake::Ingress;
use crate::service::intake::NewInbound;
use crate::service::intake::{Arrival, Handled, MessageOutcome, Wait};

/// A sender's event: a JSON object (the Standard Webhooks specification suggests `type`,
/// `timestamp` and `data`), of which the source's configuration says what is read (its `args`'
/// JSON pointers, or its `message` mapping).
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[schema(as = StandardWebhookEvent)]
#[serde(transparent)]
#[schema(value_type = Object)]
pub struct SenderEvent(pub Map<String, Value>);

/// What a delivery came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Delivered {
    /// A `message` source's delivery, handled as a chat message.
    Handled { outcome: MessageOutcome, command_id: Option<Uuid> },
    /// A command for the source's agent, accepted.
    Accepted(Uuid),
}

/// A delivery from source `name`: checked against its secrets, then a chat message or a command.
pub async fn receive(
    ingress: &Ingress,
    config: &Config,
    name: &str,
    Posted { headers, body, .. }: Posted<'_>,
) -> Result<Delivered, ChannelError> {
    let Some(source) = config.standard_webhooks.get(name) else {
        return Err(Refusal::not_configured(format!("No source `{name}`.")).into());
    };
    let secrets = source.secrets.iter().map(|s| s.expose());
    let now = OffsetDateTime::now_utc();
    let id = standard_webhooks::verify(secrets, source.tolerance_secs, signed(headers), body, now.unix_timestamp())?;
    let bad = |detail: String| -> ChannelError { Refusal::bad_request("invalid_payload", detail).into() };
    let payload = crate::channels::body::json(body).map_err(|e| bad(format!("The body is not JSON: {e}")))?;
    let SenderEvent(event) = crate::channels::body::envelope(&payload).map_err(bad)?;
    let payload = Value::Object(event);
    if let Some(mapping) = &source.message {
        let message = chat_message(name, &id, mapping, &payload).map_err(bad)?;
        let delivered = store_message(ingress, message).await?;
        metrics::counter!("chatgate_webhooks_total", "channel" => "standard", "outcome" => "accepted").increment(1);
        return Ok(delivered);
    }
    let command_id = submit(ingress, headers, command(name, &id, source, payload)?).await?.command_id();
    metrics::counter!("chatgate_webhooks_total", "channel" => "standard", "outcome" => "accepted").increment(1);
    Ok(Delivered::Accepted(command_id))
}

/// A `message` source's delivery stored in the inbox; what it came to when `ingest.acknowledge`
/// waits for its admission, else `accepted` (or `redelivered`: stored before).
async fn store_message(ingress: &Ingress, message: InboundMessage) -> Result<Delivered, ChannelError> {
    let arrivals = ingress.arrive(std::slice::from_ref(&message), Wait::AsConfigured).await?;
    let handled = match arrivals.into_iter().next() {
        Some(Arrival::Admitted(handled)) => handled,
        Some(Arrival::Pending) => {
            return Ok(Delivered::Handled { outcome: MessageOutcome::Accepted, command_id: None });
        }
        Some(Arrival::Redelivered) | None => Handled::Redelivered,
    };
    let command_id = match &handled {
        Handled::Command { command_id, .. } => Some(*command_id),
        _ => None,
    };
    Ok(Delivered::Handled { outcome: handled.outcome(), command_id })
}

/// The three Standard Webhooks headers of a request.
pub fn signed(headers: &HeaderMap) -> Signed<'_> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    Signed { id: header("webhook-id"), timestamp: header("webhook-timestamp"), signature: header("webhook-signature") }
}

/// A delivery of a command source as the submission of a command for its agent.
fn command(name: &str, id: &str, source: &StandardSource, payload: Value) -> Result<Submission, ChannelError> {
    let bad = |detail: String| -> ChannelError { Refusal::bad_request("invalid_payload", detail).into() };
    let mut args = Map::new();
    for (arg, pointer) in &source.args {
        match payload.pointer(pointer) {
            Some(value @ (Value::String(_) | Value::Number(_) | Value::Bool(_))) => {
                args.insert(arg.clone(), value.clone());
            }
            _ => return Err(bad(format!("`{pointer}` is required (a string, a number or a boolean)"))),
        }
    }
    let provider_message_id = message_id(name, id).map_err(bad)?;
    let intent = Intent::parse(&source.entity, &source.action, None).map_err(|e| bad(e.to_string()))?;
    let (Ok(channel), Ok(tenant)) = (Channel::parse(CHANNEL), TenantId::parse(&source.tenant)) else {
        return Err(ChannelError::Misconfigured("a Standard Webhooks source's tenant"));
    };
    let message = NewInbound {
        channel,
        provider_message_id,
        tenant_id: Some(tenant),
        status: InboundStatus::Received,
        payload,
        detail: None,
        received_at: OffsetDateTime::now_utc(),
    };
    Ok(Submission {
        tenant: source.tenant.clone(),
        actor: source.actor.clone(),
        channel: "standard",
        conversation: format!("standard:{name}"),
        agent: source.agent.clone(),
        intent,
        args,
        dedupe_window: std::time::Duration::from_secs(86_400),
        authorized_by: "standard webhooks signature",
        message: Some(message),
        key: None,
        header_key: true,
        // The same event under another `webhook-id` is the same command.
        unkeyed: Unkeyed::Derived,
        decision: serde_json::Map::new(),
    })
}

/// The channel of everything a Standard Webhooks source sends.
const CHANNEL: &str = "standard";

/// The transport dedupe key of a delivery: its `webhook-id`, within its source.
fn message_id(source: &str, webhook_id: &str) -> Result<ExternalId, String> {
    ExternalId::parse(&format!("{source}:{webhook_id}")).map_err(|_| "webhook-id is visible ASCII".to_owned())
}

/// A delivery of a `message` source as a chat message: sender and text (and optionally a name
/// and the sender system's conversation) read from the payload; replies go back to the source.
/// What is stored (`raw`) keeps what was read with the payload, so that `reread` can build the
/// same message again whatever the source's mapping has become.
pub fn chat_message(
    source: &str,
    webhook_id: &str,
    mapping: &StandardMessage,
    payload: &Value,
) -> Result<InboundMessage, String> {
    let text_at = |pointer: &str| match payload.pointer(pointer) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_owned()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        _ => Err(format!("`{pointer}` is required (a non-empty string)")),
    };
    let optional = |pointer: &Option<String>| pointer.as_deref().and_then(|p| text_at(p).ok());
    let read = ReadMessage {
        source: source.to_owned(),
        webhook_id: webhook_id.to_owned(),
        number: mapping.number.clone(),
        from: text_at(&mapping.from)?,
        text: text_at(&mapping.text)?,
        conversation: optional(&mapping.conversation),
        name: optional(&mapping.name),
        payload: payload.clone(),
    };
    read.into_message()
}

/// Standard Webhooks sources in the gateway's list of channels (`channels::CHANNELS`): a reply
/// is JSON to the source's `reply_url`, text only, as long as it is.
pub const ENTRY: ChannelEntry = ChannelEntry {
    name: CHANNEL,
    capabilities: Capabilities { max_text_chars: usize::MAX, max_buttons: 0, max_button_title_chars: 0 },
    reread: |raw, _| reread(raw),
    sender: client::sender_from,
};

/// A stored `message`-source delivery read again (reprocessing a command it started).
pub fn reread(raw: &Value) -> Option<InboundMessage> {
    serde_json::from_value::<ReadMessage>(raw.clone()).ok()?.into_message().ok()
}

/// What a `message` source's delivery said, as read with its mapping.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct ReadMessage {
    source: String,
    webhook_id: String,
    number: String,
    from: String,
    text: String,
    conversation: Option<String>,
    name: Option<String>,
    payload: Value,
}

impl ReadMessage {
    fn into_message(self) -> Result<InboundMessage, String> {
        Ok(InboundMessage {
            channel: Channel::parse(CHANNEL).map_err(|e| e.to_string())?,
            provider_message_id: message_id(&self.source, &self.webhook_id)?,
            to: self.number.clone(),
            from: self.from.clone(),
            sender_name: self.name.clone(),
            sent_at: None,
            content: Content::Text(self.text.clone()),
            in_reply_to: None,
            raw: serde_json::to_value(&self).map_err(|e| e.to_string())?,
            addresses: Some(Addresses { business: self.source, person: self.from, conversation: self.conversation }),
            answered_inline: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mapping() -> StandardMessage {
        StandardMessage {
            number: "100000000000001".into(),
            from: "/data/sender".into(),
            text: "/data/text".into(),
            conversation: Some("/data/thread".into()),
            name: None,
            reply_url: None,
        }
    }

    #[test]
    fn a_payload_becomes_a_chat_message_from_its_sender_to_the_sources_number() {
        let payload = json!({"data": {"sender": "15550000001", "text": " refund 1234 25.00 ", "thread": "t-9"}});
        let message = chat_message("chat", "msg_1", &mapping(), &payload).expect("a message");
        assert_eq!((message.to.as_str(), message.from.as_str()), ("100000000000001", "15550000001"));
        assert_eq!(message.content, Content::Text("refund 1234 25.00".into()));
        assert_eq!(message.provider_message_id.as_str(), "chat:msg_1");
        assert_eq!(message.raw["payload"], payload, "the delivery is kept with what was read from it");
        // Read again from what was stored, it is the same message.
        let again = reread(&message.raw).expect("read again");
        assert_eq!(again, message);
        let addresses = message.addresses.expect("addresses");
        assert_eq!((addresses.business.as_str(), addresses.conversation.as_deref()), ("chat", Some("t-9")));
        assert_eq!(reread(&json!({"data": {}})), None, "not a stored message-source delivery");
    }

    #[test]
    fn a_payload_without_sender_or_text_is_refused() {
        let no_text = json!({"data": {"sender": "15550000001"}});
        assert!(chat_message("chat", "msg_1", &mapping(), &no_text).unwrap_err().contains("/data/text"));
        let empty_sender = json!({"data": {"sender": "", "text": "hi"}});
        assert!(chat_message("chat", "msg_1", &mapping(), &empty_sender).is_err());
    }
}
