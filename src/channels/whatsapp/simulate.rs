//! Meta-shaped webhook payloads, for `chatgate simulate whatsapp` and for tests: one builder, so
//! the simulator sends exactly what the tests prove the gateway accepts.

use serde_json::{Value, json};

/// One message as WhatsApp sends it; `body` is the object under the message's type key.
pub fn message(id: &str, from: &str, kind: &str, body: Value) -> Value {
    let mut message = json!({
        "id": id,
        "from": from,
        "timestamp": time::OffsetDateTime::now_utc().unix_timestamp().to_string(),
        "type": kind,
    });
    if !body.is_null() {
        message[kind] = body;
    }
    message
}

pub fn text(id: &str, from: &str, body: &str) -> Value {
    message(id, from, "text", json!({"body": body}))
}

pub fn button_reply(id: &str, from: &str, reply_id: &str, title: &str) -> Value {
    message(id, from, "interactive", json!({"type": "button_reply", "button_reply": {"id": reply_id, "title": title}}))
}

/// A delivery status for a message the business sent.
pub fn status(wamid: &str, recipient: &str, status: &str) -> Value {
    let mut value = json!({
        "id": wamid,
        "status": status,
        "timestamp": time::OffsetDateTime::now_utc().unix_timestamp().to_string(),
        "recipient_id": recipient,
    });
    if status == "failed" {
        value["errors"] = json!([{"code": 131026, "title": "Message undeliverable"}]);
    }
    value
}

/// A whole notification: one entry, one `messages` change, to `phone_number_id`.
pub fn notification(phone_number_id: &str, messages: Vec<Value>, statuses: Vec<Value>) -> Value {
    let contacts: Vec<Value> = messages
        .iter()
        .filter_map(|m| m.get("from").and_then(Value::as_str))
        .map(|from| json!({"wa_id": from, "profile": {"name": format!("Simulated {from}")}}))
        .collect();
    json!({
        "object": "whatsapp_business_account",
        "entry": [{
            "id": "WHATSAPP_BUSINESS_ACCOUNT_ID",
            "changes": [{
                "field": "messages",
                "value": {
                    "messaging_product": "whatsapp",
                    "metadata": {"display_phone_number": "15550001000", "phone_number_id": phone_number_id},
                    "contacts": contacts,
                    "messages": messages,
                    "statuses": statuses,
                },
            }],
        }],
    })
}
