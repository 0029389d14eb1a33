//! `chatgate chat --channel telegram|slack|messenger|instagram|line`: the terminal conversation of
//! `chat` on another channel, as its demo customer. Typed lines go to the gateway as the provider
//! posts them (`simulate_channels`); the gateway's replies arrive at a stand-in for the provider's
//! API that answers as the provider does, and are printed with their buttons numbered.

use std::process::ExitCode;

use anyhow::Context;
use axum::Router;
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

use crate::cli::simulate_channels::{self as simulate, Act, Request};
use crate::config::Config;

/// The channels `chat` talks on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ChatChannel {
    Whatsapp,
    Telegram,
    Slack,
    Messenger,
    Instagram,
    Line,
}

impl ChatChannel {
    /// How to start the gateway so that its replies come to the stand-in at `listen`.
    fn environment(self, listen: &str) -> String {
        let (base, token) = match self {
            Self::Telegram => ("CHATGATE_TELEGRAM_API_BASE", "CHATGATE_TELEGRAM_BOT_TOKEN"),
            Self::Slack => ("CHATGATE_SLACK_API_BASE", "CHATGATE_SLACK_BOT_TOKEN"),
            Self::Messenger => ("CHATGATE_WHATSAPP_API_BASE", "CHATGATE_MESSENGER_ACCESS_TOKEN"),
            Self::Instagram => ("CHATGATE_WHATSAPP_API_BASE", "CHATGATE_INSTAGRAM_ACCESS_TOKEN"),
            Self::Whatsapp => ("CHATGATE_WHATSAPP_API_BASE", "CHATGATE_WHATSAPP_ACCESS_TOKEN"),
            Self::Line => ("CHATGATE_LINE_API_BASE", "CHATGATE_LINE_CHANNEL_ACCESS_TOKEN"),
        };
        format!("{base}=http://{listen} {token}=chat")
    }

    /// What one typed line sends: a tap on the button it numbers, else the text.
    fn request(self, config: &Config, line: &str, buttons: &[(String, String)]) -> anyhow::Result<Request> {
        let tapped = line.parse::<usize>().ok().and_then(|n| buttons.get(n.wrapping_sub(1)));
        let act = match tapped {
            Some((id, _)) => Act { text: None, button: Some(id.clone()), id: None },
            None => Act { text: Some(line.to_owned()), button: None, id: None },
        };
        match self {
            Self::Telegram => simulate::telegram_request(config, simulate::DEMO_TELEGRAM_USER, &act),
            Self::Slack => {
                let who = (simulate::DEMO_SLACK_TEAM, simulate::DEMO_SLACK_USER, simulate::DEMO_SLACK_DM);
                simulate::slack_request(config, who, &act)
            }
            Self::Messenger => {
                let who = (simulate::DEMO_MESSENGER_USER, simulate::DEMO_MESSENGER_PAGE);
                simulate::meta_request(config, "page", who, &act)
            }
            Self::Instagram => {
                let who = (simulate::DEMO_INSTAGRAM_USER, simulate::DEMO_INSTAGRAM_ACCOUNT);
                simulate::meta_request(config, "instagram", who, &act)
            }
            Self::Line => simulate::line_request(config, (simulate::DEMO_LINE_USER, simulate::DEMO_LINE_BOT), &act),
            Self::Whatsapp => anyhow::bail!("WhatsApp's chat is `chat` without --channel"),
        }
    }
}

/// One message the gateway sent to the person: its text and its buttons (id, title).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Said {
    pub text: String,
    pub buttons: Vec<(String, String)>,
}

impl Said {
    /// As printed: the text, then each button as `[n] title`.
    pub fn shown(&self) -> String {
        let mut lines = vec![format!("chatgate: {}", self.text.replace('\n', "\n          "))];
        lines.extend(self.buttons.iter().enumerate().map(|(i, (_, title))| format!("          [{}] {title}", i + 1)));
        lines.join("\n")
    }
}

/// A message as the provider's API took it, as the person would see it.
pub fn said(channel: ChatChannel, body: &Value) -> Said {
    let pairs = |list: &Value, title: &str, id: &str| -> Vec<(String, String)> {
        let list = list.as_array().into_iter().flatten();
        list.filter_map(|b| Some((b.pointer(id)?.as_str()?.to_owned(), b.pointer(title)?.as_str()?.to_owned())))
            .collect()
    };
    let (text, buttons) = match channel {
        ChatChannel::Whatsapp => {
            let text = if body["text"]["body"].is_string() {
                &body["text"]["body"]
            } else {
                &body["interactive"]["body"]["text"]
            };
            (text, pairs(&body["interactive"]["action"]["buttons"], "/reply/title", "/reply/id"))
        }
        ChatChannel::Telegram => {
            (&body["text"], pairs(&body["reply_markup"]["inline_keyboard"][0], "/text", "/callback_data"))
        }
        ChatChannel::Slack => (&body["text"], pairs(&body["blocks"][1]["elements"], "/text/text", "/value")),
        ChatChannel::Line => {
            let message = &body["messages"][0];
            (&message["text"], pairs(&message["quickReply"]["items"], "/action/label", "/action/data"))
        }
        _ => (&body["message"]["text"], pairs(&body["message"]["quick_replies"], "/title", "/payload")),
    };
    Said { text: text.as_str().unwrap_or("(a message chat cannot show)").to_owned(), buttons }
}

