//! Builds what LINE posts (developers.line.biz/en/reference/messaging-api/#webhook-event-objects),
//! for the tests and `chatgate simulate line`: a person's text message or postback to `bot`, in a
//! one-to-one chat, signed as LINE signs it.

use serde_json::{Value, json};

use super::signature;

/// A text message `text` from user `user` (`U…`), as event `id`.
pub fn text(bot: &str, id: &str, user: &str, text: &str) -> Value {
    let message = json!({"id": format!("m{id}"), "type": "text", "text": text, "quoteToken": format!("q{id}")});
    webhook(bot, event(id, user, "message", "message", message))
}

/// A tap on a quick-reply postback button whose `data` is `data`.
pub fn postback(bot: &str, id: &str, user: &str, data: &str) -> Value {
    webhook(bot, event(id, user, "postback", "postback", json!({"data": data})))
}

/// The body's `x-line-signature` under `secret`.
pub fn signed(secret: &str, body: &Value) -> (String, String) {
    let body = body.to_string();
    (signature::sign(secret.as_bytes(), body.as_bytes()), body)
}

fn event(id: &str, user: &str, kind: &str, field: &str, value: Value) -> Value {
    let now = time::OffsetDateTime::now_utc().unix_timestamp() * 1000;
    let mut event = json!({
        "type": kind,
        "mode": "active",
        "timestamp": now,
        "source": {"type": "user", "userId": user},
        "webhookEventId": id,
        "deliveryContext": {"isRedelivery": false},
        "replyToken": format!("r{id}"),
    });
    event[field] = value;
    event
}

fn webhook(bot: &str, event: Value) -> Value {
    json!({"destination": bot, "events": [event]})
}
