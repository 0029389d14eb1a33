//! Messenger and Instagram messaging over HTTP, from items shaped as Meta's Messenger Platform
//! reference shows them, signed with the Meta app's secret by the test's own HMAC: a person asks
//! for a refund, is sent the prompt through a stand-in for the Send API with quick replies, taps
//! "Yes" (a quick reply's payload), and is sent the outcome; a redelivery changes nothing; the
//! page's own echoes are left; a delivery receipt is recorded; forged and malformed deliveries
//! store nothing. Run for both channels on both backends.

use std::time::Duration;

use hmac::{Hmac, Mac};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fake_graph::{Answer, FakeServer, sending_through};
use crate::helpers::{TestApp, TestDb, on_both_backends};

on_both_backends!(
    a_messenger_refund_is_confirmed_with_a_quick_reply,
    an_instagram_refund_is_confirmed_with_a_quick_reply,
    forged_and_malformed_deliveries_are_refused_and_store_nothing,
);

/// The demo tenant's page and account, and the demo customer's ids on them (config/directory.toml).
pub(crate) const PAGE: &str = "200000000000001";
pub(crate) const INSTAGRAM_ACCOUNT: &str = "17840000000000001";
pub(crate) const PSID: &str = "24000000000000001";
pub(crate) const IGSID: &str = "17850000000000001";

/// The Send API's answer: the recipient and the new message's id.
fn send_api_default(n: usize) -> Answer {
    Answer { status: 200, body: json!({"recipient_id": "PSID", "message_id": format!("m_OUT{n}")}), retry_after: None }
}

pub(crate) struct Meta {
    pub(crate) app: TestApp,
    pub(crate) graph: FakeServer,
    secret: String,
}

impl Meta {
    pub(crate) async fn start(db: &TestDb) -> Self {
        let graph = FakeServer::start_with(send_api_default).await;
        let mut config = sending_through(&db.config, &graph);
        config.messenger.access_token = chatgate::config::Secret::new("page-token");
        config.instagram.access_token = chatgate::config::Secret::new("instagram-token");
        let secret = config.whatsapp.apps["default"].app_secret.expose().to_owned();
        Self { app: crate::helpers::spawn_app_with(db, config).await, graph, secret }
    }

    pub(crate) async fn post(&self, body: &[u8], signature: Option<String>) -> (StatusCode, String, Value) {
        let mut request =
            self.app.client.post(self.app.url("/webhooks/messenger")).header("content-type", "application/json");
        if let Some(signature) = signature {
            request = request.header("x-hub-signature-256", signature);
        }
        let response = request.body(body.to_vec()).send().await.expect("request");
        let status = response.status();
        let kind = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        (status, kind, response.json().await.unwrap_or(Value::Null))
    }

    /// `sha256=` + hex HMAC-SHA256 of the body with the app secret (Meta's description).
    pub(crate) fn sign(&self, body: &[u8]) -> String {
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(self.secret.as_bytes()).expect("key");
        mac.update(body);
        format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
    }

    async fn deliver(&self, notification: &Value) -> Value {
        let body = notification.to_string().into_bytes();
        let (status, _, summary) = self.post(&body, Some(self.sign(&body))).await;
        assert_eq!(status, StatusCode::OK, "{summary}");
        summary
    }
}

pub(crate) fn notification(object: &str, page: &str, items: Vec<Value>) -> Value {
    json!({"object": object, "entry": [{"id": page, "time": 1764150000000u64, "messaging": items}]})
}

pub(crate) fn text(person: &str, page: &str, mid: &str, text: &str) -> Value {
    json!({"sender": {"id": person}, "recipient": {"id": page}, "timestamp": 1764150000000u64,
           "message": {"mid": mid, "text": text}})
}

pub(crate) fn quick_reply(person: &str, page: &str, mid: &str, payload: &str) -> Value {
    json!({"sender": {"id": person}, "recipient": {"id": page}, "timestamp": 1764150001000u64,
           "message": {"mid": mid, "text": "Yes", "quick_reply": {"payload": payload}}})
}

