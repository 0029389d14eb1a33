use serde_json::{Value, json};

use super::*;
use crate::domain::message::Content;

fn notification(messages: Value, statuses: Value) -> Vec<u8> {
    json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "WABA", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550001000", "phone_number_id": "100000000000001"},
            "contacts": [{"wa_id": "15550000001", "profile": {"name": "Ana"}}],
            "messages": messages,
            "statuses": statuses,
        }}]}]
    })
    .to_string()
    .into_bytes()
}

fn msg(kind: &str, body: Value) -> Value {
    let mut m = json!({"id": format!("wamid.{kind}"), "from": "15550000001", "timestamp": "1700000000", "type": kind});
    if !body.is_null() {
        m[kind] = body;
    }
    m
}

fn unreadable(delivery: &Delivery, index: usize) -> Option<&str> {
    delivery.messages[index].content.unreadable_reason()
}

#[test]
fn every_message_type_is_parsed() {
    let messages = json!([
        msg("text", json!({"body": "refund 1234 25.00"})),
        msg("interactive", json!({"type": "button_reply", "button_reply": {"id": "yes:ABC", "title": "Yes"}})),
        msg("interactive", json!({"type": "list_reply", "list_reply": {"id": "order_status:9", "title": "Status"}})),
        msg("button", json!({"payload": "order_status:7", "text": "Status"})),
        msg("reaction", json!({"message_id": "wamid.X", "emoji": "👍"})),
        msg("image", json!({"id": "media1", "mime_type": "image/jpeg", "caption": "receipt"})),
        msg("audio", json!({"id": "media2"})),
        msg("video", json!({"id": "media3"})),
        msg("document", json!({"id": "media4", "filename": "a.pdf"})),
        msg("sticker", json!({"id": "media5"})),
        msg("location", json!({"latitude": 1.0, "longitude": 2.0})),
        msg("contacts", json!([{"name": {"formatted_name": "B"}}])),
        msg("hologram", json!({"depth": 3})),
    ]);
    let delivery = parse(&notification(messages, json!([]))).expect("parses");
    let kinds: Vec<&str> = delivery.messages.iter().map(|m| m.content.kind()).collect();
    assert_eq!(
        kinds,
        [
            "text", "reply", "reply", "reply", "reaction", "image", "audio", "video", "document", "sticker",
            "location", "contacts", "hologram"
        ]
    );
    let first = &delivery.messages[0];
    assert_eq!(first.content, Content::Text("refund 1234 25.00".into()));
    assert_eq!((first.to.as_str(), first.from.as_str()), ("100000000000001", "15550000001"));
    assert_eq!(first.sender_name.as_deref(), Some("Ana"));
    assert_eq!(first.sent_at, Some(1_700_000_000));
    assert_eq!(delivery.messages[3].content, Content::Reply { id: "order_status:7".into(), title: "Status".into() });
    assert_eq!(delivery.messages[5].content, Content::Media { kind: "image".into(), caption: Some("receipt".into()) });
}

#[test]
fn a_played_voice_message_is_read_and_a_word_meta_may_add_is_not_tracked() {
    let statuses = json!([{"id": "wamid.V", "status": "played"}, {"id": "wamid.D", "status": "deleted"}]);
    let delivery = parse(&notification(json!([]), statuses)).expect("parses");
    let read: Vec<_> = delivery.statuses.iter().map(|s| s.status).collect();
    assert_eq!(read, [Some(crate::domain::message::DeliveryStatus::Read), None]);
}

