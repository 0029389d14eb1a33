//! Meta's Messenger Platform and Instagram messaging webhooks (`object: page`, `object:
//! instagram`): each entry's `messaging[]` items read one by one and leniently, so that one odd
//! item never costs the others. A `message` a person wrote is read as text, or a quick reply's
//! `payload` (a confirmation's button id) as a reply; a `postback` (a button of a template) is its
//! `payload`; the page's own messages (`is_echo`) carry nothing to act on; `delivery` says which
//! messages arrived (Messenger). What cannot be read is counted and left.

use serde_json::Value;

use crate::channels::body;
use crate::domain::command::{Channel, ExternalId};
use crate::domain::message::{Addresses, Content, DeliveryStatus, InboundMessage, StatusUpdate};

/// One delivery, read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Delivery {
    /// `messenger` or `instagram`.
    pub channel: &'static str,
    pub messages: Vec<InboundMessage>,
    pub statuses: Vec<StatusUpdate>,
    /// Items carrying nothing to act on (echoes, reads, reactions) or that could not be read.
    pub skipped: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("not a Messenger or Instagram notification: {0}")]
    WrongObject(String),
}

/// A notification as `parse` reads it first (and the OpenAPI document describes it): its `object`
/// and entries, each entry's `messaging[]` items read one by one after.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[schema(as = MessengerNotification)]
pub struct NotificationBody {
    /// `page` (Messenger) or `instagram`.
    pub object: String,
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub entry: Vec<Value>,
}

/// Which channel a notification's `object` is.
pub fn channel_of(object: &str) -> Option<&'static str> {
    match object {
        "page" => Some(super::MESSENGER),
        "instagram" => Some(super::INSTAGRAM),
        _ => None,
    }
}

/// A webhook body.
pub fn parse(body: &[u8]) -> Result<Delivery, PayloadError> {
    let value = body::json(body).map_err(PayloadError::NotJson)?;
    let NotificationBody { object, entry } = body::take_envelope(value).map_err(PayloadError::WrongObject)?;
    let name = channel_of(&object).ok_or_else(|| PayloadError::WrongObject(format!("object `{object}`")))?;
    let channel = Channel::parse(name).map_err(|e| PayloadError::WrongObject(e.to_string()))?;
    let mut delivery = Delivery { channel: name, ..Delivery::default() };
    for entry in &entry {
        for item in entry["messaging"].as_array().into_iter().flatten() {
            read_item(&channel, item, &mut delivery);
        }
    }
    Ok(delivery)
}

fn read_item(channel: &Channel, item: &Value, delivery: &mut Delivery) {
    if let Some(mids) = item["delivery"]["mids"].as_array() {
        let statuses = mids.iter().filter_map(Value::as_str).map(|mid| StatusUpdate {
            channel: channel.clone(),
            provider_message_id: mid.to_owned(),
            status: Some(DeliveryStatus::Delivered),
            reported: "delivery".into(),
            recipient: text(&item["sender"]["id"]).map(str::to_owned),
            errors: None,
        });
        delivery.statuses.extend(statuses);
        return;
    }
    match read(channel, item) {
        Some(message) => delivery.messages.push(message),
        None => delivery.skipped += 1,
    }
}

/// The message one `messaging[]` item holds, kept whole as `raw` (also for reprocessing).
pub fn read(channel: &Channel, item: &Value) -> Option<InboundMessage> {
    let (id, content) = if let Some(message) = item.get("message") {
        if message["is_echo"] == true {
            return None;
        }
        (text(&message["mid"])?, content_of(message))
    } else if let Some(postback) = item.get("postback") {
        let payload = text(&postback["payload"])?;
        let title = postback["title"].as_str().unwrap_or(payload).to_owned();
        let id = text(&postback["mid"])?;
        (id, Content::Reply { id: payload.to_owned(), title })
    } else {
        return None;
    };
    let (person, page) = (text(&item["sender"]["id"])?, text(&item["recipient"]["id"])?);
    let prefix = if channel.as_str() == super::INSTAGRAM { "ig:" } else { "fb:" };
    Some(InboundMessage {
        channel: channel.clone(),
        provider_message_id: ExternalId::parse(id).ok()?,
        to: page.to_owned(),
        from: format!("{prefix}{person}"),
        sender_name: None,
        sent_at: item["timestamp"].as_i64().map(|ms| ms / 1000),
        content,
        in_reply_to: None,
        addresses: Some(Addresses { business: page.to_owned(), person: person.to_owned(), conversation: None }),
        answered_inline: None,
        raw: item.clone(),
    })
}

fn content_of(message: &Value) -> Content {
    let text_of = message["text"].as_str();
    if let Some(payload) = text(&message["quick_reply"]["payload"]) {
        return Content::Reply { id: payload.to_owned(), title: text_of.unwrap_or(payload).to_owned() };
    }
    if let Some(text) = text_of {
        return Content::Text(text.to_owned());
    }
    match message["attachments"][0]["type"].as_str() {
        Some(kind) => Content::Media { kind: kind.to_owned(), caption: None },
        None => Content::Unsupported { kind: "message".into() },
    }
}

fn text(value: &Value) -> Option<&str> {
    value.as_str().map(str::trim).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests;
