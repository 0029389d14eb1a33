//! A Slack app over HTTP, signed by the test's own signer (written from Slack's "Verifying
//! requests from Slack", checked against slack_sdk's example in `channels::slack::signature`):
//! the Events API handshake, a person's direct message asking for a refund, the prompt posted in
//! its thread through a stand-in for `chat.postMessage` with the buttons as an actions block, the
//! "Yes" tap (`block_actions`), the outcome; a retried event changes nothing; a slash command is
//! taken; forged, stale and malformed requests are refused and store nothing.

use std::time::Duration;

use hmac::{Hmac, Mac};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fake_graph::{Answer, FakeServer, sending_through};
use crate::helpers::{TestApp, TestDb, on_both_backends};

on_both_backends!(
    a_refund_is_confirmed_with_a_button_in_its_thread_and_a_retry_counts_once,
    forged_stale_and_malformed_requests_are_refused_and_store_nothing,
    slacks_ssl_check_is_answered_200_and_a_command_signed_by_slack_sdk_is_taken,
);

/// The demo workspace and customer (config/directory.toml).
const TEAM: &str = "T0DEMO";
const CUSTOMER: &str = "U0DEMO1";
const DM: &str = "D0DEMO1";
const BOT_TOKEN: &str = "xoxb-test-token";

fn slack_default(n: usize) -> Answer {
    let ts = format!("1764150000.{n:06}");
    Answer { status: 200, body: json!({"ok": true, "channel": DM, "ts": ts, "message": {}}), retry_after: None }
}

pub(crate) struct Slack {
    pub(crate) app: TestApp,
    pub(crate) api: FakeServer,
    /// Meta's Graph API stand-in, which the WhatsApp replies go to.
    pub(crate) graph: FakeServer,
    secret: String,
}

impl Slack {
    pub(crate) async fn start(db: &TestDb) -> Self {
        Self::start_as(db, db.config.clone(), None).await
    }

    /// A gateway on `config` (with the stand-ins' addresses) and, if given, a registry of its own.
    pub(crate) async fn start_as(db: &TestDb, config: chatgate::config::Config, commands: Option<&str>) -> Self {
        let (api, graph) = (FakeServer::start_with(slack_default).await, FakeServer::start().await);
        let mut config = sending_through(&config, &graph);
        config.slack.api_base = format!("{}/api", api.url);
        config.slack.bot_token = chatgate::config::Secret::new(BOT_TOKEN);
        let secret = config.slack.signing_secret.expose().to_owned();
        assert!(!secret.is_empty(), "the shipped configuration enables Slack with a demo secret");
        let app = match commands {
            Some(commands) => crate::helpers::spawn_app_with_registry(db, config, commands).await,
            None => crate::helpers::spawn_app_with(db, config).await,
        };
        Self { app, api, graph, secret }
    }

    /// `v0=` + hex HMAC-SHA256 of `v0:{timestamp}:{body}` (Slack's description).
    fn sign(&self, timestamp: i64, body: &str) -> String {
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(self.secret.as_bytes()).expect("key");
        mac.update(format!("v0:{timestamp}:{body}").as_bytes());
        format!("v0={}", hex::encode(mac.finalize().into_bytes()))
    }

