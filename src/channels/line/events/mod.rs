//! LINE's webhook body (developers.line.biz/en/reference/messaging-api/#webhooks), read leniently:
//! `destination`, the bot's user id (the address tenants are found by, `line_bots`), and
//! `events`, of which a `message` (its text, else what kind of thing it is) and a `postback` (a
//! quick-reply button tapped, its `data` the button's id) are a person's; every other event
//! (`follow`, `join`, `unsend`, `beacon`, a kind LINE adds later) carries nothing to act on and is
//! acknowledged. Each event is kept whole, with the `destination` it came to, so that it reads
//! again alone; its `webhookEventId` — the same when LINE redelivers it — is the inbox's key.

use serde_json::Value;

use crate::channels::body;
use crate::domain::command::{Channel, ExternalId};
use crate::domain::directory::LINE_PREFIX;
use crate::domain::message::{Addresses, Content, InboundMessage};

/// The field an event is stored with, naming the bot it came to.
const DESTINATION: &str = "destination";

/// Why a body is not a LINE webhook at all (then nothing is stored).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventsError {
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("not a LINE webhook: {0}")]
    NotAWebhook(String),
}

/// A webhook body as `parse` reads it first (and the OpenAPI document describes it).
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[schema(as = LineWebhook)]
pub struct WebhookBody {
    /// The bot's user id: the address its tenant is found by.
    pub destination: String,
    /// The events, each read on its own (`message`, `postback`; the rest acknowledged).
    #[schema(value_type = Vec<Object>)]
    pub events: Vec<Value>,
}

/// Reads a webhook body: the messages its events carry, in their order. LINE's "Verify" button
/// sends `events: []`, which carries none.
pub fn parse(body: &[u8]) -> Result<Vec<InboundMessage>, EventsError> {
    let value = body::json(body).map_err(EventsError::NotJson)?;
    let WebhookBody { destination, events } = body::envelope(&value).map_err(EventsError::NotAWebhook)?;
    if destination.trim().is_empty() {
        return Err(EventsError::NotAWebhook("a blank destination".into()));
    }
    let mut messages = vec![];
    for event in &events {
        if let Some(message) = read(&destination, event)? {
            messages.push(message);
        }
    }
    Ok(messages)
}

/// The message a stored event holds, read again (reprocessing).
pub fn read_stored(raw: &Value) -> Option<InboundMessage> {
    let destination = raw[DESTINATION].as_str()?;
    read(destination, raw).ok().flatten().filter(|m| m.content.unreadable_reason().is_none())
}

/// An event's message, `None` for an event that carries none; an event without its id cannot be
/// told from its redelivery, and is refused.
fn read(destination: &str, event: &Value) -> Result<Option<InboundMessage>, EventsError> {
    // In standby another module answers the chat (LINE's module channels): not ours to act on.
    let Some(fields) = event.as_object().filter(|_| event["mode"] != "standby") else { return Ok(None) };
    let content = match event["type"].as_str() {
        Some("message") => content_of(&event["message"]),
        Some("postback") => match event["postback"]["data"].as_str().filter(|d| !d.is_empty()) {
            Some(data) => Content::Reply { id: data.to_owned(), title: data.to_owned() },
            None => unreadable("postback", "a postback without data"),
        },
        _ => return Ok(None),
    };
    let id = event["webhookEventId"].as_str().filter(|id| !id.trim().is_empty());
    let id = id.ok_or_else(|| EventsError::NotAWebhook("an event without webhookEventId".into()))?;
    let source = &event["source"];
    let user = source["userId"].as_str().filter(|u| !u.is_empty());
    // Replies go where it was said: the group, the room, else the person.
    let chat = source["groupId"].as_str().or(source["roomId"].as_str()).or(user);
    let content = match (user, chat) {
        (Some(_), Some(_)) => content,
        _ => unreadable(content.kind(), "no sender (`source.userId`)"),
    };
    let mut raw = fields.clone();
    raw.insert(DESTINATION.into(), destination.into());
    let message_id = |id: &str| ExternalId::parse(&format!("{destination}:{id}")).ok();
    let message = (|| {
        Some(InboundMessage {
            channel: Channel::parse(super::CHANNEL).ok()?,
            provider_message_id: message_id(id)?,
            to: destination.to_owned(),
            from: user.map_or_else(|| "unknown".into(), |user| format!("{LINE_PREFIX}{user}")),
            sender_name: None,
            sent_at: event["timestamp"].as_i64().map(|millis| millis / 1000),
            content,
            in_reply_to: event["message"]["quotedMessageId"].as_str().map(str::to_owned),
            addresses: Some(Addresses {
                business: destination.to_owned(),
                person: chat.unwrap_or_default().to_owned(),
                conversation: None,
            }),
            answered_inline: None,
            raw: Value::Object(raw),
        })
    })();
    message.map(Some).ok_or_else(|| EventsError::NotAWebhook("an id that cannot be kept".into()))
}

/// What a message event's `message` says: its text, else what kind of thing it is.
fn content_of(message: &Value) -> Content {
    match message["type"].as_str() {
        Some("text") => Content::Text(message["text"].as_str().unwrap_or_default().to_owned()),
        Some(kind @ ("image" | "video" | "audio" | "file" | "sticker")) => {
            Content::Media { kind: kind.to_owned(), caption: None }
        }
        Some("location") => Content::Location,
        Some(kind) => Content::Unsupported { kind: kind.to_owned() },
        None => unreadable("message", "a message without a type"),
    }
}

fn unreadable(kind: &str, reason: &str) -> Content {
    Content::Unreadable { kind: kind.to_owned(), reason: reason.to_owned(), errors: None }
}

#[cfg(test)]
mod tests;
