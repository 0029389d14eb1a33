//! Items shaped as Meta's Messenger Platform reference shows them
//! (developers.facebook.com/documentation/business-messaging/messenger-platform/webhooks/
//! webhook-events: `messages` — text with a quick reply —, `messaging_postbacks`,
//! `message_echoes`, `message_deliveries`), and Instagram's, which has the same `messaging[]`.

use serde_json::json;

use super::*;

fn notification(object: &str, messaging: Value) -> Vec<u8> {
    json!({"object": object, "entry": [{"id": "PAGE_ID", "time": 1458692752478u64, "messaging": messaging}]})
        .to_string()
        .into_bytes()
}

fn text_item(mid: &str, text: &str) -> Value {
    json!({"sender": {"id": "PSID1"}, "recipient": {"id": "PAGE_ID"}, "timestamp": 1458692752478u64,
           "message": {"mid": mid, "text": text}})
}

#[test]
fn a_text_a_quick_reply_and_a_postback_are_read_and_echoes_are_left() {
    let quick = json!({"sender": {"id": "PSID1"}, "recipient": {"id": "PAGE_ID"}, "timestamp": 1458692752478u64,
        "message": {"mid": "mid.1457764197618:41d102a3e1ae206a38", "text": "Yes", "quick_reply": {"payload": "cg:yes:n"}}});
    let postback = json!({"sender": {"id": "PSID1"}, "recipient": {"id": "PAGE_ID"}, "timestamp": 1527459824,
        "postback": {"mid": "m_MESSAGE-ID", "title": "No", "payload": "cg:no:n"}});
    let echo = json!({"sender": {"id": "PAGE_ID"}, "recipient": {"id": "PSID1"}, "timestamp": 1457764197627u64,
        "message": {"is_echo": true, "app_id": 1517776481860111u64, "mid": "mid.echo", "text": "Done"}});
    let body = notification("page", json!([text_item("m_1", "refund 1234 25.00"), quick, postback, echo]));
    let delivery = parse(&body).expect("a notification");
    assert_eq!(delivery.skipped, 1, "the echo");
    let [text, quick, postback] = delivery.messages.as_slice() else { panic!("three messages") };
    assert_eq!((text.channel.as_str(), text.to.as_str(), text.from.as_str()), ("messenger", "PAGE_ID", "fb:PSID1"));
    assert_eq!(text.content, Content::Text("refund 1234 25.00".into()));
    assert_eq!(text.sent_at, Some(1458692752));
    assert_eq!(quick.content, Content::Reply { id: "cg:yes:n".into(), title: "Yes".into() });
    assert_eq!(postback.content, Content::Reply { id: "cg:no:n".into(), title: "No".into() });
    assert_eq!(read(&text.channel, &text.raw), Some(text.clone()), "a stored item reads again alike");
}

#[test]
fn instagram_is_its_own_channel_and_deliveries_are_statuses() {
    let delivery = parse(&notification("instagram", json!([text_item("aWdfZAG1", "refund 1 2")]))).expect("read");
    assert_eq!((delivery.messages[0].channel.as_str(), delivery.messages[0].from.as_str()), ("instagram", "ig:PSID1"));
    let delivered = json!({"sender": {"id": "PSID1"}, "recipient": {"id": "PAGE_ID"},
        "delivery": {"mids": ["mid.1458668856218:ed81099e15d3f4f233"], "watermark": 1458668856253u64}});
    let delivery = parse(&notification("page", json!([delivered]))).expect("read");
    assert_eq!(delivery.statuses[0].provider_message_id, "mid.1458668856218:ed81099e15d3f4f233");
    assert_eq!(delivery.statuses[0].status, Some(DeliveryStatus::Delivered));
}

#[test]
fn one_odd_item_never_costs_the_others_and_only_another_object_is_refused() {
    let odd = json!({"sender": {}, "message": {"text": "no id, no sender"}});
    let delivery = parse(&notification("page", json!([odd, 7, text_item("m_2", "hello")]))).expect("read");
    assert_eq!((delivery.messages.len(), delivery.skipped), (1, 2));
    assert!(matches!(parse(&notification("whatsapp_business_account", json!([]))), Err(PayloadError::WrongObject(_))));
    assert!(matches!(parse(b"{"), Err(PayloadError::NotJson(_))));
}
