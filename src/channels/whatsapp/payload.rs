//! The WhatsApp Cloud API webhook payload, parsed whole before anything is stored: a delivery
//! that does not parse stores nothing.

use serde::Deserialize;
use serde_json::Value;

use crate::domain::command::Channel;

use crate::domain::command::ExternalId;
use crate::domain::message::Content;
use crate::domain::message::InboundMessage;
use crate::domain::message::StatusUpdate;

/// One webhook delivery: every message and status of every entry and change.
#[derive(Debug, Default, PartialEq)]
pub struct Delivery {
    pub messages: Vec<InboundMessage>,
    pub statuses: Vec<StatusUpdate>,
    /// Changes of other fields (account updates, templates, ...): acknowledged, not handled.
    pub other_changes: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("the body is not JSON: {0}")]
    NotJson(String),
    #[error("not a WhatsApp Business Account notification (object `{0}`)")]
    WrongObject(String),
    #[error("{0}")]
    Invalid(String),
}

#[derive(Deserialize)]
struct Notification {
    object: String,
    #[serde(default)]
    entry: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    changes: Vec<Change>,
}

#[derive(Deserialize)]
struct Change {
    field: String,
    #[serde(default)]
    value: Value,
}

#[derive(Deserialize)]
struct MessagesValue {
    metadata: Metadata,
    #[serde(default)]
    contacts: Vec<Contact>,
    #[serde(default)]
    messages: Vec<Value>,
    #[serde(default)]
    statuses: Vec<Status>,
}

#[derive(Deserialize)]
struct Metadata {
    phone_number_id: String,
}

/// A sender as Meta names them: by phone (`wa_id`) and, since business-scoped user ids, by
/// `user_id` too — or by `user_id` alone.
#[derive(Deserialize)]
struct Contact {
    wa_id: Option<String>,
    user_id: Option<String>,
    profile: Option<Profile>,
}

#[derive(Deserialize)]
struct Profile {
    name: Option<String>,
}

#[derive(Deserialize)]
struct Status {
    id: String,
    status: String,
    recipient_id: Option<String>,
    errors: Option<Value>,
}

/// The fields of a message this gateway reads; the rest stays in `raw`.
#[derive(Deserialize)]
struct Message {
    id: String,
    /// The sender's phone (`wa_id`); a business-scoped user may come with `from_user_id` only.
    from: Option<String>,
    from_user_id: Option<String>,
    /// Why Meta could not deliver the message's content (an `unsupported` or broken message).
    errors: Option<Value>,
    timestamp: Option<String>,
    #[serde(rename = "type")]
    kind: String,
    context: Option<Context>,
    text: Option<Text>,
    interactive: Option<Interactive>,
    button: Option<Button>,
    reaction: Option<Reaction>,
}

#[derive(Deserialize)]
struct Context {
    id: Option<String>,
}

#[derive(Deserialize)]
struct Text {
    body: String,
}

#[derive(Deserialize)]
struct Interactive {
    button_reply: Option<ReplyRow>,
    list_reply: Option<ReplyRow>,
}

#[derive(Deserialize)]
struct ReplyRow {
    id: String,
    #[serde(default)]
    title: String,
}

#[derive(Deserialize)]
struct Button {
    payload: Option<String>,
    #[serde(default)]
    text: String,
}

#[derive(Deserialize)]
struct Reaction {
    message_id: String,
    #[serde(default)]
    emoji: String,
}

const MEDIA: &[&str] = &["image", "audio", "video", "document", "sticker"];

pub fn parse(body: &[u8]) -> Result<Delivery, PayloadError> {
    let notification: Notification = serde_json::from_slice(body).map_err(|e| PayloadError::NotJson(e.to_string()))?;
    if notification.object != "whatsapp_business_account" {
        return Err(PayloadError::WrongObject(notification.object));
    }
    let channel = Channel::parse("whatsapp").map_err(|e| PayloadError::Invalid(e.to_string()))?;
    let mut delivery = Delivery::default();
    for (e, entry) in notification.entry.into_iter().enumerate() {
        for (c, change) in entry.changes.into_iter().enumerate() {
            if change.field != "messages" {
                delivery.other_changes += 1;
                continue;
            }
            let at = format!("entry[{e}].changes[{c}].value");
            let value: MessagesValue =
                serde_json::from_value(change.value).map_err(|err| PayloadError::Invalid(format!("{at}: {err}")))?;
            let to = value.metadata.phone_number_id;
            for (m, raw) in value.messages.into_iter().enumerate() {
                let message = message(&channel, &to, &value.contacts, raw)
                    .map_err(|err| PayloadError::Invalid(format!("{at}.messages[{m}]: {err}")))?;
                delivery.messages.push(message);
            }
            for status in value.statuses {
                delivery.statuses.push(StatusUpdate {
                    channel: channel.clone(),
                    provider_message_id: status.id,
                    status: status.status,
                    recipient: status.recipient_id,
                    errors: status.errors,
                });
            }
        }
    }
    Ok(delivery)
}

