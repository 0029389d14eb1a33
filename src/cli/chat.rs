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
use tokio::sync::mpsc;

use crate::channels::whatsapp::simulate;
use crate::cli::chat_channels::{self as channels, ChatChannel};
use crate::cli::simulate::{Conversation, Gateway, new_message_id};
use crate::config::Config;

#[derive(Debug, clap::Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub conversation: Conversation,
    /// Where the stand-in for the provider's API listens; the gateway sends there when
    /// started with its API base at http://ADDRESS and any token (the chat says which)
    #[arg(long, default_value = "127.0.0.1:8089")]
    pub listen: String,
    /// The channel to talk on, as its demo customer (`--from` and `--to` are WhatsApp's)
    #[arg(long, value_enum, default_value = "whatsapp")]
    pub channel: ChatChannel,
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
    if args.channel != ChatChannel::Whatsapp {
        return crate::cli::chat_channels::chat(config, args.channel, &args.conversation.url, &args.listen).await;
    }
    let gateway = Gateway::new(config, &args.conversation)?;
    let Conversation { url, from, to, .. } = &args.conversation;
    let (said, replies) = mpsc::unbounded_channel();
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
    let gateway = &gateway;
    channels::converse(ChatChannel::Whatsapp, replies, |line, buttons| async move {
        gateway.post(&simulate::notification(to, vec![message_of(&line, from, &buttons)], vec![])).await
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buttons_are_numbered_choices_and_a_number_taps_one() {
        let body = json!({"type": "interactive", "interactive": {"type": "button", "body": {"text": "Confirm?"},
            "action": {"buttons": [{"type": "reply", "reply": {"id": "cg:yes:n", "title": "Yes"}},
                                   {"type": "reply", "reply": {"id": "cg:no:n", "title": "No"}}]}}});
        let said = channels::said(ChatChannel::Whatsapp, &body);
        assert_eq!(said.shown(), "chatgate: Confirm?\n          [1] Yes\n          [2] No");
        let tap = message_of("2", "1555", &said.buttons);
        assert_eq!(tap["interactive"]["button_reply"]["id"], "cg:no:n");
        assert_eq!(message_of("3", "1555", &said.buttons)["text"]["body"], "3", "no third button: text");
        let done = channels::said(ChatChannel::Whatsapp, &json!({"type": "text", "text": {"body": "Done."}}));
        assert_eq!(done.shown(), "chatgate: Done.");
    }
}
