//! The events of a webhook shaped as LINE's own SDK's fixture (line/line-bot-sdk-python,
//! `tests/v3/text/webhook.json` at 31c913942c39c86405b04b15147619183f5c5abe): text, image,
//! sticker, location and file messages, a postback, and events that carry nothing to act on, from
//! a person, a room and a group.

use serde_json::{Value, json};

use super::*;

const WEBHOOK: &str = include_str!("webhook.json");
const PERSON: &str = "line:U206d25c2ea6bd87c17655609a1c37cb8";
const BOT: &str = "Ub0700000000000000000000000000001";

#[test]
fn a_persons_messages_and_postbacks_are_read_and_other_events_are_passed_over() {
    let messages = parse(WEBHOOK.as_bytes()).expect("a webhook");
    let read: Vec<(&str, &str)> = messages.iter().map(|m| (m.provider_message_id.as_str(), m.content.kind())).collect();
    let id = |n: u8| format!("{BOT}:01FZ74A0TDDPYRVKNK77XKC3Z{n}");
    let want = [
        (id(0), "text"),
        (id(1), "image"),
        (id(2), "sticker"),
        (id(3), "location"),
        (id(6), "reply"),
        (id(7), "text"),
        (id(8), "text"),
        (id(11), "file"),
    ];
    let want: Vec<(&str, &str)> = want.iter().map(|(id, kind)| (id.as_str(), *kind)).collect();
    assert_eq!(read, want, "follow, unsend, standby and videoPlayComplete carry nothing");
    let first = &messages[0];
    assert_eq!((first.to.as_str(), first.from.as_str()), (BOT, PERSON));
    assert_eq!(first.content, Content::Text("refund 1234 25.00".into()));
    assert_eq!(first.sent_at, Some(1462629479));
    assert_eq!(first.addresses.as_ref().map(|a| a.person.as_str()), Some("U206d25c2ea6bd87c17655609a1c37cb8"));
    assert_eq!(messages[4].content, Content::Reply { id: "cg:yes:n0nce".into(), title: "cg:yes:n0nce".into() });
    // In a group, replies go to the group and the person is who wrote; a quote is what it answers.
    let group = &messages[5];
    assert_eq!(group.addresses.as_ref().map(|a| a.person.as_str()), Some("Ca56f94637cc4347f90a25382909b24b9"));
    assert_eq!((group.from.as_str(), group.in_reply_to.as_deref()), (PERSON, Some("325708")));
    assert_eq!(messages[6].content.unreadable_reason(), Some("no sender (`source.userId`)"));
}

#[test]
fn a_stored_event_reads_again_alone() {
    let messages = parse(WEBHOOK.as_bytes()).expect("a webhook");
    for message in messages.iter().filter(|m| m.content.unreadable_reason().is_none()) {
        assert_eq!(message.raw[DESTINATION], BOT);
        assert_eq!(read_stored(&message.raw).as_ref(), Some(message));
    }
}

#[test]
fn a_body_that_is_no_webhook_is_refused() {
    let refused = |body: Value| parse(body.to_string().as_bytes()).expect_err("refused");
    assert!(matches!(parse(b"{\"destination\": "), Err(EventsError::NotJson(_))));
    let not_a_webhook = |reason: &str| EventsError::NotAWebhook(reason.into());
    assert_eq!(refused(json!([])), not_a_webhook("the body is not a JSON object"));
    assert_eq!(refused(json!({"events": []})), not_a_webhook("missing field `destination`"));
    assert_eq!(refused(json!({"destination": BOT})), not_a_webhook("missing field `events`"));
    assert_eq!(refused(json!({"destination": " ", "events": []})), not_a_webhook("a blank destination"));
    let unkeyed = json!({"type": "message", "source": {"type": "user", "userId": "U1"},
        "message": {"type": "text", "text": "hi"}});
    let body = json!({"destination": BOT, "events": [unkeyed]});
    assert_eq!(refused(body), not_a_webhook("an event without webhookEventId"));
    // LINE's "Verify" button: no events, nothing to store.
    assert_eq!(parse(json!({"destination": BOT, "events": []}).to_string().as_bytes()), Ok(vec![]));
}
