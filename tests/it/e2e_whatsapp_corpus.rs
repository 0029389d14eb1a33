//! A corpus of genuine WhatsApp Cloud API deliveries (`corpus/whatsapp.json`: every kind of message
//! and status in the shapes Meta's reference documents and SDKs test with, the fields of other
//! subscriptions too), each posted signed as Meta sends it, and again as Meta retries it: every
//! delivery is answered 200, every message in it is kept exactly once whatever its kind, and every
//! status is read.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{CUSTOMER, DEMO_NUMBER, Meta, TestDb, command_of_message, on_both_backends, spawn_app};

on_both_backends!(
    every_genuine_delivery_is_acknowledged_and_every_message_kept,
    one_odd_message_never_costs_its_neighbours
);

const CORPUS: &str = include_str!("corpus/whatsapp.json");
/// The corpus's own sender and business number, replaced by the test gateway's.
const CORPUS_SENDER: &str = "16505550199";
const CORPUS_NUMBER: &str = "109876543210987";

/// The ids of the messages and the number of statuses in a delivery's `messages` changes.
fn contents(delivery: &Value) -> (Vec<String>, usize) {
    let changes = delivery["entry"].as_array().into_iter().flatten().flat_map(|e| e["changes"].as_array()).flatten();
    let values: Vec<&Value> = changes.filter(|c| c["field"] == "messages").map(|c| &c["value"]).collect();
    let ids = values
        .iter()
        .flat_map(|v| v["messages"].as_array().into_iter().flatten())
        .filter_map(|m| m["id"].as_str().map(str::to_owned))
        .collect();
    let statuses = values.iter().map(|v| v["statuses"].as_array().map_or(0, Vec::len)).sum();
    (ids, statuses)
}

async fn kept(db: &TestDb, id: &str) -> i64 {
    db.count("SELECT COUNT(*) FROM inbound_messages WHERE provider_message_id = $1", id).await
}

async fn every_genuine_delivery_is_acknowledged_and_every_message_kept(db: &TestDb) {
    let app = spawn_app(db).await;
    let meta = Meta::new(&app, db);
    let corpus = CORPUS.replace(CORPUS_SENDER, CUSTOMER).replace(CORPUS_NUMBER, DEMO_NUMBER);
    let corpus: Value = serde_json::from_str(&corpus).expect("the corpus is JSON");
    let deliveries: Vec<(&String, &Value)> = corpus.as_object().expect("named deliveries").iter().collect();
    let deliveries: Vec<_> = deliveries.into_iter().filter(|(name, _)| !name.starts_with('_')).collect();
    assert!(deliveries.len() >= 25, "the corpus covers every kind");
    for (name, delivery) in deliveries {
        let (ids, statuses) = contents(delivery);
        let response = meta.post(delivery).await;
        let status = response.status();
        let summary: Value = response.json().await.unwrap_or(Value::Null);
        assert_eq!(status, StatusCode::OK, "{name}: {summary}");
        assert_eq!(summary["messages"], ids.len(), "{name}: every message read: {summary}");
        assert_eq!(summary["statuses"], statuses, "{name}: every status read: {summary}");
        for id in &ids {
            assert_eq!(kept(db, id).await, 1, "{name}: {id} is kept");
        }
        // Meta retrying the same delivery: acknowledged again, nothing new.
        let again = meta.post(delivery).await;
        assert_eq!(again.status(), StatusCode::OK, "{name}: the retry");
        for id in &ids {
            assert_eq!(kept(db, id).await, 1, "{name}: {id} is kept once");
        }
    }
    app.stop().await.expect("stop");
}