/// One message as stored (the `messages[]` item Meta sent), read again; `to` is the business
/// number it went to.
pub fn read_stored(raw: &Value, to: &str) -> Result<InboundMessage, String> {
    let channel = Channel::parse("whatsapp").map_err(|e| e.to_string())?;
    message(&channel, to, &[], raw.clone())
}

fn message(channel: &Channel, to: &str, contacts: &[Contact], raw: Value) -> Result<InboundMessage, String> {
    let m: Message = serde_json::from_value(raw.clone()).map_err(|e| e.to_string())?;
    let provider_message_id = ExternalId::parse(&m.id).map_err(|e| format!("id: {e}"))?;
    let present = |v: &Option<String>| v.as_deref().map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned);
    let from = present(&m.from)
        .or_else(|| present(&m.from_user_id))
        .or_else(|| system_subject(&m, &raw))
        .ok_or("neither `from` nor `from_user_id`")?;
    let content = content_of(&m, &raw);
    let named = |c: &&Contact| c.wa_id.as_deref() == Some(from.as_str()) || c.user_id.as_deref() == Some(&from);
    let sender_name = contacts.iter().find(named).and_then(|c| c.profile.as_ref()).and_then(|p| p.name.clone());
    Ok(InboundMessage {
        channel: channel.clone(),
        provider_message_id,
        to: to.to_owned(),
        from,
        sender_name,
        sent_at: m.timestamp.as_deref().and_then(|t| t.parse().ok()),
        content,
        in_reply_to: m.context.as_ref().and_then(|c| c.id.clone()),
        raw,
        addresses: None,
        answered_inline: None,
    })
}

/// Whom a `system` message without a sender is about: Meta announces a changed business-scoped
/// user id with the ids in `system` and no `from` at all.
fn system_subject(m: &Message, raw: &Value) -> Option<String> {
    let system = raw.get("system").filter(|_| m.kind == "system")?;
    ["previous_user_id", "user_id", "wa_id"]
        .iter()
        .find_map(|key| system.get(key).and_then(Value::as_str).map(str::trim).filter(|id| !id.is_empty()))
        .map(str::to_owned)
}

