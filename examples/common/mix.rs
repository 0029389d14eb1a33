//! The realistic mix (issue #49), beside the all-reads flood: refunds that are prompted and
//! confirmed — two messages from each person, "refund N 25.00" and then "yes" once the prompt has
//! reached them, as a person answers — from people of a directory of 10,000, on three channels
//! (WhatsApp, Messenger and Telegram, a third each), a tenth of the deliveries sent a second time
//! as a provider's retry does. Every refund is a mutation: dedupe, confirmation, lock, dispatch
//! to the builtin executor, the result's reply. The stand-ins answer each channel's send API as
//! the provider does, and send the person's "yes" when the prompt arrives.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use chatgate::channels::telegram;
use chatgate::channels::whatsapp::signature;
use serde_json::{Value, json};

use super::{SECRET, serve, signed, tenant_head, write_config};

const PAGE: &str = "200000000000001";
const BOT: &str = "bench_bot";
const BOT_TOKEN: &str = "bench-bot-token";
const TELEGRAM_SECRET: &str = "bench-telegram-secret";
/// Every tenth delivery is sent twice.
const REDELIVERED: usize = 10;

/// How many, and from how large a directory.
#[derive(Clone, Copy)]
pub struct Mix {
    pub refunds: usize,
    pub directory: usize,
    pub connections: usize,
    pub drain_timeout: Duration,
}

/// Person `n`'s channel, by thirds.
#[derive(Clone, Copy, PartialEq)]
enum Channel {
    Whatsapp,
    Messenger,
    Telegram,
}

fn channel(n: usize) -> Channel {
    [Channel::Whatsapp, Channel::Messenger, Channel::Telegram][n % 3]
}

/// The `k`th refund's person: a different one for each `k` below `directory` (7,919 is a prime
/// that divides no directory size used), spread over the directory and so over the channels.
fn person(k: usize, directory: usize) -> usize {
    (k * 7_919) % directory.max(1)
}

/// Whether person `n`'s "yes" is delivered twice: a tenth of them, spread over the channels.
fn yes_twice(n: usize) -> bool {
    n % REDELIVERED == 7
}

fn number(n: usize) -> String {
    format!("1666{n:07}")
}

fn page_scoped_id(n: usize) -> String {
    format!("26{n:013}")
}

fn telegram_id(n: usize) -> i64 {
    800_000_000 + i64::try_from(n).unwrap_or(0)
}

/// One delivery of `text` from person `n`, `k` telling it from the person's others.
struct Delivery {
    path: &'static str,
    body: Vec<u8>,
    header: (&'static str, String),
}

fn delivery(n: usize, k: usize, text: &str) -> Delivery {
    let id = format!("{n}-{k}");
    match channel(n) {
        Channel::Whatsapp => {
            let (body, signed) = signed(&format!("wamid.MIX{id}"), &number(n), text);
            Delivery { path: "/webhooks/whatsapp", body, header: (signature::HEADER, signed) }
        }
        Channel::Messenger => {
            let (psid, now) = (page_scoped_id(n), time::OffsetDateTime::now_utc().unix_timestamp() * 1000);
            let item = json!({"sender": {"id": psid}, "recipient": {"id": PAGE}, "timestamp": now,
                "message": {"mid": format!("m_MIX{id}"), "text": text}});
            let body = json!({"object": "page", "entry": [{"id": PAGE, "time": now, "messaging": [item]}]});
            let body = body.to_string().into_bytes();
            let signed = signature::sign(SECRET.as_bytes(), &body);
            Delivery { path: "/webhooks/messenger", body, header: (signature::HEADER, signed) }
        }
        Channel::Telegram => {
            let update = i64::try_from(n * 4 + k).unwrap_or(0) + 1;
            let body = telegram::simulate::text(update, telegram_id(n), text).to_string().into_bytes();
            Delivery { path: "/webhooks/telegram", body, header: (telegram::SECRET_HEADER, TELEGRAM_SECRET.into()) }
        }
    }
}

/// What the stand-ins saw: each person's messages, when each refund was settled, and how many
/// "yes" deliveries went out.
#[derive(Default)]
struct Seen {
    messages: HashMap<usize, Vec<String>>,
    settled: Vec<Instant>,
    sent: usize,
}

#[derive(Clone)]
struct Providers {
    gateway: Arc<OnceLock<(reqwest::Client, String)>>,
    seen: Arc<Mutex<Seen>>,
}

impl Providers {
    /// A message reached person `n`: the first is the prompt, answered "yes"; the second says the
    /// refund was confirmed, the third how it ended (the builtin executor's "Done"), settling it.
    fn reached(&self, n: usize, text: &str) {
        let Ok(mut seen) = self.seen.lock() else { return };
        let messages = seen.messages.entry(n).or_default();
        messages.push(text.to_owned());
        match messages.len() {
            1 => {
                seen.sent += 1 + usize::from(yes_twice(n));
                let providers = self.clone();
                tokio::spawn(async move { providers.send(&delivery(n, 1, "yes"), yes_twice(n)).await });
            }
            3 => seen.settled.push(Instant::now()),
            _ => {}
        }
    }

