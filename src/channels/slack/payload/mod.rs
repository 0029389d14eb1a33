//! What Slack posts, read leniently into one shape: an Events API callback (a `message` or
//! `app_mention` a person wrote; the bot's own messages, edits and other subtypes carry nothing to
//! act on), a slash command (form-encoded; `/chatgate refund 1234 25.00`, or `/refund 1234 25.00`
//! read as "refund 1234 25.00"), and an interaction (`payload`, a `block_actions` tap on a
//! confirmation's button, its `value` the button's id). Each is kept whole as the message's raw
//! form, which `read` reads again.

use serde_json::Value;

use crate::channels::body;
use crate::domain::command::{Channel, ExternalId};
use crate::domain::directory::SLACK_PREFIX;
use crate::domain::message::{Addresses, Content, InboundMessage};

mod bodies;

pub use bodies::{EventsBody, InteractionForm, SlashCommandForm};

/// What an Events API body asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The endpoint's check when it is set in the app's settings: echo the challenge.
    UrlVerification(String),
    /// A callback: the message it carries, if it carries one a person wrote.
    Callback(Option<Box<InboundMessage>>),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("not what Slack sends here: {0}")]
    Unexpected(String),
}

/// An Events API body.
pub fn event(body: &[u8]) -> Result<Event, PayloadError> {
    let value = body::json(body).map_err(PayloadError::NotJson)?;
    match body::envelope(&value).map_err(PayloadError::Unexpected)? {
        EventsBody::UrlVerification { challenge } => Ok(Event::UrlVerification(challenge)),
        EventsBody::EventCallback { .. } => Ok(Event::Callback(read(&value).map(Box::new))),
        // Acknowledged, nothing to store; the events it held come later.
        EventsBody::AppRateLimited { .. } => Ok(Event::Callback(None)),
    }
}

/// A slash command's form, as a JSON object of its fields (the raw form kept).
pub fn command(params: &[(String, String)]) -> Result<InboundMessage, PayloadError> {
    let raw = body::form(params);
    let _: SlashCommandForm = body::envelope(&raw).map_err(PayloadError::Unexpected)?;
    read(&raw).ok_or_else(|| PayloadError::Unexpected("a slash command without team_id".into()))
}

/// An interaction's form (`payload=<JSON>`): a `block_actions` tap; `None` for other kinds
/// (a view submission, a shortcut), which carry nothing to act on.
pub fn interaction(params: &[(String, String)]) -> Result<Option<InboundMessage>, PayloadError> {
    let InteractionForm { payload } = body::envelope(&body::form(params)).map_err(PayloadError::Unexpected)?;
    let value = body::json(payload.as_bytes()).map_err(PayloadError::NotJson)?;
    if value["type"] != "block_actions" {
        return Ok(None);
    }
    if !value["trigger_id"].is_string() && !value["actions"][0]["action_ts"].is_string() {
        return Err(PayloadError::Unexpected("a block_actions payload without trigger_id".into()));
    }
    Ok(read(&value))
}

/// The message any of the three raw forms holds (also for reprocessing); `None` when it holds
/// none a person wrote, or no team to route it by.
pub fn read(raw: &Value) -> Option<InboundMessage> {
    let read = if raw["type"] == "event_callback" {
        from_event(raw)?
    } else if raw["type"] == "block_actions" {
        from_action(raw)
    } else {
        from_command(raw)
    };
    let Read { id, team, user, channel, thread, content } = read;
    let team = text(team)?;
    let content = match (text(user), text(channel)) {
        (Some(_), Some(_)) => content,
        _ => unreadable(&content, "no user or channel"),
    };
    let person = text(user).map_or_else(|| "unknown".into(), |u| format!("{SLACK_PREFIX}{u}"));
    Some(InboundMessage {
        channel: Channel::parse(super::CHANNEL).ok()?,
        provider_message_id: ExternalId::parse(&id?).ok()?,
        to: team.to_owned(),
        from: person,
        sender_name: None,
        sent_at: None,
        content,
        in_reply_to: None,
        addresses: Some(Addresses {
            business: team.to_owned(),
            person: text(channel).unwrap_or_default().to_owned(),
            // Replies go to the thread of what the person wrote: a thread is a conversation.
            conversation: text(thread).map(str::to_owned),
        }),
        answered_inline: None,
        raw: raw.clone(),
    })
}