/// The stand-in's answer to a send, as the provider's.
async fn accept(
    State((channel, said)): State<(ChatChannel, mpsc::UnboundedSender<Value>)>,
    body: String,
) -> axum::Json<Value> {
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let n = uuid::Uuid::now_v7().as_u128() % 1_000_000;
    let answer = match channel {
        ChatChannel::Telegram => json!({"ok": true, "result": {"message_id": n, "chat": {"id": body["chat_id"]}}}),
        ChatChannel::Slack => json!({"ok": true, "channel": body["channel"], "ts": format!("1.{n:06}")}),
        ChatChannel::Line => json!({"sentMessages": [{"id": n.to_string(), "quoteToken": "chat"}]}),
        _ => json!({"recipient_id": body["recipient"]["id"], "message_id": format!("m_CHAT{n}")}),
    };
    let _ = said.send(body);
    axum::Json(answer)
}

pub async fn chat(config: &Config, channel: ChatChannel, url: &str, listen: &str) -> anyhow::Result<ExitCode> {
    let (sent, replies) = mpsc::unbounded_channel();
    let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| format!("cannot listen on {listen}"))?;
    let stand_in = Router::new().fallback(post(accept)).with_state((channel, sent));
    tokio::spawn(async move { axum::serve(listener, stand_in).await });
    println!(
        "You are the demo customer on {channel:?}, writing to {url}. Replies arrive here when the gateway runs with\n\
         {}\nType a message and Enter; a number taps that button; Ctrl-D ends.",
        channel.environment(listen)
    );
    let client = reqwest::Client::new();
    converse(channel, replies, |line, buttons| {
        let client = &client;
        async move { simulate::send(client, url, &channel.request(config, &line, &buttons)?).await }
    })
    .await
}

/// The conversation: each typed line goes through `send` with the buttons last shown (a number
/// taps one); each message the stand-in took from the gateway is printed. Ends with Ctrl-D.
pub async fn converse<Send, Sent>(
    channel: ChatChannel,
    mut replies: mpsc::UnboundedReceiver<Value>,
    mut send: Send,
) -> anyhow::Result<ExitCode>
where
    Send: FnMut(String, Vec<(String, String)>) -> Sent,
    Sent: std::future::Future<Output = anyhow::Result<(reqwest::StatusCode, String)>>,
{
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut buttons: Vec<(String, String)> = vec![];
    loop {
        tokio::select! {
            line = lines.next_line() => {
                let Some(line) = line.context("cannot read the terminal")? else { break };
                if line.trim().is_empty() {
                    continue;
                }
                let (status, answer) = send(line.trim().to_owned(), buttons.clone()).await?;
                if !status.is_success() {
                    println!("(the gateway answered {status} {answer})");
                }
            }
            Some(body) = replies.recv() => {
                let said = said(channel, &body);
                println!("{}", said.shown());
                buttons = said.buttons;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_providers_request_reads_as_the_person_sees_it() {
        let telegram = json!({"chat_id": 1, "text": "Confirm?",
            "reply_markup": {"inline_keyboard": [[{"text": "Yes", "callback_data": "cg:yes:n"}]]}});
        assert_eq!(said(ChatChannel::Telegram, &telegram).shown(), "chatgate: Confirm?\n          [1] Yes");
        let slack = json!({"channel": "D", "text": "Confirm?", "blocks": [{}, {"type": "actions",
            "elements": [{"type": "button", "text": {"type": "plain_text", "text": "No"}, "value": "cg:no:n"}]}]});
        assert_eq!(said(ChatChannel::Slack, &slack).buttons, [("cg:no:n".to_owned(), "No".to_owned())]);
        let meta = json!({"recipient": {"id": "1"}, "message": {"text": "Done."}});
        assert_eq!(said(ChatChannel::Instagram, &meta).shown(), "chatgate: Done.");
        let buttons = crate::service::replies::outgoing::Button::yes_and_no();
        let line = crate::channels::line::client::push_body("U1", "Confirm?", &buttons);
        assert_eq!(said(ChatChannel::Line, &line).shown(), "chatgate: Confirm?\n          [1] Yes\n          [2] No");
    }
}