/// The shapes SDK fixtures send (issue 27): a numeric `timestamp` (a PHP SDK), no `type` (a Go
/// SDK), a `text` without `body`, a sender only in `contacts[].user_id`; and others found while
/// reading them (a numeric id and sender, no id at all, a `text` that is a string, an
/// interactive reply without its id). Each in one delivery beside a valid `order status 4410`:
/// 200, the valid message a command, the odd one kept (read when it can be, `unreadable` with the
/// reason when not), and Meta's retry of the batch changes nothing.
async fn one_odd_message_never_costs_its_neighbours(db: &TestDb) {
    let app = spawn_app(db).await;
    let meta = Meta::new(&app, db);
    let odd: [(&str, Value, Option<&str>); 9] = [
        (
            "numeric timestamp",
            json!({"id": "wamid.ODD1", "from": CUSTOMER, "timestamp": 1_700_000_000,
            "type": "text", "text": {"body": "order status 1"}}),
            None,
        ),
        (
            "no type",
            json!({"id": "wamid.ODD2", "from": CUSTOMER, "timestamp": "1700000000",
            "text": {"body": "order status 2"}}),
            None,
        ),
        (
            "text without body",
            json!({"id": "wamid.ODD3", "from": CUSTOMER, "type": "text", "text": {}}),
            Some("`text` has no `body`"),
        ),
        (
            "sender only in contacts",
            json!({"id": "wamid.ODD4", "timestamp": "1700000000", "type": "text",
            "text": {"body": "order status 4"}}),
            None,
        ),
        (
            "numeric id and sender",
            json!({"id": 5_005, "from": CUSTOMER.parse::<u64>().expect("digits"),
            "type": "text", "text": {"body": "order status 5"}}),
            None,
        ),
        ("no id", json!({"from": CUSTOMER, "type": "text", "text": {"body": "refund 6 1.00"}}), Some("no usable `id`")),
        (
            "text as a string",
            json!({"id": "wamid.ODD7", "from": CUSTOMER, "type": "text", "text": "hi"}),
            Some("`text` has no `body`"),
        ),
        (
            "reply without id",
            json!({"id": "wamid.ODD8", "from": CUSTOMER, "type": "interactive",
            "interactive": {"type": "button_reply", "button_reply": {"title": "Yes"}}}),
            Some("an interactive reply without `id`"),
        ),
        (
            "no sender anywhere",
            json!({"id": "wamid.ODD9", "type": "text", "text": {"body": "order status 9"}}),
            Some("no sender: neither `from`, `from_user_id` nor a contact"),
        ),
    ];
    for (n, (name, mut message, reason)) in odd.into_iter().enumerate() {
        let marker = format!("odd-case-{n}");
        message["marker"] = json!(marker);
        let valid_id = format!("wamid.VALID{n}");
        let valid = json!({"id": valid_id, "from": CUSTOMER, "timestamp": "1700000000", "type": "text",
            "text": {"body": "order status 4410"}});
        // The contact names the customer by business-scoped id only where the case says so.
        let contact = match name {
            "sender only in contacts" => json!({"user_id": CUSTOMER, "profile": {"name": "Ana"}}),
            "no sender anywhere" => json!({"wa_id": CUSTOMER}),
            _ => json!({"wa_id": CUSTOMER, "profile": {"name": "Ana"}}),
        };
        // Two contacts for two messages where the odd one has no sender at all: neither is its.
        let contacts =
            if name == "no sender anywhere" { json!([contact, {"wa_id": "1"}, {}]) } else { json!([contact]) };
        let delivery = json!({"object": "whatsapp_business_account", "entry": [{"id": "WABA", "changes": [{
            "field": "messages", "value": {"messaging_product": "whatsapp",
                "metadata": {"phone_number_id": DEMO_NUMBER}, "contacts": contacts,
                "messages": [valid, message.clone()]}}]}]});
        let response = meta.post(&delivery).await;
        assert_eq!(response.status(), StatusCode::OK, "{name}");
        let summary: Value = response.json().await.expect("a summary");
        assert_eq!(summary["messages"], 2, "{name}: {summary}");
        assert_eq!(summary["redelivered"], 0, "{name}: {summary}");
        assert_eq!(kept(db, &valid_id).await, 1, "{name}: the valid neighbour is kept");
        let command = command_of_message(db, &valid_id).await;
        let state = db.store.commands().get(&crate::helpers::tenant("demo"), command).await.expect("read");
        assert!(state.is_some(), "{name}: the valid neighbour is a command");
        let (status, detail) = odd_row(db, &marker).await;
        match reason {
            Some(reason) => {
                assert_eq!(status, "unreadable", "{name}");
                assert_eq!(detail.as_deref(), Some(reason), "{name}");
            }
            None => assert_eq!((status.as_str(), detail), ("command", None), "{name}: read as what it says"),
        }
        let again: Value = meta.post(&delivery).await.json().await.expect("a summary");
        assert_eq!(again["redelivered"], 2, "{name}: Meta's retry is recognized whole: {again}");
    }
    assert_eq!(replies_to_unreadable(db).await, 0, "an unreadable message is never answered");
    app.stop().await.expect("stop");
}

/// The status and detail of the odd message marked `marker` (an extra field, which Meta's
/// messages may carry too: it is kept with the rest).
async fn odd_row(db: &TestDb, marker: &str) -> (String, Option<String>) {
    let mut conn = db.raw().await;
    let row = sqlx::query("SELECT status, detail FROM inbound_messages WHERE payload LIKE $1")
        .bind(format!("%\"{marker}\"%"))
        .fetch_one(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("{marker} is kept: {e}"));
    (sqlx::Row::get(&row, "status"), sqlx::Row::get(&row, "detail"))
}

async fn replies_to_unreadable(db: &TestDb) -> i64 {
    db.count(
        "SELECT COUNT(*) FROM outbox o JOIN inbound_messages i ON o.payload LIKE '%' || i.provider_message_id || '%'
         WHERE i.status = $1",
        "unreadable",
    )
    .await
}
