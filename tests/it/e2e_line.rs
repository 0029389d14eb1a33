//! LINE over HTTP, from webhooks shaped as the Messaging API documents them
//! (developers.line.biz/en/reference/messaging-api/#webhook-event-objects; the simulator's builders,
//! whose shapes the unit tests hold against LINE's own SDK's fixture): a person asks for a refund,
//! is pushed the prompt with quick-reply buttons through a stand-in for the Messaging API, taps
//! "Yes" (a postback), and is pushed the outcome; a redelivered event changes nothing; a push LINE
//! failed is tried again under the same `X-Line-Retry-Key`; a forged or malformed webhook is
//! refused and stores nothing, and LINE's "Verify" (no events) is acknowledged.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use chatgate::channels::line::simulate;

use crate::fake_graph::{Answer, FakeServer, sending_through};
use crate::helpers::{TestApp, TestDb, on_both_backends};

on_both_backends!(
    a_refund_is_confirmed_with_a_quick_reply_and_each_event_counts_once,
    a_failed_push_is_tried_again_as_the_same_request_to_line,
    forged_and_malformed_webhooks_are_refused_and_store_nothing,
);

/// The demo customer's LINE user id and the demo bot's (config/directory.toml).
pub(crate) const CUSTOMER: &str = "U10000000000000000000000000000001";
pub(crate) const BOT: &str = "Ub0700000000000000000000000000001";
const ACCESS_TOKEN: &str = "test-line-channel-access-token";

fn push_default(n: usize) -> Answer {
    let sent = json!({"sentMessages": [{"id": format!("4612309668420648{n:02}"), "quoteToken": "q"}]});
    Answer { status: 200, body: sent, retry_after: None }
}

pub(crate) struct Line {
    pub(crate) app: TestApp,
    pub(crate) api: FakeServer,
    pub(crate) secret: String,
}

impl Line {
    pub(crate) async fn start(db: &TestDb) -> Self {
        let api = FakeServer::start_with(push_default).await;
        let mut config = sending_through(&db.config, &FakeServer::start().await);
        config.line.api_base = api.url.clone();
        config.line.channel_access_token = chatgate::config::Secret::new(ACCESS_TOKEN);
        let secret = config.line.channel_secret.expose().to_owned();
        assert!(!secret.is_empty(), "the shipped configuration has a demo channel secret");
        Self { app: crate::helpers::spawn_app_with(db, config).await, api, secret }
    }

    /// Posts `body` with `signature` (none: no header).
    pub(crate) async fn post(&self, body: &[u8], signature: Option<&str>) -> (StatusCode, String, Value) {
        crate::helpers::post_json(&self.app, "/webhooks/line", signature.map(|value| ("x-line-signature", value)), body)
            .await
    }

    /// Posts `webhook` signed as LINE signs it.
    pub(crate) async fn send(&self, webhook: &Value) -> StatusCode {
        let (signature, body) = simulate::signed(&self.secret, webhook);
        self.post(body.as_bytes(), Some(&signature)).await.0
    }
}

async fn a_refund_is_confirmed_with_a_quick_reply_and_each_event_counts_once(db: &TestDb) {
    let line = Line::start(db).await;
    let refund = simulate::text(BOT, "01JLINE0000000000000000001", CUSTOMER, "refund 1234 25.00");
    assert_eq!(line.send(&refund).await, StatusCode::OK);
    // The test gateway answers once a message is admitted (`ingest.acknowledge = "admitted"`).
    assert_eq!(db.count("SELECT COUNT(*) FROM commands WHERE channel = $1", "line").await, 1);
    let prompt = &line.api.wait_for(1, Duration::from_secs(20)).await[0];
    assert_eq!(prompt.path, "/v2/bot/message/push");
    assert_eq!(prompt.authorization.as_deref(), Some(format!("Bearer {ACCESS_TOKEN}").as_str()));
    assert_eq!(prompt.body["to"], CUSTOMER, "pushed to the person, by their user id");
    let message = &prompt.body["messages"][0];
    assert!(message["text"].as_str().is_some_and(|t| t.contains("1234")), "{message}");
    let items = &message["quickReply"]["items"];
    let yes = items[0]["action"]["data"].as_str().expect("a Yes postback").to_owned();
    assert!(yes.starts_with("cg:yes:") && items[1]["action"]["data"].as_str().is_some_and(|d| d.starts_with("cg:no:")));

    // LINE redelivers an event it got no 2xx for: the same webhookEventId, nothing new.
    assert_eq!(line.send(&refund).await, StatusCode::OK);
    let tap = simulate::postback(BOT, "01JLINE0000000000000000002", CUSTOMER, &yes);
    assert_eq!(line.send(&tap).await, StatusCode::OK);
    assert_eq!(crate::helpers::first_command_state(db, "executed").await, "executed");
    assert_eq!(line.send(&tap).await, StatusCode::OK, "a redelivered tap confirms nothing");

    // The prompt, the confirmation's thanks and the outcome: three pushes, each once, each its
    // own retry key.
    let sent = line.api.exactly(3).await;
    assert!(sent.iter().all(|r| r.body["to"] == CUSTOMER));
    assert!(sent[2].body["messages"][0].get("quickReply").is_none(), "the outcome has no buttons");
    let keys: std::collections::BTreeSet<&str> =
        sent.iter().filter_map(|r| r.headers.get("x-line-retry-key").map(String::as_str)).collect();
    assert_eq!(keys.len(), 3, "{keys:?}");
    assert!(keys.iter().all(|key| uuid::Uuid::parse_str(key).is_ok()), "a retry key is a UUID: {keys:?}");
    let one = |sql: &'static str| db.count(sql, "line");
    assert_eq!(one("SELECT COUNT(*) FROM inbound_messages WHERE channel = $1").await, 2);
    assert_eq!(one("SELECT COUNT(*) FROM commands WHERE channel = $1").await, 1);
    assert_eq!(one("SELECT COUNT(*) FROM outbound_messages WHERE channel = $1").await, 3);
    line.app.stop().await.expect("stop");
}

