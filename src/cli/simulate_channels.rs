//! `chatgate simulate telegram|slack|messenger|instagram|line`: builds what the provider posts (a
//! message, or a tap on a confirmation's button), authenticates it as the provider does with the
//! configured secret, posts it to a running gateway and prints each answer. `--repeat` posts the
//! same request again, as a provider that got no answer does.

use std::process::ExitCode;

use anyhow::{Context, bail};
use reqwest::header::HeaderMap;
use serde_json::json;

use crate::channels::{line, slack, telegram, whatsapp};
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
    /// A LINE webhook, signed with the configured channel secret
    Line(LineArgs),
}

/// Posts what `channel` says.
pub async fn run(config: &Config, channel: SimulateChannel) -> anyhow::Result<ExitCode> {
    match channel {
        SimulateChannel::Whatsapp(args) => crate::cli::simulate::whatsapp(config, &args).await,
        SimulateChannel::Telegram(args) => telegram(config, &args).await,
        SimulateChannel::Slack(args) => slack(config, &args).await,
        SimulateChannel::Messenger(args) => meta(config, "page", &args).await,
        SimulateChannel::Instagram(args) => meta(config, "instagram", &args).await,
        SimulateChannel::Line(args) => {
            post(&args.target, line_request(config, (&args.from, &args.bot), &args.act)?).await
        }
    }
}

/// The demo customer and tenant on each channel (config/directory.toml).
pub const DEMO_TELEGRAM_USER: i64 = 700000001;
pub const DEMO_SLACK_USER: &str = "U0DEMO1";
pub const DEMO_SLACK_TEAM: &str = "T0DEMO";
pub const DEMO_SLACK_DM: &str = "D0DEMO1";
pub const DEMO_MESSENGER_USER: &str = "24000000000000001";
pub const DEMO_MESSENGER_PAGE: &str = "200000000000001";
pub const DEMO_INSTAGRAM_USER: &str = "17850000000000001";
pub const DEMO_INSTAGRAM_ACCOUNT: &str = "17840000000000001";
pub const DEMO_LINE_USER: &str = "U10000000000000000000000000000001";
pub const DEMO_LINE_BOT: &str = "Ub0700000000000000000000000000001";

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
    #[arg(long, default_value_t = DEMO_TELEGRAM_USER)]
    pub from: i64,
}

#[derive(Debug, clap::Args)]
pub struct SlackArgs {
    #[command(flatten)]
    pub target: Target,
    #[command(flatten)]
    pub act: Act,
    /// The sender's Slack user id (the demo customer's by default)
    #[arg(long, default_value = DEMO_SLACK_USER)]
    pub from: String,
    /// The workspace's team id (the demo tenant's by default)
    #[arg(long, default_value = DEMO_SLACK_TEAM)]
    pub team: String,
    /// The conversation (a direct message with the app by default)
    #[arg(long, default_value = DEMO_SLACK_DM)]
    pub channel: String,
}

#[derive(Debug, clap::Args)]
pub struct MetaArgs {
    #[command(flatten)]
    pub target: Target,
    #[command(flatten)]
    pub act: Act,
    /// The sender's page-scoped id (the demo customer's on Messenger by default)
    #[arg(long, default_value = DEMO_MESSENGER_USER)]
    pub from: String,
    /// The page's (or the Instagram account's) id (the demo tenant's page by default)
    #[arg(long, default_value = DEMO_MESSENGER_PAGE)]
    pub page: String,
}

#[derive(Debug, clap::Args)]
pub struct LineArgs {
    #[command(flatten)]
    pub target: Target,
    #[command(flatten)]
    pub act: Act,
    /// The sender's LINE user id (the demo customer's by default)
    #[arg(long, default_value = DEMO_LINE_USER)]
    pub from: String,
    /// The bot's user id, the webhook's `destination` (the demo tenant's by default)
    #[arg(long, default_value = DEMO_LINE_BOT)]
    pub bot: String,
}

/// A new id, from the clock.
fn new_id(prefix: &str) -> String {
    format!("{prefix}{}", time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1000)
}

/// One request as the provider sends it: where, its headers (authentication included), its body.
#[derive(Debug, Clone)]
pub struct Request {
    pub path: &'static str,
    pub headers: HeaderMap,
    pub body: String,
}

pub async fn telegram(config: &Config, args: &TelegramArgs) -> anyhow::Result<ExitCode> {
    post(&args.target, telegram_request(config, args.from, &args.act)?).await
}

pub fn telegram_request(config: &Config, from: i64, act: &Act) -> anyhow::Result<Request> {
    let id: i64 = act.id.clone().unwrap_or_else(|| new_id("")).parse().context("--id is a number on Telegram")?;
    let update = match (&act.text, &act.button) {
        (Some(text), None) => telegram::simulate::text(id, from, text),
        (None, Some(data)) => telegram::simulate::button(id, from, data),
        _ => bail!("say what to send: --text or --button"),
    };
    let mut headers = HeaderMap::new();
    headers.insert(telegram::SECRET_HEADER, config.telegram.secret_token.expose().parse()?);
    headers.insert("content-type", "application/json".parse()?);
    Ok(Request { path: "/webhooks/telegram", headers, body: update.to_string() })
}

