//! The WhatsApp Cloud API webhook payload. A delivery that is not a WhatsApp Business Account
//! notification is refused whole (nothing stored); inside one, every message is read on its own
//! and leniently: a field in an odd shape (a number for a string, a missing `type` or `body`, a
//! sender named only in `contacts`) is read where it can be, and a message that still cannot be
//! read is kept as `unreadable` with the reason, never a reason to refuse its neighbours (Meta
//! would retry the whole batch forever).

use serde_json::Value;

use crate::channels::body::{self, Items};
use crate::domain::command::Channel;
use crate::domain::message::{DeliveryStatus, InboundMessage, StatusUpdate};

mod message;
#[cfg(test)]
mod tests;

/// One webhook delivery: every message and status of every entry and change.
#[derive(Debug, Default, PartialEq)]
pub struct Delivery {
    pub messages: Vec<InboundMessage>,
    pub statuses: Vec<StatusUpdate>,
    /// Changes of other fields (account updates, templates, ...): acknowledged, not handled.
    pub other_changes: usize,
    /// Statuses without the id of the message they are about: acknowledged, nothing to update.
    pub unreadable_statuses: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("the body is not JSON: {0}")]
    NotJson(String),
    #[error("not a WhatsApp Business Account notification (object `{0}`)")]
    WrongObject(String),
    #[error("not a notification: {0}")]
    NotANotification(String),
}

/// A notification as `parse` reads it first (and the OpenAPI document describes it): its `object`
/// and entries, each with its `changes` (`field`, `value`), read leniently after.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[schema(as = WhatsAppNotification)]
pub struct NotificationBody {
    /// `whatsapp_business_account`.
    pub object: String,
    #[serde(default)]
    pub entry: Items,
}

pub fn parse(body: &[u8]) -> Result<Delivery, PayloadError> {
    let notification = body::json(body).map_err(PayloadError::NotJson)?;
    let NotificationBody { object, entry } =
        body::take_envelope(notification).map_err(PayloadError::NotANotification)?;
    if object != "whatsapp_business_account" {
        return Err(PayloadError::WrongObject(object));
    }
    let mut delivery = Delivery::default();
    for mut entry in entry {
        for change in items_mut(entry.get_mut("changes")) {
            match change.get("field").and_then(Value::as_str) {
                Some("messages") => read_change(&mut delivery, change.get_mut("value").map(Value::take)),
                _ => delivery.other_changes += 1,
            }
        }
    }
    Ok(delivery)
}

/// One `messages` change: its messages and statuses, all for the business number of its metadata.
/// Each message keeps its part of `value` (taken, not copied).
fn read_change(delivery: &mut Delivery, value: Option<Value>) {
    let mut value = value.unwrap_or_default();
    let messages = match value.get_mut("messages") {
        Some(Value::Array(items)) => std::mem::take(items),
        Some(object @ Value::Object(_)) => vec![object.take()],
        _ => vec![],
    };
    let channel = whatsapp();
    // Without the business number a message is still kept: it is stored as unroutable.
    let to = value.get("metadata").and_then(|m| text(m, "phone_number_id")).unwrap_or_default();
    let contacts = items(value.get("contacts"));
    let count = messages.len();
    for (index, raw) in messages.into_iter().enumerate() {
        let sole_contact = match (contacts.len(), count) {
            (1, _) => contacts.first().copied(),
            (n, m) if n == m => contacts.get(index).copied(),
            _ => None,
        };
        delivery.messages.push(message::read(&channel, &to, &contacts, sole_contact, raw));
    }
    for status in items(value.get("statuses")) {
        let Some(id) = text(status, "id") else {
            delivery.unreadable_statuses += 1;
            continue;
        };
        let reported = text(status, "status").unwrap_or_default();
        delivery.statuses.push(StatusUpdate {
            channel: channel.clone(),
            provider_message_id: id,
            status: whatsapp_status(&reported),
            reported,
            recipient: text(status, "recipient_id"),
            errors: status.get("errors").cloned(),
        });
    }
}

/// Meta's word for how far a message got: a voice message `played` is as good as read.
fn whatsapp_status(reported: &str) -> Option<DeliveryStatus> {
    match reported {
        "played" => Some(DeliveryStatus::Read),
        other => DeliveryStatus::parse(other),
    }
}

/// One message as stored (the `messages[]` item Meta sent), read again; `to` is the business
/// number it went to.
pub fn read_stored(raw: &Value, to: &str) -> Result<InboundMessage, String> {
    let message = message::read(&whatsapp(), to, &[], None, raw.clone());
    match message.content.unreadable_reason() {
        Some(reason) => Err(reason.to_owned()),
        None => Ok(message),
    }
}

fn whatsapp() -> Channel {
    Channel::parse("whatsapp").unwrap_or_else(|_| unreachable!("`whatsapp` is a valid channel name"))
}

/// The items of an array; one object where an array was expected is read as a list of one.
fn items(value: Option<&Value>) -> Vec<&Value> {
    match value {
        Some(Value::Array(items)) => items.iter().collect(),
        Some(object @ Value::Object(_)) => vec![object],
        _ => vec![],
    }
}

/// The same, to take from.
fn items_mut(value: Option<&mut Value>) -> Vec<&mut Value> {
    match value {
        Some(Value::Array(items)) => items.iter_mut().collect(),
        Some(object @ Value::Object(_)) => vec![object],
        _ => vec![],
    }
}

/// A field's text, whether it came as a string or a number (SDK fixtures write ids and
/// timestamps both ways); blank is absent.
fn text(value: &Value, key: &str) -> Option<String> {
    match value.get(key)? {
        Value::String(s) => Some(s.trim()).filter(|s| !s.is_empty()).map(str::to_owned),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}
