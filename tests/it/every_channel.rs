//! Issue 32's one conversation, run for every channel with buttons — WhatsApp, Telegram, Slack,
//! Messenger, Instagram, LINE — on both backends: a person asks for a refund, is sent the prompt
//! through a stand-in for the provider's API, confirms with the channel's own button, and is sent
//! the outcome; the provider redelivering the request and the tap changes nothing; a forged
//! request is refused and stores nothing. Each channel drives it with the requests its own tests
//! take from the provider's documentation (`e2e_whatsapp`, `e2e_telegram`, `e2e_slack`,
//! `e2e_messenger`, `e2e_line`). (Twilio has no buttons: its prompt is answered by typing, `e2e_twilio`.)

use std::time::{Duration, Instant};

use chatgate::channels::whatsapp::simulate as whatsapp;
use reqwest::StatusCode;
use serde_json::Value;

use crate::e2e_line as line;
use crate::e2e_messenger as messenger;
use crate::e2e_slack::{self as slack, Signed};
use crate::e2e_telegram as telegram;
use crate::fake_graph::{FakeServer, sending_through};
use crate::helpers::{CUSTOMER, DEMO_NUMBER, Meta, TestApp, TestDb, on_both_backends};

on_both_backends!(whatsapp_refund, telegram_refund, slack_refund, messenger_refund, instagram_refund, line_refund);

async fn whatsapp_refund(db: &TestDb) {
    a_refund_is_confirmed_with_the_channels_button::<WhatsApp>(db).await;
}
async fn telegram_refund(db: &TestDb) {
    a_refund_is_confirmed_with_the_channels_button::<telegram::Telegram>(db).await;
}
async fn slack_refund(db: &TestDb) {
    a_refund_is_confirmed_with_the_channels_button::<slack::Slack>(db).await;
}
async fn messenger_refund(db: &TestDb) {
    a_refund_is_confirmed_with_the_channels_button::<Page<false>>(db).await;
}
async fn instagram_refund(db: &TestDb) {
    a_refund_is_confirmed_with_the_channels_button::<Page<true>>(db).await;
}
async fn line_refund(db: &TestDb) {
    a_refund_is_confirmed_with_the_channels_button::<line::Line>(db).await;
}

/// A chat channel as a person and the provider use it.
trait Channel: Sized {
    /// The `channel` the gateway records its messages under.
    const NAME: &'static str;
    async fn start(db: &TestDb) -> Self;
    /// Its gateway, to stop.
    fn into_app(self) -> TestApp;
    /// The stand-in for the provider's sending API.
    fn api(&self) -> &FakeServer;
    /// The person writes `text` as the provider's message `n` (the same `n` again: a redelivery).
    async fn write(&self, n: i64, text: &str) -> StatusCode;
    /// The person taps the button that carries `data`, as the provider's message `n`.
    async fn tap(&self, n: i64, data: &str) -> StatusCode;
    /// `text` as message `n`, with a signature (or secret) that is not the provider's.
    async fn forge(&self, n: i64, text: &str) -> StatusCode;
    /// The data of the "Yes" button in a prompt as the provider's API received it.
    fn yes_of(prompt: &Value) -> Option<&str>;
}

async fn a_refund_is_confirmed_with_the_channels_button<C: Channel>(db: &TestDb) {
    let channel = C::start(db).await;
    let name = C::NAME;
    assert_eq!(channel.write(1, "refund 1234 25.00").await, StatusCode::OK, "{name}");
    let prompt = channel.api().wait_for(1, Duration::from_secs(20)).await[0].body.clone();
    let yes = C::yes_of(&prompt).unwrap_or_else(|| panic!("{name}: a Yes button in {prompt}")).to_owned();
    assert!(yes.starts_with("cg:yes:"), "{name}: {yes}");

    // The provider redelivers the request and the tap: nothing new either time.
    assert_eq!(channel.write(1, "refund 1234 25.00").await, StatusCode::OK, "{name}");
    assert_eq!(channel.tap(2, &yes).await, StatusCode::OK, "{name}");
    until_executed(db, name).await;
    assert_eq!(channel.tap(2, &yes).await, StatusCode::OK, "{name}");
    // The prompt, the confirmation's thanks and the outcome, each sent once.
    let sent = channel.api().exactly(3).await;
    assert!(C::yes_of(&sent[2].body).is_none(), "{name}: the outcome has no buttons: {}", sent[2].body);

    // A forged request is refused and stores nothing.
    assert_eq!(channel.forge(3, "refund 999 1.00").await, StatusCode::UNAUTHORIZED, "{name}");
    let rows = |sql: &'static str| db.count(sql, name);
    assert_eq!(rows("SELECT COUNT(*) FROM inbound_messages WHERE channel = $1").await, 2, "{name}");
    assert_eq!(rows("SELECT COUNT(*) FROM commands WHERE channel = $1").await, 1, "{name}");
    assert_eq!(db.count_inbox("SELECT COUNT(*) FROM inbox WHERE channel = $1", name).await, 2, "{name}");
    channel.into_app().stop().await.expect("stop");
}