pub async fn slack(config: &Config, args: &SlackArgs) -> anyhow::Result<ExitCode> {
    post(&args.target, slack_request(config, (&args.team, &args.from, &args.channel), &args.act)?).await
}

/// `(team, user, channel)` doing `act`.
pub fn slack_request(config: &Config, (team, user, channel): (&str, &str, &str), act: &Act) -> anyhow::Result<Request> {
    let (path, kind, body) = match (&act.text, &act.button) {
        (Some(text), None) => {
            let ts = format!("{}.000100", time::OffsetDateTime::now_utc().unix_timestamp());
            let event = json!({"type": "message", "channel": channel, "user": user, "text": text, "ts": ts});
            let id = act.id.clone().unwrap_or_else(|| new_id("EvSIM"));
            let body = json!({"type": "event_callback", "team_id": team, "event_id": id, "event": event});
            ("/webhooks/slack/events", "application/json", body.to_string())
        }
        (None, Some(value)) => {
            let payload = json!({
                "type": "block_actions", "team": {"id": team}, "user": {"id": user}, "channel": {"id": channel},
                "trigger_id": act.id.clone().unwrap_or_else(|| new_id("sim.")),
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
    Ok(Request { path, headers, body })
}

/// Messenger (`object: page`) or Instagram (`object: instagram`), signed with the Meta app's secret.
pub async fn meta(config: &Config, object: &str, args: &MetaArgs) -> anyhow::Result<ExitCode> {
    post(&args.target, meta_request(config, object, (&args.from, &args.page), &args.act)?).await
}

/// `(person, page)` doing `act` on Messenger (`page`) or Instagram (`instagram`).
pub fn meta_request(config: &Config, object: &str, (person, page): (&str, &str), act: &Act) -> anyhow::Result<Request> {
    let mid = act.id.clone().unwrap_or_else(|| new_id("m_SIM"));
    let message = match (&act.text, &act.button) {
        (Some(text), None) => json!({"mid": mid, "text": text}),
        (None, Some(payload)) => json!({"mid": mid, "text": payload, "quick_reply": {"payload": payload}}),
        _ => bail!("say what to send: --text or --button"),
    };
    let now = time::OffsetDateTime::now_utc().unix_timestamp() * 1000;
    let item = json!({"sender": {"id": person}, "recipient": {"id": page}, "timestamp": now, "message": message});
    let body = json!({"object": object, "entry": [{"id": page, "time": now, "messaging": [item]}]}).to_string();
    let app = whatsapp::webhook::app(config, None).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let mut headers = HeaderMap::new();
    headers.insert(
        whatsapp::signature::HEADER,
        whatsapp::signature::sign(app.app_secret.expose().as_bytes(), body.as_bytes()).parse()?,
    );
    headers.insert("content-type", "application/json".parse()?);
    Ok(Request { path: "/webhooks/messenger", headers, body })
}

/// `(user, bot)` doing `act` on LINE: a text message or a postback, signed with the channel secret.
pub fn line_request(config: &Config, (user, bot): (&str, &str), act: &Act) -> anyhow::Result<Request> {
    let id = act.id.clone().unwrap_or_else(|| new_id("SIM"));
    let webhook = match (&act.text, &act.button) {
        (Some(text), None) => line::simulate::text(bot, &id, user, text),
        (None, Some(data)) => line::simulate::postback(bot, &id, user, data),
        _ => bail!("say what to send: --text or --button"),
    };
    let (signature, body) = line::simulate::signed(config.line.channel_secret.expose(), &webhook);
    let mut headers = HeaderMap::new();
    headers.insert(line::signature::SIGNATURE_HEADER, signature.parse()?);
    headers.insert("content-type", "application/json".parse()?);
    Ok(Request { path: "/webhooks/line", headers, body })
}

async fn post(target: &Target, request: Request) -> anyhow::Result<ExitCode> {
    let client = reqwest::Client::new();
    let mut all_ok = true;
    for attempt in 1..=target.repeat.max(1) {
        let (status, answer) = send(&client, &target.url, &request).await?;
        println!("#{attempt} {status} {answer}");
        all_ok &= status.is_success();
    }
    Ok(if all_ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Posts `request` to the gateway at `base`: its status and answer.
pub async fn send(
    client: &reqwest::Client,
    base: &str,
    request: &Request,
) -> anyhow::Result<(reqwest::StatusCode, String)> {
    let url = format!("{}{}", base.trim_end_matches('/'), request.path);
    let response = client
        .post(&url)
        .headers(request.headers.clone())
        .body(request.body.clone())
        .send()
        .await
        .with_context(|| format!("cannot reach {url}"))?;
    let status = response.status();
    Ok((status, response.text().await.unwrap_or_default()))
}