    /// Sends `delivery`, and once more after its answer when `twice`; whether all went through.
    async fn send(&self, delivery: &Delivery, twice: bool) -> bool {
        let Some((client, base)) = self.gateway.get() else { return false };
        let mut ok = true;
        for _ in 0..1 + usize::from(twice) {
            let request = client.post(format!("{base}{}", delivery.path)).header("content-type", "application/json");
            let request = request.header(delivery.header.0, &delivery.header.1).body(delivery.body.clone());
            ok &= request.send().await.is_ok_and(|answer| answer.status().is_success());
        }
        ok
    }
}

/// Graph's send API, for WhatsApp (`to`) and Messenger (`recipient.id`).
async fn graph(State(providers): State<Providers>, Json(body): Json<Value>) -> Json<Value> {
    let text = [&body["text"]["body"], &body["interactive"]["body"]["text"], &body["message"]["text"]]
        .into_iter()
        .find_map(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let id = format!("m_OUT{}", uuid::Uuid::now_v7().simple());
    if let Some(psid) = body["recipient"]["id"].as_str() {
        if let Some(n) = psid.strip_prefix("26").and_then(|n| n.parse().ok()) {
            providers.reached(n, &text);
        }
        return Json(json!({"recipient_id": psid, "message_id": id}));
    }
    if let Some(n) = body["to"].as_str().and_then(|to| to.strip_prefix("1666")).and_then(|n| n.parse().ok()) {
        providers.reached(n, &text);
    }
    Json(json!({"messaging_product": "whatsapp", "messages": [{"id": format!("wamid.{id}")}]}))
}

/// The Bot API's `sendMessage`.
async fn bot(State(providers): State<Providers>, Json(body): Json<Value>) -> Json<Value> {
    let chat = body["chat_id"].as_i64().unwrap_or_default();
    if let Ok(n) = usize::try_from(chat - telegram_id(0)) {
        providers.reached(n, body["text"].as_str().unwrap_or_default());
    }
    let id = uuid::Uuid::now_v7().as_u64_pair().1 % 1_000_000_000;
    Json(json!({"ok": true, "result": {"message_id": id, "chat": {"id": chat, "type": "private"}, "date": 0}}))
}

/// The gateway's configuration for the mix: three channels, the stand-ins, a directory of
/// `directory` customers.
pub fn configure(dir: &Path, port: u16, database_url: &str, stand_in: &str, directory: usize) -> PathBuf {
    let mut people = tenant_head(&format!("messenger_pages = [\"{PAGE}\"]\ntelegram_bots = [\"{BOT}\"]\n"));
    for n in 0..directory {
        let other = match channel(n) {
            Channel::Whatsapp => String::new(),
            Channel::Messenger => format!("messenger = \"{}\"\n", page_scoped_id(n)),
            Channel::Telegram => format!("telegram = \"{}\"\n", telegram_id(n)),
        };
        people.push_str(&format!("[tenants.demo.actors.{}]\nroles = [\"customer\"]\n{other}", number(n)));
    }
    let file = dir.join("mix-directory.toml");
    std::fs::write(&file, people).expect("directory");
    let channels = format!(
        "[messenger]\naccess_token = \"bench-token\"\n[telegram]\nbot = \"{BOT}\"\n\
         secret_token = \"{TELEGRAM_SECRET}\"\nbot_token = \"{BOT_TOKEN}\"\napi_base = \"{stand_in}\"\n"
    );
    write_config(dir, "mix.toml", (port, database_url), &file, stand_in, &channels)
}

/// The stand-ins, serving before the gateway starts (its configuration names them): their URL.
pub async fn stand_ins() -> (String, Stand) {
    let providers = Providers { gateway: Arc::default(), seen: Arc::default() };
    let router = Router::new()
        .route("/{version}/{id}/messages", post(graph))
        .route("/{bot}/sendMessage", post(bot))
        .with_state(providers.clone());
    (serve(router).await, Stand(providers))
}

/// The stand-ins, to run the mix through once the gateway is up.
pub struct Stand(Providers);

/// What a run of the mix measured.
pub struct MixRun {
    pub settled: usize,
    /// Settled refunds whose last message says it was done (a check on what was counted).
    pub done: usize,
    pub webhooks: usize,
    pub elapsed: Duration,
    pub drain: Duration,
    /// A prompt and a result as people saw them.
    pub example: Vec<String>,
}

impl Stand {
    /// The refunds flat out over `mix.connections` (each "yes" as its prompt arrives), until every
    /// refund is settled or the drain times out.
    pub async fn run(&self, base: &str, mix: Mix) -> MixRun {
        let client = reqwest::Client::builder().pool_max_idle_per_host(mix.connections).build().expect("client");
        let _ = self.0.gateway.set((client, base.to_owned()));
        let refunds: Arc<Vec<(usize, Delivery)>> = Arc::new(
            (0..mix.refunds)
                .map(|k| (k, person(k, mix.directory)))
                .map(|(k, n)| (k, delivery(n, 0, &format!("refund {} 25.00", 500_000 + k))))
                .collect(),
        );
        let started = Instant::now();
        let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let senders: Vec<_> = (0..mix.connections)
            .map(|_| {
                let (providers, refunds, next) = (self.0.clone(), refunds.clone(), next.clone());
                tokio::spawn(async move {
                    while let Some((k, refund)) = refunds.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) {
                        providers.send(refund, k % REDELIVERED == 0).await;
                    }
                })
            })
            .collect();
        for sender in senders {
            let _ = sender.await;
        }
        let last_refund = Instant::now();
        let deadline = last_refund + mix.drain_timeout;
        while self.settled() < mix.refunds && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.measured(mix, started, last_refund)
    }

    fn settled(&self) -> usize {
        self.0.seen.lock().map_or(0, |seen| seen.settled.len())
    }

    fn measured(&self, mix: Mix, started: Instant, last_refund: Instant) -> MixRun {
        let Ok(seen) = self.0.seen.lock() else {
            return MixRun {
                settled: 0,
                done: 0,
                webhooks: 0,
                elapsed: Duration::ZERO,
                drain: Duration::ZERO,
                example: vec![],
            };
        };
        let last = seen.settled.iter().max().copied().unwrap_or(last_refund);
        let refunds_sent = mix.refunds + mix.refunds.div_ceil(REDELIVERED);
        MixRun {
            settled: seen.settled.len(),
            done: seen.messages.values().filter(|texts| texts.len() == 3 && texts[2].starts_with("Done")).count(),
            webhooks: refunds_sent + seen.sent,
            elapsed: last.duration_since(started),
            drain: last.saturating_duration_since(last_refund),
            example: seen.messages.get(&person(0, mix.directory)).cloned().unwrap_or_default(),
        }
    }
}
