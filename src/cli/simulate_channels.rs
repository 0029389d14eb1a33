//! `chatgate simulate telegram|slack|messenger|instagram`: builds what the provider posts (a
//! message, or a tap on a confirmation's button), authenticates it as the provider does with the
//! configured secret, posts it to a running gateway and prints each answer. `--repeat` posts the
//! same request again, as a provider that got no answer does.

use std::process::ExitCode;

use anyhow::{Context, bail};
use reqwest::header::HeaderMap;
use serde_json::json;

use crate::channels::{slack, telegram, whatsapp};
use crate::config::Config;

#[derive(Debug, clap::Subcommand)]
pub enum SimulateChannel {
    /// A WhatsApp Cloud API delivery, signed with the configured app secret
    Whatsapp(crate::cli::simulate::WhatsAppArgs),
    /// A Telegram update, with the configured secret token
    Telegram(TelegramArgs),
    /// A Slack event or button tap, signed with the configured signing secret
    Slack(SlackArgs),
    /// A Messenger delivery, signed with the Meta app's secret
    Messenger(MetaArgs),
    /// An Instagram messaging delivery, signed with the Meta app's secret
    Instagram(MetaArgs),
}

/// Posts what `channel` says.
pub async fn run(config: &Config, channel: SimulateChannel) -> anyhow::Result<ExitCode> {
    match channel {
        SimulateChannel::Whatsapp(args) => crate::cli::simulate::whatsapp(config, &args).await,
        SimulateChannel::Telegram(args) => telegram(config, &args).await,
        SimulateChannel::Slack(args) => slack(config, &args).await,
        SimulateChannel::Messenger(args) => meta(config, "page", &args).await,
        SimulateChannel::Instagram(args) => meta(config, "instagram", &args).await,
    }
}

/// Where to post, and how often.
#[derive(Debug, clap::Args)]
pub struct Target {
    /// The gateway's base URL
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// Post the same request N times
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
}

