//! `chatgate chat`: a terminal conversation with a running gateway, as one person on WhatsApp,
//! with no provider account. What is typed goes to the gateway as a signed Meta delivery (the
//! simulator's); what the gateway says back arrives at a stand-in for the WhatsApp Cloud API that
//! this command runs (start the gateway with `CHATGATE_WHATSAPP_API_BASE` pointing at it) and is
//! printed, its buttons as numbered choices: typing the number taps the button.

use std::process::ExitCode;

use anyhow::Context;
use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

use crate::channels::whatsapp::simulate;
use crate::cli::simulate::{Conversation, Gateway, new_message_id};
use crate::config::Config;

#[derive(Debug, clap::Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub conversation: Conversation,
    /// Where the stand-in for the WhatsApp Cloud API listens; the gateway sends there when
    /// started with CHATGATE_WHATSAPP_API_BASE=http://ADDRESS and any access token
    #[arg(long, default_value = "127.0.0.1:8089")]
    pub listen: String,
}

/// One message the gateway sent to the person: its text and its buttons (id, title).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Said {
    pub text: String,
    pub buttons: Vec<(String, String)>,
}

impl Said {
    /// A Cloud API message body as the person would see it.
    pub fn of(body: &Value) -> Self {
        let text = body["text"]["body"].as_str().or_else(|| body["interactive"]["body"]["text"].as_str());
        let buttons = body["interactive"]["action"]["buttons"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|b| Some((b["reply"]["id"].as_str()?.to_owned(), b["reply"]["title"].as_str()?.to_owned())))
            .collect();
        Self { text: text.unwrap_or("(a message chat cannot show)").to_owned(), buttons }
    }

    /// As printed: the text, then each button as `[n] title`.
    pub fn shown(&self) -> String {
        let mut lines = vec![format!("chatgate: {}", self.text.replace('\n', "\n          "))];
        lines.extend(self.buttons.iter().enumerate().map(|(i, (_, title))| format!("          [{}] {title}", i + 1)));
        lines.join("\n")
    }
}

/// The stand-in's answer to a send, as Meta's: a message id.
async fn accept(State(person): State<(String, mpsc::UnboundedSender<Value>)>, Json(body): Json<Value>) -> Json<Value> {
    let to = body["to"].as_str().unwrap_or_default().to_owned();
    if to == person.0 {
        let _ = person.1.send(body);
    }
    let id = format!("wamid.CHAT{}", uuid::Uuid::now_v7().simple());
    Json(json!({"messaging_product": "whatsapp", "contacts": [{"input": to, "wa_id": to}], "messages": [{"id": id}]}))
}

/// What a typed line sends: a tap on the button it numbers, else the text.
fn message_of(line: &str, from: &str, buttons: &[(String, String)]) -> Value {
    let id = new_message_id();
    match line.parse::<usize>().ok().and_then(|n| buttons.get(n.wrapping_sub(1))) {
        Some((button, title)) => simulate::button_reply(&id, from, button, title),
        None => simulate::text(&id, from, line),
    }
}

pub async fn chat(config: &Config, args: &ChatArgs) -> anyhow::Result<ExitCode> {
    let gateway = Gateway::new(config, &args.conversation)?;
    let Conversation { url, from, to, .. } = &args.conversation;
    let (said, mut replies) = mpsc::unbounded_channel();
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("cannot listen on {} (--listen)", args.listen))?;
    let stand_in = Router::new().route("/{version}/{number}/messages", post(accept)).with_state((from.clone(), said));
    tokio::spawn(async move { axum::serve(listener, stand_in).await });
    println!(
        "You are {} writing to {} through {}. Replies arrive here when the gateway runs with\n\
         CHATGATE_WHATSAPP_API_BASE=http://{} CHATGATE_WHATSAPP_ACCESS_TOKEN=chat\n\
         Type a message and Enter; a number taps that button; Ctrl-D ends.",
        from, to, url, args.listen
    );
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut buttons: Vec<(String, String)> = vec![];
    loop {
        tokio::select! {
            line = lines.next_line() => {
                let Some(line) = line.context("cannot read the terminal")? else { break };
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                let delivery = simulate::notification(to, vec![message_of(line, from, &buttons)], vec![]);
                let (status, answer) = gateway.post(&delivery).await?;
                if !status.is_success() {
                    println!("(the gateway answered {status} {answer})");
                }
            }
            Some(body) = replies.recv() => {
                let said = Said::of(&body);
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
    fn buttons_are_numbered_choices_and_a_number_taps_one() {
        let body = json!({"type": "interactive", "interactive": {"type": "button", "body": {"text": "Confirm?"},
            "action": {"buttons": [{"type": "reply", "reply": {"id": "cg:yes:n", "title": "Yes"}},
                                   {"type": "reply", "reply": {"id": "cg:no:n", "title": "No"}}]}}});
        let said = Said::of(&body);
        assert_eq!(said.shown(), "chatgate: Confirm?\n          [1] Yes\n          [2] No");
        let tap = message_of("2", "1555", &said.buttons);
        assert_eq!(tap["interactive"]["button_reply"]["id"], "cg:no:n");
        assert_eq!(message_of("3", "1555", &said.buttons)["text"]["body"], "3", "no third button: text");
        assert_eq!(Said::of(&json!({"type": "text", "text": {"body": "Done."}})).shown(), "chatgate: Done.");
    }
}
