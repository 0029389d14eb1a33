//! Telegram's `Update` (core.telegram.org/bots/api#update), read leniently: the one message it
//! carries (`message`; an `edited_message` is a notice) or the button tapped (`callback_query`,
//! its `data` the button's id). Other kinds of update (`my_chat_member`, `inline_query`, ...) carry
//! nothing to act on and are acknowledged. Ids are numbers in Telegram's JSON and read as
//! strings or numbers here.

use serde_json::Value;

use crate::channels::body::{self, NumberOrText};
use crate::domain::command::{Channel, ExternalId};
use crate::domain::directory::TELEGRAM_PREFIX;
use crate::domain::message::{Addresses, Content, InboundMessage};

/// Why a body is not an `Update` at all (then nothing is stored).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpdateError {
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("not an Update: {0}")]
    NotAnUpdate(String),
}

/// An `Update` as `parse` reads it first (and the OpenAPI document describes it): its id, and at
/// most one of the kinds of update a person's message comes in, each read leniently after.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[schema(as = TelegramUpdate)]
pub struct UpdateBody {
    /// A number (or, leniently, text).
    pub update_id: NumberOrText,
    /// A new message (`Message`).
    #[schema(value_type = Option<Object>)]
    pub message: Option<Value>,
    /// A message edited (`Message`): acknowledged as a notice.
    #[schema(value_type = Option<Object>)]
    pub edited_message: Option<Value>,
    /// A button tapped (`CallbackQuery`): its `data` the button's id.
    #[schema(value_type = Option<Object>)]
    pub callback_query: Option<Value>,
}

/// What one update came to.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    pub update_id: String,
    /// The person's message or button tap, if the update carries one.
    pub message: Option<InboundMessage>,
    /// A button tap's query, which Telegram wants answered (`answerCallbackQuery`).
    pub callback_query_id: Option<String>,
}

/// Reads a webhook body for bot `bot`.
pub fn parse(bot: &str, body: &[u8]) -> Result<Update, UpdateError> {
    let value = body::json(body).map_err(UpdateError::NotJson)?;
    let envelope: UpdateBody = body::envelope(&value).map_err(UpdateError::NotAnUpdate)?;
    let update_id = envelope.update_id.text().ok_or_else(|| UpdateError::NotAnUpdate("a blank update_id".into()))?;
    let callback_query_id = value.get("callback_query").and_then(|q| id_text(&q["id"]));
    let message = read(bot, &update_id, value);
    Ok(Update { update_id, message, callback_query_id })
}

/// The message a stored update holds, read again (reprocessing).
pub fn read_stored(bot: &str, raw: &Value) -> Option<InboundMessage> {
    let update_id = id_text(&raw["update_id"])?;
    read(bot, &update_id, raw.clone()).filter(|m| m.content.unreadable_reason().is_none())
}

/// The update's message, kept whole as `raw`; `None` for an update that carries none.
fn read(bot: &str, update_id: &str, raw: Value) -> Option<InboundMessage> {
    let (content, message, from, chat) = if let Some(query) = raw.get("callback_query") {
        let data = query["data"].as_str().unwrap_or_default().to_owned();
        let content = if data.is_empty() {
            unreadable("callback_query", "a button tap without data")
        } else {
            Content::Reply { id: data.clone(), title: data }
        };
        let chat = id_text(&query["message"]["chat"]["id"]);
        (content, &query["message"], &query["from"], chat)
    } else if let Some(message) = raw.get("message") {
        (content_of(message), message, &message["from"], id_text(&message["chat"]["id"]))
    } else if let Some(edited) = raw.get("edited_message") {
        (Content::Notice { kind: "edit".into() }, edited, &edited["from"], id_text(&edited["chat"]["id"]))
    } else {
        return None;
    };
    let user = id_text(&from["id"]);
    // Replies go to the chat; a person is known by their user id (in a private chat the same).
    let chat = chat.or_else(|| user.clone());
    let content = match (&user, &chat) {
        (Some(_), Some(_)) => content,
        _ => unreadable(content.kind(), "no sender (`from.id`) or chat"),
    };
    let person = user.map(|id| format!("{TELEGRAM_PREFIX}{id}")).unwrap_or_else(|| "unknown".into());
    Some(InboundMessage {
        channel: Channel::parse(super::CHANNEL).ok()?,
        provider_message_id: ExternalId::parse(&format!("{bot}:{update_id}")).ok()?,
        to: bot.to_owned(),
        from: person,
        sender_name: name_of(from),
        sent_at: message["date"].as_i64(),
        content,
        in_reply_to: None,
        addresses: Some(Addresses { business: bot.to_owned(), person: chat.unwrap_or_default(), conversation: None }),
        answered_inline: None,
        raw,
    })
}

/// What a `Message` says: its text, else what kind of thing it is.
fn content_of(message: &Value) -> Content {
    if let Some(text) = message["text"].as_str() {
        return Content::Text(text.to_owned());
    }
    const MEDIA: &[&str] = &["photo", "document", "voice", "video", "audio", "sticker", "animation", "video_note"];
    if let Some(kind) = MEDIA.iter().find(|kind| message.get(**kind).is_some()) {
        let caption = message["caption"].as_str().map(str::to_owned);
        return Content::Media { kind: (*kind).to_owned(), caption };
    }
    if message.get("location").is_some() || message.get("venue").is_some() {
        return Content::Location;
    }
    if message.get("contact").is_some() {
        return Content::Contacts;
    }
    let kind = message.as_object().and_then(|m| m.keys().find(|k| !COMMON.contains(&k.as_str())).cloned());
    Content::Unsupported { kind: kind.unwrap_or_else(|| "unknown".into()) }
}

/// A message's fields that say nothing of its content.
const COMMON: &[&str] = &["message_id", "from", "chat", "date", "sender_chat", "message_thread_id", "entities"];

fn unreadable(kind: &str, reason: &str) -> Content {
    Content::Unreadable { kind: kind.to_owned(), reason: reason.to_owned(), errors: None }
}

fn name_of(user: &Value) -> Option<String> {
    let parts: Vec<&str> = ["first_name", "last_name"].iter().filter_map(|k| user[*k].as_str()).collect();
    (!parts.is_empty()).then(|| parts.join(" ")).or_else(|| user["username"].as_str().map(str::to_owned))
}

/// An id Telegram writes as a number (or, leniently, as text).
fn id_text(value: &Value) -> Option<String> {
    match value {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
