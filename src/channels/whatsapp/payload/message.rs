//! One `messages[]` item, read field by field: what can be read is, what cannot makes the
//! message `unreadable` with the reason, and the message as Meta sent it is kept whole (`raw`).

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::text;
use crate::domain::command::{Channel, ExternalId};
use crate::domain::message::{Content, InboundMessage};

const MEDIA: &[&str] = &["image", "audio", "video", "document", "sticker"];
/// The kinds a message without `type` can be recognized by: the one object it carries.
const KINDS: &[&str] = &[
    "text",
    "interactive",
    "button",
    "reaction",
    "image",
    "audio",
    "video",
    "document",
    "sticker",
    "location",
    "contacts",
    "order",
    "system",
];

/// Reads one message; `sole_contact` is the `contacts[]` entry that can only be its sender's.
pub(super) fn read(
    channel: &Channel,
    to: &str,
    contacts: &[&Value],
    sole_contact: Option<&Value>,
    raw: Value,
) -> InboundMessage {
    let kind = text(&raw, "type").or_else(|| KINDS.iter().find(|k| raw.get(**k).is_some()).map(|k| (*k).to_owned()));
    let from = text(&raw, "from")
        .or_else(|| text(&raw, "from_user_id"))
        .or_else(|| system_subject(kind.as_deref(), &raw))
        .or_else(|| sole_contact.and_then(|c| text(c, "wa_id").or_else(|| text(c, "user_id"))));
    let id = text(&raw, "id").and_then(|id| ExternalId::parse(&id).ok());
    let unreadable = |reason: &str| Content::Unreadable {
        kind: kind.clone().unwrap_or_else(|| "unknown".into()),
        reason: reason.to_owned(),
        errors: raw.get("errors").cloned(),
    };
    let content = match (&id, &from, &kind) {
        // Without its own id a message cannot be recognized when Meta delivers it again, so it
        // is never acted on: kept, under an id made of its content, which a redelivery repeats.
        (None, _, _) => unreadable("no usable `id`"),
        (_, None, _) => unreadable("no sender: neither `from`, `from_user_id` nor a contact"),
        (_, _, None) => unreadable("no `type`, and no content of a known type"),
        (Some(_), Some(_), Some(kind)) => content_of(kind, &raw).unwrap_or_else(|reason| unreadable(&reason)),
    };
    let sender = from.clone().unwrap_or_default();
    let named =
        |c: &&&Value| text(c, "wa_id").as_ref() == Some(&sender) || text(c, "user_id").as_ref() == Some(&sender);
    let sender_name = contacts.iter().find(named).and_then(|c| c.get("profile")).and_then(|p| text(p, "name"));
    InboundMessage {
        channel: channel.clone(),
        provider_message_id: id.unwrap_or_else(|| content_id(&raw)),
        to: to.to_owned(),
        from: sender,
        sender_name,
        sent_at: text(&raw, "timestamp").and_then(|t| t.parse().ok()),
        content,
        in_reply_to: raw.get("context").and_then(|c| text(c, "id")),
        raw,
        addresses: None,
        answered_inline: None,
    }
}

/// A stable id for a message that came without one: the same message delivered again gets it
/// again (serde_json writes an object's keys in order).
fn content_id(raw: &Value) -> ExternalId {
    let digest = hex::encode(Sha256::digest(raw.to_string().as_bytes()));
    ExternalId::parse(&format!("unidentified.{}", &digest[..40]))
        .unwrap_or_else(|_| unreachable!("hex digits make a valid identifier"))
}

/// Whom a `system` message without a sender is about: Meta announces a changed business-scoped
/// user id with the ids in `system` and no `from` at all.
fn system_subject(kind: Option<&str>, raw: &Value) -> Option<String> {
    let system = raw.get("system").filter(|_| kind == Some("system"))?;
    ["previous_user_id", "user_id", "wa_id"].iter().find_map(|key| text(system, key))
}

/// What a message of `kind` says, or why it cannot be read. One whose kind-specific object is
/// missing (Meta sends an `interactive` with `errors` and nothing else) is unreadable.
fn content_of(kind: &str, raw: &Value) -> Result<Content, String> {
    let object = raw.get(kind).filter(|o| !o.is_null());
    let missing = || format!("no `{kind}` object");
    Ok(match kind {
        "text" => {
            let body = object.ok_or_else(missing)?;
            Content::Text(text_keeping_spaces(body, "body").ok_or("`text` has no `body`")?)
        }
        "interactive" => {
            let object = object.ok_or_else(missing)?;
            match ["button_reply", "list_reply"].iter().find_map(|k| object.get(*k)) {
                Some(row) => Content::Reply {
                    id: text(row, "id").ok_or("an interactive reply without `id`")?,
                    title: text(row, "title").unwrap_or_default(),
                },
                // Other interactive replies (flows, ...) are kept, not interpreted.
                None => Content::Unsupported { kind: "interactive".into() },
            }
        }
        "button" => {
            let button = object.ok_or_else(missing)?;
            let title = text(button, "text").unwrap_or_default();
            let id = text(button, "payload").or_else(|| Some(title.clone()).filter(|t| !t.is_empty()));
            Content::Reply { id: id.ok_or("a button reply without `payload` or `text`")?, title }
        }
        "reaction" => {
            let reaction = object.ok_or_else(missing)?;
            Content::Reaction {
                emoji: text(reaction, "emoji").unwrap_or_default(),
                to_message: text(reaction, "message_id").unwrap_or_default(),
            }
        }
        kind if MEDIA.contains(&kind) => {
            Content::Media { kind: kind.to_owned(), caption: object.and_then(|media| text(media, "caption")) }
        }
        "location" => Content::Location,
        "contacts" => Content::Contacts,
        // Not something the person asked: a number or identity change, a deleted or edited message.
        kind @ ("system" | "revoke" | "edit") => Content::Notice { kind: kind.to_owned() },
        other => Content::Unsupported { kind: other.to_owned() },
    })
}

/// A text as the person wrote it (not trimmed: the registry normalizes), or a number's digits.
fn text_keeping_spaces(value: &Value, key: &str) -> Option<String> {
    match value.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}
