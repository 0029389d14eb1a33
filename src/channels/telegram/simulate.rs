//! Telegram-shaped updates, for `chatgate simulate telegram` and for tests: one builder, so the
//! simulator sends exactly what the tests prove the gateway accepts.

use serde_json::{Value, json};

fn user(user_id: i64) -> Value {
    json!({"id": user_id, "is_bot": false, "first_name": format!("Simulated {user_id}")})
}

/// A text message from `user_id` in their private chat with the bot.
pub fn text(update_id: i64, user_id: i64, text: &str) -> Value {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    json!({
        "update_id": update_id,
        "message": {
            "message_id": update_id,
            "from": user(user_id),
            "chat": {"id": user_id, "type": "private"},
            "date": now,
            "text": text,
        }
    })
}

/// A tap on an inline keyboard button whose `callback_data` is `data`.
pub fn button(update_id: i64, user_id: i64, data: &str) -> Value {
    json!({
        "update_id": update_id,
        "callback_query": {
            "id": format!("cq{update_id}"),
            "from": user(user_id),
            "message": {"message_id": update_id - 1, "chat": {"id": user_id, "type": "private"}, "date": 0},
            "chat_instance": "1",
            "data": data,
        }
    })
}