    pub(crate) async fn post(&self, path: &str, kind: &str, body: &str, signed: Signed) -> (StatusCode, String, Value) {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let mut request = self.app.client.post(self.app.url(path)).header("content-type", kind).body(body.to_owned());
        match signed {
            Signed::Now => {
                request =
                    request.header("x-slack-request-timestamp", now).header("x-slack-signature", self.sign(now, body))
            }
            Signed::Retry(n) => {
                request = request
                    .header("x-slack-request-timestamp", now)
                    .header("x-slack-signature", self.sign(now, body))
                    .header("x-slack-retry-num", n)
                    .header("x-slack-retry-reason", "http_timeout");
            }
            Signed::At(then) => {
                request =
                    request.header("x-slack-request-timestamp", then).header("x-slack-signature", self.sign(then, body))
            }
            Signed::Wrong => {
                request = request.header("x-slack-request-timestamp", now).header("x-slack-signature", "v0=00")
            }
            Signed::BySdk => {
                let Some(signature) = slack_sdk_signature(&self.secret, now, body) else {
                    return (StatusCode::NOT_IMPLEMENTED, String::new(), Value::Null);
                };
                request = request.header("x-slack-request-timestamp", now).header("x-slack-signature", signature);
            }
            Signed::Not => {}
        }
        let response = request.send().await.expect("request");
        let status = response.status();
        let content_type =
            response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        let text = response.text().await.unwrap_or_default();
        (status, content_type, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub(crate) async fn event(&self, body: &Value, signed: Signed) -> Value {
        let (status, _, answer) =
            self.post("/webhooks/slack/events", "application/json", &body.to_string(), signed).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        answer
    }

    async fn form(&self, path: &str, pairs: &[(&str, &str)]) -> StatusCode {
        let body = form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish();
        self.post(path, "application/x-www-form-urlencoded", &body, Signed::Now).await.0
    }
}

#[derive(Clone, Copy)]
pub(crate) enum Signed {
    Now,
    Retry(u32),
    At(i64),
    Wrong,
    Not,
    /// By Slack's own Python SDK (`slack_sdk.signature.SignatureVerifier.generate_signature`).
    BySdk,
}

/// `X-Slack-Signature` as Slack's Python SDK makes it (the package `slack_sdk` from PyPI, which
/// `.ci/run` installs); `None`, and the test says it was skipped, where it is not installed.
fn slack_sdk_signature(secret: &str, timestamp: i64, body: &str) -> Option<String> {
    let script = "import sys\nfrom slack_sdk.signature import SignatureVerifier\n\
        print(SignatureVerifier(sys.argv[1]).generate_signature(timestamp=sys.argv[2], body=sys.argv[3]))\n";
    crate::helpers::python_prints("slack_sdk", script, &[secret, &timestamp.to_string(), body])
}

pub(crate) fn message(event_id: &str, ts: &str, text: &str) -> Value {
    json!({
        "token": "legacy", "team_id": TEAM, "api_app_id": "A0APP", "type": "event_callback",
        "event_id": event_id, "event_time": 1764150000,
        "event": {"type": "message", "channel": DM, "channel_type": "im", "user": CUSTOMER, "text": text, "ts": ts, "event_ts": ts},
    })
}

pub(crate) fn tap(value: &str, thread: &str) -> String {
    json!({
        "type": "block_actions", "team": {"id": TEAM}, "user": {"id": CUSTOMER, "team_id": TEAM},
        "api_app_id": "A0APP", "trigger_id": "111.222.abc",
        "container": {"type": "message", "message_ts": "1764150000.000001", "channel_id": DM, "thread_ts": thread},
        "channel": {"id": DM},
        "actions": [{"type": "button", "action_id": value, "value": value, "text": {"type": "plain_text", "text": "Yes"},
                     "action_ts": "1764150001.000001"}],
    })
    .to_string()
}

async fn settled(db: &TestDb) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let mut conn = db.raw().await;
        let state: String =
            sqlx::query_scalar("SELECT state FROM commands WHERE channel = 'slack' ORDER BY received_at LIMIT 1")
                .fetch_one(&mut conn)
                .await
                .expect("a command");
        if state == "executed" || std::time::Instant::now() > deadline {
            return state;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn a_refund_is_confirmed_with_a_button_in_its_thread_and_a_retry_counts_once(db: &TestDb) {
    let slack = Slack::start(db).await;
    let handshake = json!({"token": "legacy", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification"});
    assert_eq!(slack.event(&handshake, Signed::Now).await, json!({"challenge": handshake["challenge"]}));

    let thread = "1764150000.000100";
    let refund = message("Ev0REFUND1", thread, "refund 1234 25.00");
    assert_eq!(slack.event(&refund, Signed::Now).await, json!({}));
    let prompt = &slack.api.wait_for(1, Duration::from_secs(20)).await[0];
    assert_eq!(prompt.path, "/api/chat.postMessage");
    assert_eq!(prompt.authorization.as_deref(), Some(format!("Bearer {BOT_TOKEN}").as_str()));
    assert_eq!((prompt.body["channel"].as_str(), prompt.body["thread_ts"].as_str()), (Some(DM), Some(thread)));
    let yes = prompt.body["blocks"][1]["elements"][0]["value"].as_str().expect("a Yes button").to_owned();
    assert!(yes.starts_with("cg:yes:"), "{}", prompt.body);

    // Slack retries an event it got no timely answer for: the same event_id, nothing new.
    slack.event(&refund, Signed::Retry(1)).await;
    assert_eq!(slack.form("/webhooks/slack/interactivity", &[("payload", &tap(&yes, thread))]).await, StatusCode::OK);
    assert_eq!(settled(db).await, "executed");
    let sent = slack.api.exactly(3).await;
    assert!(sent.iter().all(|r| r.body["thread_ts"] == thread), "every reply in the request's thread");
    assert_eq!(db.count("SELECT COUNT(*) FROM inbound_messages WHERE channel = $1", "slack").await, 2);
    assert_eq!(db.count("SELECT COUNT(*) FROM commands WHERE channel = $1", "slack").await, 1);

    // A slash command is a request like any other message.
    let command = [
        ("command", "/chatgate"),
        ("text", "refund 1234 25.00"),
        ("team_id", TEAM),
        ("user_id", CUSTOMER),
        ("channel_id", DM),
        ("trigger_id", "333.444.def"),
        ("response_url", "https://hooks.slack.com/commands/x"),
    ];
    assert_eq!(slack.form("/webhooks/slack/commands", &command).await, StatusCode::OK);
    // The test gateway answers once a message is admitted (`ingest.acknowledge = "admitted"`).
    let stored = "SELECT COUNT(*) FROM inbound_messages WHERE provider_message_id = $1";
    assert_eq!(db.count(stored, "command:333.444.def").await, 1, "the slash command was admitted before the answer");
    slack.app.stop().await.expect("stop");
}

async fn forged_stale_and_malformed_requests_are_refused_and_store_nothing(db: &TestDb) {
    let slack = Slack::start(db).await;
    let refund = message("Ev0FORGED", "1764150000.000200", "refund 1234 25.00").to_string();
    let an_hour_ago = time::OffsetDateTime::now_utc().unix_timestamp() - 3600;
    for (body, signed, want) in [
        (refund.as_str(), Signed::Not, StatusCode::UNAUTHORIZED),
        (refund.as_str(), Signed::Wrong, StatusCode::UNAUTHORIZED),
        (refund.as_str(), Signed::At(an_hour_ago), StatusCode::UNAUTHORIZED),
        ("{\"type\": \"event_callback\", ", Signed::Now, StatusCode::BAD_REQUEST),
        (r#"{"type": "event_callback", "team_id": "T0DEMO"}"#, Signed::Now, StatusCode::BAD_REQUEST),
        (r#"{"type": "block_suggestion"}"#, Signed::Now, StatusCode::BAD_REQUEST),
    ] {
        let (status, kind, problem) = slack.post("/webhooks/slack/events", "application/json", body, signed).await;
        assert_eq!(status, want, "{problem}");
        assert_eq!(kind, "application/problem+json", "{problem}");
        assert!(problem["title"].is_string() && problem["detail"].is_string(), "{problem}");
    }
    let command_without_trigger = [("command", "/chatgate"), ("text", "refund 1 2"), ("team_id", TEAM)];
    assert_eq!(slack.form("/webhooks/slack/commands", &command_without_trigger).await, StatusCode::BAD_REQUEST);
    assert_eq!(slack.form("/webhooks/slack/interactivity", &[("payload", "{")]).await, StatusCode::BAD_REQUEST);
    assert_eq!(db.count_inbox("SELECT COUNT(*) FROM inbox WHERE channel = $1", "slack").await, 0);
    assert_eq!(db.count("SELECT COUNT(*) FROM inbound_messages WHERE channel = $1", "slack").await, 0);
    assert!(slack.api.requests().is_empty());
    slack.app.stop().await.expect("stop");
}

/// Issue 44.8: Slack checks a slash command's certificate with a POST of `ssl_check=1` and a token
/// to its URL, and expects 200: answered at once (signed by Slack's SDK or not at all, as Bolt takes
/// it before verifying), storing nothing; a slash command signed by Slack's SDK is taken.
async fn slacks_ssl_check_is_answered_200_and_a_command_signed_by_slack_sdk_is_taken(db: &TestDb) {
    let slack = Slack::start(db).await;
    let check = form_urlencoded::Serializer::new(String::new())
        .extend_pairs([("ssl_check", "1"), ("token", "gIkuvaNzQIHg97ATvDxqgjtO")])
        .finish();
    let kind = "application/x-www-form-urlencoded";
    let (status, _, _) = slack.post("/webhooks/slack/commands", kind, &check, Signed::BySdk).await;
    if status == StatusCode::NOT_IMPLEMENTED {
        return;
    }
    assert_eq!(status, StatusCode::OK, "signed by the SDK");
    assert_eq!(slack.post("/webhooks/slack/commands", kind, &check, Signed::Not).await.0, StatusCode::OK, "unsigned");
    assert_eq!(db.count_inbox("SELECT COUNT(*) FROM inbox WHERE channel = $1", "slack").await, 0, "nothing stored");

    let command = form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("command", "/chatgate"),
            ("text", "order status 1234"),
            ("team_id", TEAM),
            ("user_id", CUSTOMER),
            ("channel_id", DM),
            ("trigger_id", "13345224609.738474920.8088930838d88f008e0"),
        ])
        .finish();
    let (status, _, answer) = slack.post("/webhooks/slack/commands", kind, &command, Signed::BySdk).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(db.count_inbox("SELECT COUNT(*) FROM inbox WHERE channel = $1", "slack").await, 1);
    slack.app.stop().await.expect("stop");
}