async fn a_failed_push_is_tried_again_as_the_same_request_to_line(db: &TestDb) {
    let line = Line::start(db).await;
    line.api.answer_next(500, json!({"message": "An error occurred in the server"}), None);
    let status = simulate::text(BOT, "01JLINE0000000000000000003", CUSTOMER, "status 1234");
    assert_eq!(line.send(&status).await, StatusCode::OK);
    // The first push failed (maybe after LINE took it): the second is the same request.
    let pushes = line.api.wait_for(2, Duration::from_secs(20)).await;
    let key = |n: usize| pushes[n].headers.get("x-line-retry-key").cloned();
    assert!(key(0).is_some());
    assert_eq!(key(0), key(1), "one reply, one retry key");
    assert_eq!(pushes[0].body, pushes[1].body);
    line.app.stop().await.expect("stop");
}

async fn forged_and_malformed_webhooks_are_refused_and_store_nothing(db: &TestDb) {
    let line = Line::start(db).await;
    let refund = simulate::text(BOT, "01JLINE0000000000000000009", CUSTOMER, "refund 1234 25.00");
    let (signature, body) = simulate::signed(&line.secret, &refund);
    let (forged, _) = simulate::signed("not-the-channel-secret", &refund);
    let signed = |body: &str| simulate::signed(&line.secret, &serde_json::from_str(body).unwrap_or(Value::Null)).0;
    let truncated = &body[..body.len() - 1];
    for (body, signature, want) in [
        (body.as_str(), None, StatusCode::UNAUTHORIZED),
        (body.as_str(), Some(forged), StatusCode::UNAUTHORIZED),
        (&body.replace("25.00", "99.00"), Some(signature.clone()), StatusCode::UNAUTHORIZED),
        (
            truncated,
            Some(chatgate::channels::line::signature::sign(line.secret.as_bytes(), truncated.as_bytes())),
            StatusCode::BAD_REQUEST,
        ),
        ("[]", Some(signed("[]")), StatusCode::BAD_REQUEST),
    ] {
        let (status, kind, problem) = line.post(body.as_bytes(), signature.as_deref()).await;
        assert_eq!(status, want, "{problem}");
        assert_eq!(kind, "application/problem+json", "{problem}");
        assert!(problem["title"].is_string() && problem["detail"].is_string(), "{problem}");
    }
    assert_eq!(db.count_inbox("SELECT COUNT(*) FROM inbox WHERE channel = $1", "line").await, 0);
    assert_eq!(db.count("SELECT COUNT(*) FROM inbound_messages WHERE channel = $1", "line").await, 0);
    // LINE's "Verify" button and a follow carry nothing to act on: acknowledged, nothing stored.
    assert_eq!(line.send(&json!({"destination": BOT, "events": []})).await, StatusCode::OK);
    let mut follow = simulate::postback(BOT, "01JLINE0000000000000000010", CUSTOMER, "x");
    follow["events"][0]["type"] = "follow".into();
    assert_eq!(line.send(&follow).await, StatusCode::OK);
    assert_eq!(db.count_inbox("SELECT COUNT(*) FROM inbox WHERE channel = $1", "line").await, 0);
    assert!(line.api.requests().is_empty());
    line.app.stop().await.expect("stop");
}