/// What a message says. One whose kind-specific object is missing (Meta sends an `interactive`
/// with `errors` and nothing else) is unreadable, kept with its errors: never a reason to refuse
/// the delivery it came in.
fn content_of(m: &Message, raw: &Value) -> Content {
    let read = match m.kind.as_str() {
        "text" => m.text.as_ref().map(|t| Content::Text(t.body.clone())),
        "interactive" => m.interactive.as_ref().map(|i| match i.button_reply.as_ref().or(i.list_reply.as_ref()) {
            Some(row) => Content::Reply { id: row.id.clone(), title: row.title.clone() },
            // Other interactive replies (flows, ...) are kept, not interpreted.
            None => Content::Unsupported { kind: "interactive".into() },
        }),
        "button" => m
            .button
            .as_ref()
            .map(|b| Content::Reply { id: b.payload.clone().unwrap_or_else(|| b.text.clone()), title: b.text.clone() }),
        "reaction" => {
            m.reaction.as_ref().map(|r| Content::Reaction { emoji: r.emoji.clone(), to_message: r.message_id.clone() })
        }
        kind if MEDIA.contains(&kind) => {
            let caption =
                raw.get(kind).and_then(|media| media.get("caption")).and_then(Value::as_str).map(str::to_owned);
            Some(Content::Media { kind: kind.to_owned(), caption })
        }
        "location" => Some(Content::Location),
        "contacts" => Some(Content::Contacts),
        // Not something the person asked: a number or identity change, a deleted or edited message.
        kind @ ("system" | "revoke" | "edit") => Some(Content::Notice { kind: kind.to_owned() }),
        other => Some(Content::Unsupported { kind: other.to_owned() }),
    };
    read.unwrap_or_else(|| Content::Unreadable { kind: m.kind.clone(), errors: m.errors.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn notification(messages: Value, statuses: Value) -> Vec<u8> {
        json!({
            "object": "whatsapp_business_account",
            "entry": [{"id": "WABA", "changes": [{"field": "messages", "value": {
                "messaging_product": "whatsapp",
                "metadata": {"display_phone_number": "15550001000", "phone_number_id": "100000000000001"},
                "contacts": [{"wa_id": "15550000001", "profile": {"name": "Ana"}}],
                "messages": messages,
                "statuses": statuses,
            }}]}]
        })
        .to_string()
        .into_bytes()
    }

    fn msg(kind: &str, body: Value) -> Value {
        let mut m =
            json!({"id": format!("wamid.{kind}"), "from": "15550000001", "timestamp": "1700000000", "type": kind});
        if !body.is_null() {
            m[kind] = body;
        }
        m
    }

    #[test]
    fn every_message_type_is_parsed() {
        let messages = json!([
            msg("text", json!({"body": "refund 1234 25.00"})),
            msg("interactive", json!({"type": "button_reply", "button_reply": {"id": "yes:ABC", "title": "Yes"}})),
            msg(
                "interactive",
                json!({"type": "list_reply", "list_reply": {"id": "order_status:9", "title": "Status"}})
            ),
            msg("button", json!({"payload": "order_status:7", "text": "Status"})),
            msg("reaction", json!({"message_id": "wamid.X", "emoji": "👍"})),
            msg("image", json!({"id": "media1", "mime_type": "image/jpeg", "caption": "receipt"})),
            msg("audio", json!({"id": "media2"})),
            msg("video", json!({"id": "media3"})),
            msg("document", json!({"id": "media4", "filename": "a.pdf"})),
            msg("sticker", json!({"id": "media5"})),
            msg("location", json!({"latitude": 1.0, "longitude": 2.0})),
            msg("contacts", json!([{"name": {"formatted_name": "B"}}])),
            msg("hologram", json!({"depth": 3})),
        ]);
        let delivery = parse(&notification(messages, json!([]))).expect("parses");
        let kinds: Vec<&str> = delivery.messages.iter().map(|m| m.content.kind()).collect();
        assert_eq!(
            kinds,
            [
                "text", "reply", "reply", "reply", "reaction", "image", "audio", "video", "document", "sticker",
                "location", "contacts", "hologram"
            ]
        );
        let first = &delivery.messages[0];
        assert_eq!(first.content, Content::Text("refund 1234 25.00".into()));
        assert_eq!((first.to.as_str(), first.from.as_str()), ("100000000000001", "15550000001"));
        assert_eq!(first.sender_name.as_deref(), Some("Ana"));
        assert_eq!(first.sent_at, Some(1_700_000_000));
        assert_eq!(
            delivery.messages[3].content,
            Content::Reply { id: "order_status:7".into(), title: "Status".into() }
        );
        assert_eq!(
            delivery.messages[5].content,
            Content::Media { kind: "image".into(), caption: Some("receipt".into()) }
        );
    }

    #[test]
    fn statuses_and_other_fields_are_collected() {
        let statuses = json!([
            {"id": "wamid.OUT1", "status": "delivered", "timestamp": "1", "recipient_id": "15550000001"},
            {"id": "wamid.OUT2", "status": "failed", "timestamp": "2", "recipient_id": "15550000001",
             "errors": [{"code": 131047, "title": "Re-engagement message"}]},
        ]);
        let delivery = parse(&notification(json!([]), statuses)).expect("parses");
        assert_eq!(delivery.statuses.len(), 2);
        assert_eq!(delivery.statuses[1].errors.as_ref().map(|e| e[0]["code"].clone()), Some(json!(131047)));
        let change = json!({"field": "account_update", "value": {}});
        let other = json!({"object": "whatsapp_business_account", "entry": [{"changes": [change]}]});
        assert_eq!(parse(other.to_string().as_bytes()).expect("parses").other_changes, 1);
    }

    #[test]
    fn malformed_deliveries_are_refused_whole() {
        assert!(matches!(parse(b""), Err(PayloadError::NotJson(_))));
        assert!(matches!(parse(b"{\"object\":"), Err(PayloadError::NotJson(_))));
        assert!(matches!(parse(b"[1,2]"), Err(PayloadError::NotJson(_))));
        assert!(matches!(parse(br#"{"object":"page","entry":[]}"#), Err(PayloadError::WrongObject(_))));
        let nested = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(matches!(parse(nested.as_bytes()), Err(PayloadError::NotJson(_))));
        let no_id = notification(json!([{"from": "1", "type": "text", "text": {"body": "x"}}]), json!([]));
        assert!(matches!(parse(&no_id), Err(PayloadError::Invalid(e)) if e.contains("messages[0]")));
        let no_sender = notification(json!([{"id": "w1", "type": "text", "text": {"body": "x"}}]), json!([]));
        assert!(matches!(parse(&no_sender), Err(PayloadError::Invalid(e)) if e.contains("from_user_id")));
    }

    #[test]
    fn a_message_without_its_content_is_unreadable_not_a_refused_delivery() {
        let errors = json!([{"code": 131051, "title": "Message type unknown"}]);
        let body = notification(
            json!([
                {"id": "w1", "from": "1", "type": "text"},
                {"id": "w2", "from": "1", "type": "interactive", "errors": errors},
                {"id": "w3", "from_user_id": "US.1", "type": "edit", "edit": {}},
            ]),
            json!([]),
        );
        let delivery = parse(&body).expect("a delivery");
        let contents: Vec<&Content> = delivery.messages.iter().map(|m| &m.content).collect();
        assert_eq!(contents[0], &Content::Unreadable { kind: "text".into(), errors: None });
        assert_eq!(contents[1], &Content::Unreadable { kind: "interactive".into(), errors: Some(errors) });
        assert_eq!(contents[2], &Content::Notice { kind: "edit".into() });
        assert_eq!(delivery.messages[2].from, "US.1");
    }
}
