//! `chatgate simulate telegram`: builds a Telegram `Update` (a text message or a button tap),
//! posts it to a running gateway with the configured secret token, as Telegram does, and prints
//! the answer.

use std::process::ExitCode;

use anyhow::{Context, bail};

use crate::channels::telegram::{SECRET_HEADER, simulate};
use crate::config::Config;

#[derive(Debug, clap::Args)]
pub struct TelegramArgs {
    /// The gateway's base URL
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The sender's Telegram user id (the demo customer's by default)
    #[arg(long, default_value_t = 700000001)]
    pub from: i64,
    /// Send a text message
    #[arg(long, conflicts_with = "button")]
    pub text: Option<String>,
    /// Tap an inline keyboard button with this callback data (a prompt's `cg:yes:...`)
    #[arg(long)]
    pub button: Option<String>,
    /// The update's id (default: one from the clock); the same id again is a redelivery
    #[arg(long)]
    pub update_id: Option<i64>,
    /// Post the same update N times, as Telegram does when it got no answer
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
}

pub async fn telegram(config: &Config, args: &TelegramArgs) -> anyhow::Result<ExitCode> {
    let id = args.update_id.unwrap_or_else(|| time::OffsetDateTime::now_utc().unix_timestamp_nanos() as i64 / 1000);
    let update = match (&args.text, &args.button) {
        (Some(text), None) => simulate::text(id, args.from, text),
        (None, Some(data)) => simulate::button(id, args.from, data),
        _ => bail!("say what to send: --text or --button"),
    };
    let url = format!("{}/webhooks/telegram", args.url.trim_end_matches('/'));
    let client = reqwest::Client::new();
    let mut all_ok = true;
    for attempt in 1..=args.repeat.max(1) {
        let response = client
            .post(&url)
            .header(SECRET_HEADER, config.telegram.secret_token.expose())
            .json(&update)
            .send()
            .await
            .with_context(|| format!("cannot reach {url}"))?;
        let status = response.status();
        println!("#{attempt} {status} {}", response.text().await.unwrap_or_default());
        all_ok &= status.is_success();
    }
    Ok(if all_ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
