//! Updates shaped as the Bot API documents them (core.telegram.org/bots/api: `Update`, `Message`,
//! `User`, `Chat`, `CallbackQuery`, `MaybeInaccessibleMessage`; the fields below are the ones those
//! pages list, with their types: ids are Integers).

use serde_json::json;

use super::*;

fn text_update() -> Value {
    json!({
        "update_id": 987654321,
        "message": {
            "message_id": 42,
            "from": {"id": 700000001, "is_bot": false, "first_name": "Ana", "last_name": "Lima",
                     "username": "ana", "language_code": "pt-br"},
            "chat": {"id": 700000001, "type": "private", "first_name": "Ana", "username": "ana"},
            "date": 1764150000,
            "text": "refund 1234 25.00",
        }
    })
}

fn callback_update() -> Value {
    json!({
        "update_id": 987654322,
        "callback_query": {
            "id": "4382bfdwdsb323b2d9",
            "from": {"id": 700000001, "is_bot": false, "first_name": "Ana"},
            "message": {"message_id": 43, "chat": {"id": 700000001, "type": "private"}, "date": 1764150001,
                        "text": "Refund 25.00 on order 1234?"},
            "chat_instance": "-8455869543426183911",
            "data": "cg:yes:0123456789abcdef0123456789abcdef",
        }
    })
}

fn parsed(value: &Value) -> Update {
    parse("demo_bot", value.to_string().as_bytes()).expect("an update")
}

#[test]
fn a_text_message_names_its_sender_by_user_id_and_is_answered_in_its_chat() {
    let update = parsed(&text_update());
    let message = update.message.expect("a message");
    assert_eq!(
        message.provider_message_id.as_str(),
        "demo_bot:987654321",
        "one id per update: a redelivery repeats it"
    );
    assert_eq!((message.to.as_str(), message.from.as_str()), ("demo_bot", "tg:700000001"));
    assert_eq!(message.content, Content::Text("refund 1234 25.00".into()));
    assert_eq!(message.sender_name.as_deref(), Some("Ana Lima"));
    assert_eq!(message.sent_at, Some(1764150000));
    assert_eq!(message.addresses.map(|a| a.person), Some("700000001".into()));
    assert_eq!(update.callback_query_id, None);
}

#[test]
fn a_button_tap_is_a_reply_with_the_buttons_data_and_a_query_to_answer() {
    let update = parsed(&callback_update());
    let message = update.message.expect("a message");
    assert_eq!(
        message.content,
        Content::Reply {
            id: "cg:yes:0123456789abcdef0123456789abcdef".into(),
            title: "cg:yes:0123456789abcdef0123456789abcdef".into()
        }
    );
    assert_eq!(update.callback_query_id.as_deref(), Some("4382bfdwdsb323b2d9"));
    assert_eq!(message.from, "tg:700000001");
}

#[test]
fn other_kinds_of_update_carry_no_message_and_odd_fields_are_read_where_they_can_be() {
    let member = json!({"update_id": 5, "my_chat_member": {"chat": {"id": 1, "type": "private"}}});
    assert_eq!(parsed(&member).message, None);
    let mut edited = text_update();
    edited["edited_message"] = edited["message"].take();
    edited.as_object_mut().map(|m| m.remove("message"));
    assert_eq!(parsed(&edited).message.expect("kept").content, Content::Notice { kind: "edit".into() });
    let mut photo = text_update();
    photo["message"].as_object_mut().map(|m| m.remove("text"));
    photo["message"]["photo"] = json!([{"file_id": "A", "file_unique_id": "a", "width": 90, "height": 90}]);
    photo["message"]["caption"] = json!("receipt");
    let content = parsed(&photo).message.expect("kept").content;
    assert_eq!(content, Content::Media { kind: "photo".into(), caption: Some("receipt".into()) });
    let mut ids_as_text = text_update();
    ids_as_text["update_id"] = json!("987654321");
    ids_as_text["message"]["from"]["id"] = json!("700000001");
    assert_eq!(parsed(&ids_as_text).message.expect("kept").from, "tg:700000001");
    let mut anonymous = text_update();
    anonymous["message"].as_object_mut().map(|m| m.remove("from"));
    let content = parsed(&anonymous).message.expect("kept").content;
    assert!(content.unreadable_reason().is_some(), "no sender: stored, never acted on");
}

#[test]
fn only_what_is_not_an_update_is_refused() {
    assert!(matches!(parse("b", b"{"), Err(UpdateError::NotJson(_))));
    assert!(matches!(parse("b", b"[1]"), Err(UpdateError::NotAnUpdate(_))));
    assert!(matches!(parse("b", br#"{"message": {}}"#), Err(UpdateError::NotAnUpdate(_))));
}

#[test]
fn a_stored_update_reads_again_as_the_same_message() {
    let update = parsed(&text_update());
    let stored = update.message.expect("a message");
    assert_eq!(read_stored("demo_bot", &stored.raw), Some(stored));
}