/// What the person does: write, or tap a button (a prompt's `cg:yes:...`).
#[derive(Debug, clap::Args)]
pub struct Act {
    /// Send a text message
    #[arg(long, conflicts_with = "button")]
    pub text: Option<String>,
    /// Tap the button with this id
    #[arg(long)]
    pub button: Option<String>,
    /// The provider's id of the message or update (default: a new one); the same again is a
    /// redelivery
    #[arg(long)]
    pub id: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct TelegramArgs {
    #[command(flatten)]
    pub target: Target,
    #[command(flatten)]
    pub act: Act,
    /// The sender's Telegram user id (the demo customer's by default)
    #[arg(long, default_value_t = 700000001)]
    pub from: i64,
}

#[derive(Debug, clap::Args)]
pub struct SlackArgs {
    #[command(flatten)]
    pub target: Target,
    #[command(flatten)]
    pub act: Act,
    /// The sender's Slack user id (the demo customer's by default)
    #[arg(long, default_value = "U0DEMO1")]
    pub from: String,
    /// The workspace's team id (the demo tenant's by default)
    #[arg(long, default_value = "T0DEMO")]
    pub team: String,
    /// The conversation (a direct message with the app by default)
    #[arg(long, default_value = "D0DEMO1")]
    pub channel: String,
}

#[derive(Debug, clap::Args)]
pub struct MetaArgs {
    #[command(flatten)]
    pub target: Target,
    #[command(flatten)]
    pub act: Act,
    /// The sender's page-scoped id (the demo customer's on Messenger by default)
    #[arg(long, default_value = "24000000000000001")]
    pub from: String,
    /// The page's (or the Instagram account's) id (the demo tenant's page by default)
    #[arg(long, default_value = "200000000000001")]
    pub page: String,
}

/// A new id, from the clock.
fn new_id(prefix: &str) -> String {
    format!("{prefix}{}", time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1000)
}

pub async fn telegram(config: &Config, args: &TelegramArgs) -> anyhow::Result<ExitCode> {
    let id: i64 = args.act.id.clone().unwrap_or_else(|| new_id("")).parse().context("--id is a number on Telegram")?;
    let update = match (&args.act.text, &args.act.button) {
        (Some(text), None) => telegram::simulate::text(id, args.from, text),
        (None, Some(data)) => telegram::simulate::button(id, args.from, data),
        _ => bail!("say what to send: --text or --button"),
    };
    let mut headers = HeaderMap::new();
    headers.insert(telegram::SECRET_HEADER, config.telegram.secret_token.expose().parse()?);
    headers.insert("content-type", "application/json".parse()?);
    post(&args.target, "/webhooks/telegram", headers, update.to_string()).await
}

pub async fn slack(config: &Config, args: &SlackArgs) -> anyhow::Result<ExitCode> {
    let (team, user, channel) = (&args.team, &args.from, &args.channel);
    let (path, kind, body) = match (&args.act.text, &args.act.button) {
        (Some(text), None) => {
            let ts = format!("{}.000100", time::OffsetDateTime::now_utc().unix_timestamp());
            let event = json!({"type": "message", "channel": channel, "user": user, "text": text, "ts": ts});
            let id = args.act.id.clone().unwrap_or_else(|| new_id("EvSIM"));
            let body = json!({"type": "event_callback", "team_id": team, "event_id": id, "event": event});
            ("/webhooks/slack/events", "application/json", body.to_string())
        }
        (None, Some(value)) => {
            let payload = json!({
                "type": "block_actions", "team": {"id": team}, "user": {"id": user}, "channel": {"id": channel},
                "trigger_id": args.act.id.clone().unwrap_or_else(|| new_id("sim.")),
                "actions": [{"type": "button", "action_id": value, "value": value}],
            });
            let form =
                form_urlencoded::Serializer::new(String::new()).append_pair("payload", &payload.to_string()).finish();
            ("/webhooks/slack/interactivity", "application/x-www-form-urlencoded", form)
        }
        _ => bail!("say what to send: --text or --button"),
    };
    let timestamp = time::OffsetDateTime::now_utc().unix_timestamp().to_string();
    let signed = slack::signature::sign(config.slack.signing_secret.expose().as_bytes(), &timestamp, body.as_bytes());
    let mut headers = HeaderMap::new();
    headers.insert(slack::signature::TIMESTAMP_HEADER, timestamp.parse()?);
    headers.insert(slack::signature::SIGNATURE_HEADER, signed.parse()?);
    headers.insert("content-type", kind.parse()?);
    post(&args.target, path, headers, body).await
}

/// Messenger (`object: page`) or Instagram (`object: instagram`), signed with the Meta app's secret.
pub async fn meta(config: &Config, object: &str, args: &MetaArgs) -> anyhow::Result<ExitCode> {
    let mid = args.act.id.clone().unwrap_or_else(|| new_id("m_SIM"));
    let message = match (&args.act.text, &args.act.button) {
        (Some(text), None) => json!({"mid": mid, "text": text}),
        (None, Some(payload)) => json!({"mid": mid, "text": payload, "quick_reply": {"payload": payload}}),
        _ => bail!("say what to send: --text or --button"),
    };
    let now = time::OffsetDateTime::now_utc().unix_timestamp() * 1000;
    let item =
        json!({"sender": {"id": args.from}, "recipient": {"id": args.page}, "timestamp": now, "message": message});
    let body = json!({"object": object, "entry": [{"id": args.page, "time": now, "messaging": [item]}]}).to_string();
    let app = whatsapp::webhook::app(config, None).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let mut headers = HeaderMap::new();
    headers.insert(
        whatsapp::signature::HEADER,
        whatsapp::signature::sign(app.app_secret.expose().as_bytes(), body.as_bytes()).parse()?,
    );
    headers.insert("content-type", "application/json".parse()?);
    post(&args.target, "/webhooks/messenger", headers, body).await
}

async fn post(target: &Target, path: &str, headers: HeaderMap, body: String) -> anyhow::Result<ExitCode> {
    let url = format!("{}{path}", target.url.trim_end_matches('/'));
    let client = reqwest::Client::new();
    let mut all_ok = true;
    for attempt in 1..=target.repeat.max(1) {
        let response = client
            .post(&url)
            .headers(headers.clone())
            .body(body.clone())
            .send()
            .await
            .with_context(|| format!("cannot reach {url}"))?;
        let status = response.status();
        println!("#{attempt} {status} {}", response.text().await.unwrap_or_default());
        all_ok &= status.is_success();
    }
    Ok(if all_ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