async fn executed(db: &TestDb, channel: &str) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while db.count("SELECT COUNT(*) FROM commands WHERE channel = $1 AND state = 'executed'", channel).await != 1 {
        if std::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

async fn a_refund_is_confirmed_with_a_quick_reply(
    db: &TestDb,
    (object, channel, page, person): (&str, &str, &str, &str),
) {
    let meta = Meta::start(db).await;
    let refund = notification(object, page, vec![text(person, page, "m_REFUND", "refund 1234 25.00")]);
    let summary = meta.deliver(&refund).await;
    assert_eq!((summary["messages"].as_u64(), summary["stored"].as_u64()), (Some(1), Some(1)), "{summary}");
    assert_eq!(summary["channel"], channel);
    // The test gateway answers once a message is admitted (`ingest.acknowledge = "admitted"`).
    assert_eq!((summary["commands"].as_u64(), summary["pending"].as_u64()), (Some(1), Some(0)), "{summary}");
    let prompt = meta.graph.wait_for(1, Duration::from_secs(20)).await[0].clone();
    assert!(prompt.path.ends_with(&format!("/{page}/messages")), "{}", prompt.path);
    assert_eq!(prompt.body["recipient"]["id"], person);
    let yes = prompt.body["message"]["quick_replies"][0]["payload"].as_str().expect("a Yes quick reply").to_owned();
    assert!(yes.starts_with("cg:yes:"), "{}", prompt.body);

    // Meta redelivers what it got no 200 for: nothing new. The page's own echo is left.
    let again = meta.deliver(&refund).await;
    assert_eq!((again["stored"].as_u64(), again["redelivered"].as_u64()), (Some(0), Some(1)), "{again}");
    let mut echo = text(page, person, "m_ECHO", "Please confirm");
    echo["message"]["is_echo"] = json!(true);
    let tap = notification(object, page, vec![echo, quick_reply(person, page, "m_YES", &yes)]);
    let summary = meta.deliver(&tap).await;
    assert_eq!((summary["stored"].as_u64(), summary["skipped"].as_u64()), (Some(1), Some(1)), "{summary}");
    assert!(executed(db, channel).await, "the refund ran once confirmed");
    let sent = meta.graph.exactly(3).await;
    assert!(sent.iter().all(|r| r.body["recipient"]["id"] == person));
    assert_eq!(db.count("SELECT COUNT(*) FROM inbound_messages WHERE channel = $1", channel).await, 2);
    meta.app.stop().await.expect("stop");
}

async fn a_messenger_refund_is_confirmed_with_a_quick_reply(db: &TestDb) {
    a_refund_is_confirmed_with_a_quick_reply(db, ("page", "messenger", PAGE, PSID)).await;
}

async fn an_instagram_refund_is_confirmed_with_a_quick_reply(db: &TestDb) {
    a_refund_is_confirmed_with_a_quick_reply(db, ("instagram", "instagram", INSTAGRAM_ACCOUNT, IGSID)).await;
}

async fn forged_and_malformed_deliveries_are_refused_and_store_nothing(db: &TestDb) {
    let meta = Meta::start(db).await;
    let refund = notification("page", PAGE, vec![text(PSID, PAGE, "m_FORGED", "refund 1234 25.00")]).to_string();
    let other = json!({"object": "user", "entry": []}).to_string();
    for (body, signature, want) in [
        (refund.as_bytes(), None, StatusCode::UNAUTHORIZED),
        (refund.as_bytes(), Some("sha256=00".to_owned()), StatusCode::UNAUTHORIZED),
        (b"{\"object\": ".as_slice(), Some(meta.sign(b"{\"object\": ")), StatusCode::BAD_REQUEST),
        (other.as_bytes(), Some(meta.sign(other.as_bytes())), StatusCode::BAD_REQUEST),
    ] {
        let (status, kind, problem) = meta.post(body, signature).await;
        assert_eq!(status, want, "{problem}");
        assert_eq!(kind, "application/problem+json", "{problem}");
    }
    assert_eq!(db.count_inbox("SELECT COUNT(*) FROM inbox WHERE channel = $1", "messenger").await, 0);
    assert_eq!(db.count("SELECT COUNT(*) FROM inbound_messages WHERE channel = $1", "messenger").await, 0);
    let token = db.config.whatsapp.apps["default"].verify_token.expose().to_owned();
    let path = format!("/webhooks/messenger?hub.mode=subscribe&hub.verify_token={token}&hub.challenge=42");
    let handshake = meta.app.client.get(meta.app.url(&path)).send().await.expect("handshake");
    assert_eq!((handshake.status(), handshake.text().await.unwrap_or_default()), (StatusCode::OK, "42".to_owned()));
    meta.app.stop().await.expect("stop");
}