#[test]
fn statuses_and_other_fields_are_collected() {
    let statuses = json!([
        {"id": "wamid.OUT1", "status": "delivered", "timestamp": "1", "recipient_id": "15550000001"},
        {"id": "wamid.OUT2", "status": "failed", "timestamp": "2", "recipient_id": "15550000001",
         "errors": [{"code": 131047, "title": "Re-engagement message"}]},
        {"status": "read", "timestamp": 3},
    ]);
    let delivery = parse(&notification(json!([]), statuses)).expect("parses");
    assert_eq!((delivery.statuses.len(), delivery.unreadable_statuses), (2, 1));
    assert_eq!(delivery.statuses[0].status, Some(crate::domain::message::DeliveryStatus::Delivered));
    assert_eq!(delivery.statuses[1].errors.as_ref().map(|e| e[0]["code"].clone()), Some(json!(131047)));
    let change = json!({"field": "account_update", "value": {}});
    let other = json!({"object": "whatsapp_business_account", "entry": [{"changes": [change]}]});
    assert_eq!(parse(other.to_string().as_bytes()).expect("parses").other_changes, 1);
}

#[test]
fn only_what_is_not_a_notification_is_refused_whole() {
    assert!(matches!(parse(b""), Err(PayloadError::NotJson(_))));
    assert!(matches!(parse(b"{\"object\":"), Err(PayloadError::NotJson(_))));
    assert!(matches!(parse(b"[1,2]"), Err(PayloadError::NotANotification(_))));
    assert!(matches!(parse(br#"{"object": 5}"#), Err(PayloadError::NotANotification(_))));
    assert!(matches!(
        parse(br#"{"object": "whatsapp_business_account", "entry": 5}"#),
        Err(PayloadError::NotANotification(_))
    ));
    assert!(matches!(parse(br#"{"object":"page","entry":[]}"#), Err(PayloadError::WrongObject(_))));
    let nested = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    assert!(matches!(parse(nested.as_bytes()), Err(PayloadError::NotJson(_))));
}

/// The shapes SDK fixtures and Meta's own examples send, each beside a valid message: every
/// message is read, and the odd one is read where it can be, kept as unreadable where not.
#[test]
fn one_odd_field_never_costs_a_message_its_neighbours() {
    let valid = msg("text", json!({"body": "order status 4410"}));
    let odd = [
        // A numeric timestamp (PHP SDK fixtures): read as the number it is.
        (
            json!({"id": "w1", "from": "15550000001", "timestamp": 1700000000, "type": "text",
                "text": {"body": "order status 1"}}),
            None,
        ),
        // No `type` (Go SDK fixtures): the content object says which.
        (json!({"id": "w2", "from": "15550000001", "text": {"body": "order status 2"}}), None),
        (json!({"id": "w3", "from": "15550000001", "type": "text", "text": {}}), Some("`text` has no `body`")),
        (json!({"id": "w4", "from": "15550000001", "type": "text"}), Some("no `text` object")),
        (json!({"id": "w5", "type": "text", "text": {"body": "x"}}), None),
        (json!({"id": 6, "from": 15550000001_u64, "type": "text", "text": {"body": 7}}), None),
        (
            json!({"id": "w8", "from": "15550000001", "type": "interactive", "interactive": {"button_reply": {}}}),
            Some("an interactive reply without `id`"),
        ),
        (json!({"id": "w9", "from": "15550000001", "type": "text", "text": "hi"}), Some("`text` has no `body`")),
        (
            json!({"id": "w10", "from": "15550000001", "context": "wamid.X", "type": "button", "button": {}}),
            Some("a button reply without `payload` or `text`"),
        ),
        (json!({"from": "15550000001", "type": "text", "text": {"body": "refund 1 1.00"}}), Some("no usable `id`")),
        (
            json!({"id": "w12", "from": "15550000001", "type": null, "hologram": 1}),
            Some("no `type`, and no content of a known type"),
        ),
        (json!({"id": "w13", "from": ["15550000001"], "type": "text", "text": {"body": "x"}}), None),
        (json!("a string where a message belongs"), Some("no usable `id`")),
    ];
    for (message, expected) in odd {
        let delivery = parse(&notification(json!([valid.clone(), message.clone()]), json!([]))).expect("a delivery");
        assert_eq!(delivery.messages.len(), 2, "{message}");
        assert_eq!(delivery.messages[0].content, Content::Text("order status 4410".into()), "{message}");
        assert_eq!(unreadable(&delivery, 1), expected, "{message}");
        assert_eq!(delivery.messages[1].raw, message, "kept as Meta sent it");
    }
}

#[test]
fn fields_in_odd_shapes_are_read_as_what_they_say() {
    let messages = json!([
        {"id": "w1", "from": "15550000001", "timestamp": 1700000000, "type": "text", "text": {"body": "a"}},
        {"id": "w2", "from": "15550000001", "text": {"body": "b"}},
        {"id": 3, "from": 15550000001_u64, "type": "text", "text": {"body": 1234}},
    ]);
    let delivery = parse(&notification(messages, json!([]))).expect("a delivery");
    assert_eq!(delivery.messages[0].sent_at, Some(1_700_000_000));
    assert_eq!(delivery.messages[1].content, Content::Text("b".into()));
    assert_eq!(delivery.messages[2].provider_message_id.as_str(), "3");
    assert_eq!(delivery.messages[2].from, "15550000001");
    assert_eq!(delivery.messages[2].content, Content::Text("1234".into()));
}

#[test]
fn a_sender_named_only_in_contacts_is_that_contact() {
    let body = json!({"object": "whatsapp_business_account", "entry": [{"changes": [{"field": "messages", "value": {
        "metadata": {"phone_number_id": "100000000000001"},
        "contacts": [{"user_id": "US.13491208655302741918", "profile": {"name": "Bo"}}],
        "messages": [{"id": "w1", "timestamp": "1", "type": "text", "text": {"body": "order status 4410"}}],
    }}]}]});
    let delivery = parse(body.to_string().as_bytes()).expect("a delivery");
    let message = &delivery.messages[0];
    assert_eq!((message.from.as_str(), message.sender_name.as_deref()), ("US.13491208655302741918", Some("Bo")));
    assert_eq!(message.content, Content::Text("order status 4410".into()));
}

#[test]
fn a_message_without_an_id_keeps_one_id_across_redeliveries() {
    let message = json!({"from": "15550000001", "type": "text", "text": {"body": "refund 1 1.00"}});
    let first = parse(&notification(json!([message.clone()]), json!([]))).expect("a delivery");
    let again = parse(&notification(json!([message]), json!([]))).expect("a delivery");
    assert_eq!(first.messages[0].provider_message_id, again.messages[0].provider_message_id);
    assert!(first.messages[0].provider_message_id.as_str().starts_with("unidentified."));
}

#[test]
fn a_change_without_metadata_keeps_its_messages_unroutable() {
    let body = json!({"object": "whatsapp_business_account", "entry": [{"changes": [{"field": "messages",
        "value": {"messages": [msg("text", json!({"body": "hi"}))]}}]}]});
    let delivery = parse(body.to_string().as_bytes()).expect("a delivery");
    assert_eq!(delivery.messages[0].to, "");
}

#[test]
fn a_message_without_its_content_is_unreadable_not_a_refused_delivery() {
    let errors = json!([{"code": 131051, "title": "Message type unknown"}]);
    let body = notification(
        json!([
            {"id": "w1", "from": "1", "type": "text"},
            {"id": "w2", "from": "1", "type": "interactive", "errors": errors},
            {"id": "w3", "from_user_id": "US.1", "type": "edit", "edit": {}},
        ]),
        json!([]),
    );
    let delivery = parse(&body).expect("a delivery");
    let contents: Vec<&Content> = delivery.messages.iter().map(|m| &m.content).collect();
    let reason = "no `text` object".to_owned();
    assert_eq!(contents[0], &Content::Unreadable { kind: "text".into(), reason, errors: None });
    let reason = "no `interactive` object".to_owned();
    assert_eq!(contents[1], &Content::Unreadable { kind: "interactive".into(), reason, errors: Some(errors) });
    assert_eq!(contents[2], &Content::Notice { kind: "edit".into() });
    assert_eq!(delivery.messages[2].from, "US.1");
}
