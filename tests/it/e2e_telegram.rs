//! Telegram bots over HTTP, from updates shaped as the Bot API documents them
//! (core.telegram.org/bots/api#update, #message, #callbackquery; the simulator's builders): a
//! person asks for a refund, is sent the prompt with an inline keyboard through a stand-in for
//! the Bot API, taps "Yes" (a `callback_query`, answered in the webhook's own answer with
//! `answerCallbackQuery`), and is sent the outcome; a redelivered update changes nothing; a
//! forged or malformed one is refused and stores nothing.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use chatgate::channels::telegram::simulate;

use crate::fake_graph::{Answer, FakeServer, sending_through};
use crate::helpers::{TestApp, TestDb, on_both_backends};

on_both_backends!(
    a_refund_is_confirmed_with_the_inline_keyboard_and_each_update_counts_once,
    forged_and_malformed_updates_are_refused_and_store_nothing,
);

/// The demo customer's Telegram user id (config/directory.toml).
pub(crate) const CUSTOMER: i64 = 700000001;
const BOT_TOKEN: &str = "123456:TEST-token";

fn bot_api_default(n: usize) -> Answer {
    let message = json!({"message_id": 1000 + n, "chat": {"id": CUSTOMER, "type": "private"}, "date": 0, "text": ""});
    Answer { status: 200, body: json!({"ok": true, "result": message}), retry_after: None }
}

pub(crate) struct Telegram {
    pub(crate) app: TestApp,
    pub(crate) api: FakeServer,
    pub(crate) secret: String,
}

impl Telegram {
    pub(crate) async fn start(db: &TestDb) -> Self {
        Self::start_with(db, sending_through(&db.config, &FakeServer::start().await)).await
    }

    /// A gateway on `config` (its other channels as the caller set them) with a Bot API stand-in.
    pub(crate) async fn start_with(db: &TestDb, mut config: chatgate::config::Config) -> Self {
        let api = FakeServer::start_with(bot_api_default).await;
        config.telegram.api_base = api.url.clone();
        config.telegram.bot_token = chatgate::config::Secret::new(BOT_TOKEN);
        let secret = config.telegram.secret_token.expose().to_owned();
        assert!(!config.telegram.bot.is_empty(), "the shipped configuration names the demo bot");
        Self { app: crate::helpers::spawn_app_with(db, config).await, api, secret }
    }

    pub(crate) async fn post(&self, body: &[u8], secret: Option<&str>) -> (StatusCode, String, Value) {
        crate::helpers::post_json(
            &self.app,
            "/webhooks/telegram",
            secret.map(|value| ("X-Telegram-Bot-Api-Secret-Token", value)),
            body,
        )
        .await
    }

    async fn update(&self, update: &Value) -> Value {
        let (status, _, answer) = self.post(update.to_string().as_bytes(), Some(&self.secret)).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        answer
    }
}

async fn a_refund_is_confirmed_with_the_inline_keyboard_and_each_update_counts_once(db: &TestDb) {
    let telegram = Telegram::start(db).await;
    let refund = simulate::text(1, CUSTOMER, "refund 1234 25.00");
    assert_eq!(telegram.update(&refund).await, json!({}), "nothing for Telegram to run");
    // The test gateway answers once a message is admitted (`ingest.acknowledge = "admitted"`).
    let commands = "SELECT COUNT(*) FROM commands WHERE channel = $1";
    assert_eq!(db.count(commands, "telegram").await, 1, "admitted before the answer");
    let prompt = &telegram.api.wait_for(1, Duration::from_secs(20)).await[0];
    assert_eq!(prompt.path, format!("/bot{BOT_TOKEN}/sendMessage"));
    assert_eq!(prompt.body["chat_id"], CUSTOMER);
    assert!(prompt.body["text"].as_str().is_some_and(|t| t.contains("1234")), "{}", prompt.body);
    let keyboard = &prompt.body["reply_markup"]["inline_keyboard"][0];
    let yes = keyboard[0]["callback_data"].as_str().expect("a Yes button").to_owned();
    assert!(
        yes.starts_with("cg:yes:") && keyboard[1]["callback_data"].as_str().is_some_and(|d| d.starts_with("cg:no:"))
    );

    // Telegram redelivers an update it got no 2xx for: the same update_id, nothing new.
    telegram.update(&refund).await;
    let tap = simulate::button(2, CUSTOMER, &yes);
    let answer = telegram.update(&tap).await;
    assert_eq!(answer, json!({"method": "answerCallbackQuery", "callback_query_id": "cq2"}));
    assert_eq!(crate::helpers::first_command_state(db, "executed").await, "executed");
    assert_eq!(telegram.update(&tap).await, answer, "a redelivered tap is answered alike and confirms nothing");

    // The prompt, the confirmation's thanks and the outcome: three messages, each once.
    let sent = telegram.api.exactly(3).await;
    assert!(sent.iter().all(|r| r.body["chat_id"] == CUSTOMER));
    assert!(sent[2].body.get("reply_markup").is_none(), "the outcome has no buttons: {}", sent[2].body);
    let one = |sql: &'static str| db.count(sql, "telegram");
    assert_eq!(one("SELECT COUNT(*) FROM inbound_messages WHERE channel = $1").await, 2);
    assert_eq!(one("SELECT COUNT(*) FROM commands WHERE channel = $1").await, 1);
    let sent_evidence = "SELECT COUNT(*) FROM outbound_messages WHERE channel = $1";
    assert_eq!(one(sent_evidence).await, 3, "each send kept for its evidence");
    telegram.app.stop().await.expect("stop");
}

async fn forged_and_malformed_updates_are_refused_and_store_nothing(db: &TestDb) {
    let telegram = Telegram::start(db).await;
    let refund = simulate::text(7, CUSTOMER, "refund 1234 25.00").to_string();
    for (body, secret, want) in [
        (refund.as_bytes(), None, StatusCode::UNAUTHORIZED),
        (refund.as_bytes(), Some("not-the-secret"), StatusCode::UNAUTHORIZED),
        (b"{\"update_id\": 8, \"message\": ".as_slice(), Some(telegram.secret.as_str()), StatusCode::BAD_REQUEST),
        (
            br#"{"message": {"text": "no update id"}}"#.as_slice(),
            Some(telegram.secret.as_str()),
            StatusCode::BAD_REQUEST,
        ),
        (b"[]".as_slice(), Some(telegram.secret.as_str()), StatusCode::BAD_REQUEST),
    ] {
        let (status, kind, problem) = telegram.post(body, secret).await;
        assert_eq!(status, want, "{problem}");
        assert_eq!(kind, "application/problem+json", "{problem}");
        assert!(problem["title"].is_string() && problem["detail"].is_string(), "{problem}");
    }
    assert_eq!(db.count_inbox("SELECT COUNT(*) FROM inbox WHERE channel = $1", "telegram").await, 0);
    assert_eq!(db.count("SELECT COUNT(*) FROM inbound_messages WHERE channel = $1", "telegram").await, 0);
    // An update with nothing to act on is acknowledged and stores nothing either.
    let member = json!({"update_id": 9, "my_chat_member": {"chat": {"id": CUSTOMER, "type": "private"}}});
    assert_eq!(telegram.update(&member).await, json!({}));
    assert_eq!(db.count_inbox("SELECT COUNT(*) FROM inbox WHERE channel = $1", "telegram").await, 0);
    assert!(telegram.api.requests().is_empty());
    telegram.app.stop().await.expect("stop");
}