/// The parts of a message, wherever Slack put them.
struct Read<'a> {
    id: Option<String>,
    team: &'a Value,
    user: &'a Value,
    channel: &'a Value,
    thread: &'a Value,
    content: Content,
}

fn from_event(raw: &Value) -> Option<Read<'_>> {
    let event = &raw["event"];
    let person_wrote = matches!(event["type"].as_str(), Some("message" | "app_mention"))
        && event.get("bot_id").is_none()
        && event.get("subtype").is_none();
    if !person_wrote {
        return None;
    }
    let content = match event["text"].as_str() {
        Some(text) => Content::Text(without_mentions(text)),
        None => Content::Unsupported { kind: "message".into() },
    };
    let thread = if event["thread_ts"].is_string() { &event["thread_ts"] } else { &event["ts"] };
    let team = if raw["team_id"].is_string() { &raw["team_id"] } else { &event["team"] };
    let id = text(&raw["event_id"]).map(str::to_owned);
    Some(Read { id, team, user: &event["user"], channel: &event["channel"], thread, content })
}

fn from_command(raw: &Value) -> Read<'_> {
    let name = raw["command"].as_str().unwrap_or_default().trim_start_matches('/');
    let rest = raw["text"].as_str().unwrap_or_default().trim();
    // The app's own command takes the whole request; another names the request itself.
    let words = if name == "chatgate" { rest.to_owned() } else { format!("{name} {rest}").trim().to_owned() };
    let id = text(&raw["trigger_id"]).map(|t| format!("command:{t}"));
    let content = Content::Text(words);
    Read {
        id,
        team: &raw["team_id"],
        user: &raw["user_id"],
        channel: &raw["channel_id"],
        thread: &Value::Null,
        content,
    }
}

fn from_action(raw: &Value) -> Read<'_> {
    let action = &raw["actions"][0];
    let value = action["value"].as_str().or(action["action_id"].as_str()).unwrap_or_default();
    let content = if value.is_empty() {
        unreadable(&Content::Reply { id: String::new(), title: String::new() }, "a button without a value")
    } else {
        let title = action["text"]["text"].as_str().unwrap_or(value).to_owned();
        Content::Reply { id: value.to_owned(), title }
    };
    let trigger = text(&raw["trigger_id"]).or(text(&action["action_ts"]));
    let id = trigger.map(|t| format!("action:{t}"));
    let container = &raw["container"];
    let thread =
        if container["thread_ts"].is_string() { &container["thread_ts"] } else { &raw["message"]["thread_ts"] };
    let team = if raw["team"]["id"].is_string() { &raw["team"]["id"] } else { &raw["user"]["team_id"] };
    let channel = if raw["channel"]["id"].is_string() { &raw["channel"]["id"] } else { &container["channel_id"] };
    Read { id, team, user: &raw["user"]["id"], channel, thread, content }
}

/// `<@U123> refund 1234` (a mention of the bot) reads as "refund 1234".
fn without_mentions(text: &str) -> String {
    text.split_whitespace()
        .filter(|word| !(word.starts_with("<@") && word.ends_with('>')))
        .collect::<Vec<_>>()
        .join(" ")
}

fn unreadable(content: &Content, reason: &str) -> Content {
    Content::Unreadable { kind: content.kind().to_owned(), reason: reason.to_owned(), errors: None }
}

fn text(value: &Value) -> Option<&str> {
    value.as_str().map(str::trim).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests;