/// Waits (20 s at most) until the channel's one command has executed.
async fn until_executed(db: &TestDb, channel: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let executed = "SELECT COUNT(*) FROM commands WHERE state = 'executed' AND channel = $1";
    while db.count(executed, channel).await != 1 {
        assert!(Instant::now() < deadline, "{channel}: the refund never executed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

struct WhatsApp {
    app: TestApp,
    graph: FakeServer,
    secret: String,
}

impl WhatsApp {
    fn meta(&self) -> Meta<'_> {
        Meta { app: &self.app, secret: self.secret.clone() }
    }

    async fn deliver(&self, message: Value) -> StatusCode {
        self.meta().post(&whatsapp::notification(DEMO_NUMBER, vec![message], vec![])).await.status()
    }
}

impl Channel for WhatsApp {
    const NAME: &'static str = "whatsapp";

    async fn start(db: &TestDb) -> Self {
        let graph = FakeServer::start().await;
        let app = crate::helpers::spawn_app_with(db, sending_through(&db.config, &graph)).await;
        let secret = db.config.whatsapp.apps["default"].app_secret.expose().to_owned();
        Self { app, graph, secret }
    }

    fn into_app(self) -> TestApp {
        self.app
    }

    fn api(&self) -> &FakeServer {
        &self.graph
    }

    async fn write(&self, n: i64, text: &str) -> StatusCode {
        self.deliver(whatsapp::text(&format!("wamid.EVERY{n}"), CUSTOMER, text)).await
    }

    async fn tap(&self, n: i64, data: &str) -> StatusCode {
        self.deliver(whatsapp::button_reply(&format!("wamid.EVERY{n}"), CUSTOMER, data, "Yes")).await
    }

    async fn forge(&self, n: i64, text: &str) -> StatusCode {
        let body = whatsapp::notification(
            DEMO_NUMBER,
            vec![whatsapp::text(&format!("wamid.EVERY{n}"), CUSTOMER, text)],
            vec![],
        );
        self.meta().post_raw(body.to_string().into_bytes(), Some(format!("sha256={}", "0".repeat(64)))).await.status()
    }

    fn yes_of(prompt: &Value) -> Option<&str> {
        prompt["interactive"]["action"]["buttons"][0]["reply"]["id"].as_str()
    }
}

impl Channel for telegram::Telegram {
    const NAME: &'static str = "telegram";

    async fn start(db: &TestDb) -> Self {
        telegram::Telegram::start(db).await
    }

    fn into_app(self) -> TestApp {
        self.app
    }

    fn api(&self) -> &FakeServer {
        &self.api
    }

    async fn write(&self, n: i64, text: &str) -> StatusCode {
        let update = chatgate::channels::telegram::simulate::text(n, telegram::CUSTOMER, text);
        self.post(update.to_string().as_bytes(), Some(&self.secret)).await.0
    }

    async fn tap(&self, n: i64, data: &str) -> StatusCode {
        let update = chatgate::channels::telegram::simulate::button(n, telegram::CUSTOMER, data);
        self.post(update.to_string().as_bytes(), Some(&self.secret)).await.0
    }

    async fn forge(&self, n: i64, text: &str) -> StatusCode {
        let update = chatgate::channels::telegram::simulate::text(n, telegram::CUSTOMER, text);
        self.post(update.to_string().as_bytes(), Some("not-the-secret-token")).await.0
    }

    fn yes_of(prompt: &Value) -> Option<&str> {
        prompt["reply_markup"]["inline_keyboard"][0][0]["callback_data"].as_str()
    }
}

impl Channel for line::Line {
    const NAME: &'static str = "line";

    async fn start(db: &TestDb) -> Self {
        line::Line::start(db).await
    }

    fn into_app(self) -> TestApp {
        self.app
    }

    fn api(&self) -> &FakeServer {
        &self.api
    }

    async fn write(&self, n: i64, text: &str) -> StatusCode {
        self.send(&chatgate::channels::line::simulate::text(line::BOT, &format!("e{n}"), line::CUSTOMER, text)).await
    }

    async fn tap(&self, n: i64, data: &str) -> StatusCode {
        let tap = chatgate::channels::line::simulate::postback(line::BOT, &format!("e{n}"), line::CUSTOMER, data);
        self.send(&tap).await
    }

    async fn forge(&self, n: i64, text: &str) -> StatusCode {
        let event = chatgate::channels::line::simulate::text(line::BOT, &format!("e{n}"), line::CUSTOMER, text);
        let (signature, body) = chatgate::channels::line::simulate::signed("not-the-channel-secret", &event);
        self.post(body.as_bytes(), Some(&signature)).await.0
    }

    fn yes_of(prompt: &Value) -> Option<&str> {
        prompt["messages"][0]["quickReply"]["items"][0]["action"]["data"].as_str()
    }
}

/// The thread the Slack conversation happens in.
const THREAD: &str = "1764150000.000100";

impl Channel for slack::Slack {
    const NAME: &'static str = "slack";

    async fn start(db: &TestDb) -> Self {
        slack::Slack::start(db).await
    }

    fn into_app(self) -> TestApp {
        self.app
    }

    fn api(&self) -> &FakeServer {
        &self.api
    }

    async fn write(&self, n: i64, text: &str) -> StatusCode {
        let event = slack::message(&format!("Ev0EVERY{n}"), THREAD, text).to_string();
        self.post("/webhooks/slack/events", "application/json", &event, Signed::Now).await.0
    }

    async fn tap(&self, _n: i64, data: &str) -> StatusCode {
        // A tap is known by its trigger id, the same in Slack's every retry of it.
        let body =
            form_urlencoded::Serializer::new(String::new()).append_pair("payload", &slack::tap(data, THREAD)).finish();
        self.post("/webhooks/slack/interactivity", "application/x-www-form-urlencoded", &body, Signed::Now).await.0
    }

    async fn forge(&self, n: i64, text: &str) -> StatusCode {
        let event = slack::message(&format!("Ev0EVERY{n}"), THREAD, text).to_string();
        self.post("/webhooks/slack/events", "application/json", &event, Signed::Wrong).await.0
    }

    fn yes_of(prompt: &Value) -> Option<&str> {
        prompt["blocks"][1]["elements"][0]["value"].as_str()
    }
}

/// A Messenger page (`INSTAGRAM = false`) or an Instagram account, on the same Meta app.
struct Page<const INSTAGRAM: bool>(messenger::Meta);

impl<const INSTAGRAM: bool> Page<INSTAGRAM> {
    /// The delivery's `object`, the business's id and the person's id on it.
    fn ids() -> (&'static str, &'static str, &'static str) {
        if INSTAGRAM {
            ("instagram", messenger::INSTAGRAM_ACCOUNT, messenger::IGSID)
        } else {
            ("page", messenger::PAGE, messenger::PSID)
        }
    }

    async fn deliver(&self, item: Value, signed: bool) -> StatusCode {
        let (object, page, _) = Self::ids();
        let body = messenger::notification(object, page, vec![item]).to_string().into_bytes();
        let signature = if signed { self.0.sign(&body) } else { format!("sha256={}", "0".repeat(64)) };
        self.0.post(&body, Some(signature)).await.0
    }
}

impl<const INSTAGRAM: bool> Channel for Page<INSTAGRAM> {
    const NAME: &'static str = if INSTAGRAM { "instagram" } else { "messenger" };

    async fn start(db: &TestDb) -> Self {
        Self(messenger::Meta::start(db).await)
    }

    fn into_app(self) -> TestApp {
        self.0.app
    }

    fn api(&self) -> &FakeServer {
        &self.0.graph
    }

    async fn write(&self, n: i64, text: &str) -> StatusCode {
        let (_, page, person) = Self::ids();
        self.deliver(messenger::text(person, page, &format!("m_EVERY{n}"), text), true).await
    }

    async fn tap(&self, n: i64, data: &str) -> StatusCode {
        let (_, page, person) = Self::ids();
        self.deliver(messenger::quick_reply(person, page, &format!("m_EVERY{n}"), data), true).await
    }

    async fn forge(&self, n: i64, text: &str) -> StatusCode {
        let (_, page, person) = Self::ids();
        self.deliver(messenger::text(person, page, &format!("m_EVERY{n}"), text), false).await
    }

    fn yes_of(prompt: &Value) -> Option<&str> {
        prompt["message"]["quick_replies"][0]["payload"].as_str()
    }
}
