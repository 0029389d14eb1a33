//! A corpus of genuine WhatsApp Cloud API deliveries (`corpus/whatsapp.json`: every kind of message
//! and status in the shapes Meta's reference documents and SDKs test with, the fields of other
//! subscriptions too), each posted signed as Meta sends it, and again as Meta retries it: every
//! delivery is answered 200, every message in it is kept exactly once whatever its kind, and every
//! status is read.

use reqwest::StatusCode;
use serde_json::Value;

use crate::helpers::{CUSTOMER, DEMO_NUMBER, Meta, TestDb, on_both_backends, spawn_app};

on_both_backends!(every_genuine_delivery_is_acknowledged_and_every_message_kept);

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
