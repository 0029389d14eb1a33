//! `chatgate simulate whatsapp`: builds a Meta-shaped delivery, signs it with the configured
//! app secret, posts it to a running gateway and prints the answer, so that the quick start
//! works in two terminals and nothing ever calls a real provider.

use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::channels::whatsapp::signature;
use crate::channels::whatsapp::simulate;
use crate::config::Config;

/// Who writes to which gateway: its URL, the person, the business number, the app. `simulate`
/// and `chat` take the same.
#[derive(Debug, clap::Args)]
pub struct Conversation {
    /// The gateway's base URL
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The sender's wa_id
    #[arg(long, default_value = "15550000001")]
    pub from: String,
    /// The business number's phone_number_id (default: the demo tenant's)
    #[arg(long, env = "CHATGATE_DEMO_PHONE_NUMBER_ID", default_value = "100000000000001")]
    pub to: String,
    /// The WhatsApp app to post to (`/webhooks/whatsapp/{app}`; the default app otherwise)
    #[arg(long)]
    pub app: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct WhatsAppArgs {
    #[command(flatten)]
    pub conversation: Conversation,
    /// Send a text message
    #[arg(long, conflicts_with_all = ["button_reply", "status"])]
    pub text: Option<String>,
    /// Send an interactive button reply with this id
    #[arg(long, conflicts_with = "status")]
    pub button_reply: Option<String>,
    /// Send a delivery status (`WAMID=STATUS`, e.g. `wamid.X=read`) instead of a message
    #[arg(long)]
    pub status: Option<String>,
    /// The message id (default: a new one)
    #[arg(long)]
    pub id: Option<String>,
    /// Post the same delivery N times, as a provider that retries would
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
}

pub async fn whatsapp(config: &Config, args: &WhatsAppArgs) -> anyhow::Result<ExitCode> {
    let id = args.id.clone().unwrap_or_else(new_message_id);
    let Conversation { from, to, .. } = &args.conversation;
    let delivery = match (&args.text, &args.button_reply, &args.status) {
        (Some(text), None, None) => simulate::notification(to, vec![simulate::text(&id, from, text)], vec![]),
        (None, Some(reply), None) => {
            simulate::notification(to, vec![simulate::button_reply(&id, from, reply, reply)], vec![])
        }
        (None, None, Some(status)) => {
            let (wamid, state) = status.split_once('=').context("--status takes WAMID=STATUS")?;
            simulate::notification(to, vec![], vec![simulate::status(wamid, from, state)])
        }
        _ => bail!("say what to send: --text, --button-reply or --status"),
    };
    let gateway = Gateway::new(config, &args.conversation)?;
    let mut all_ok = true;
    for attempt in 1..=args.repeat.max(1) {
        let (status, answer) = gateway.post(&delivery).await?;
        println!("#{attempt} {status} {answer}");
        all_ok &= status.is_success();
    }
    Ok(if all_ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// A new WhatsApp message id.
pub fn new_message_id() -> String {
    format!("wamid.SIM{}", uuid::Uuid::now_v7().simple())
}

/// A running gateway's WhatsApp webhook, and the app secret its deliveries are signed with.
pub struct Gateway {
    client: reqwest::Client,
    url: String,
    app_secret: Vec<u8>,
}

impl Gateway {
    pub fn new(config: &Config, conversation: &Conversation) -> anyhow::Result<Self> {
        let (base_url, app) = (&conversation.url, conversation.app.as_deref());
        let app_name = app.unwrap_or(&config.whatsapp.default_app);
        let secret = config
            .whatsapp
            .apps
            .get(app_name)
            .with_context(|| format!("no WhatsApp app `{app_name}` in the configuration"))?
            .app_secret
            .expose()
            .as_bytes()
            .to_vec();
        let path = app.map_or_else(|| "/webhooks/whatsapp".to_owned(), |name| format!("/webhooks/whatsapp/{name}"));
        let url = format!("{}{path}", base_url.trim_end_matches('/'));
        Ok(Self { client: reqwest::Client::new(), url, app_secret: secret })
    }

    /// Posts one delivery, signed; the gateway's status and answer.
    pub async fn post(&self, delivery: &Value) -> anyhow::Result<(reqwest::StatusCode, String)> {
        let body = delivery.to_string().into_bytes();
        let signed = signature::sign(&self.app_secret, &body);
        let response = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header(signature::HEADER, &signed)
            .body(body)
            .send()
            .await
            .with_context(|| format!("cannot reach {}", self.url))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let shown = serde_json::from_str::<Value>(&text).map(|v| v.to_string()).unwrap_or(text);
        Ok((status, shown))
    }
}
