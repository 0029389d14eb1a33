//! Confirmations, the pure part: what a prompt carries (a short code a person can type, a nonce
//! the buttons carry) and how a message is read as an answer to one. No I/O here.

use rand::Rng;
use time::OffsetDateTime;

use crate::domain::directory::CODE_ALPHABET;
use crate::domain::message::Content;
use crate::domain::outbound::{ButtonSpec, Purpose};
use crate::domain::replies::{Prompt, Reply};
use crate::store::{NewConfirmation, NewOutboxMessage, ReplyTo};

pub const CODE_LENGTH: usize = 6;
/// Button ids: `cg:yes:<nonce>` and `cg:no:<nonce>`.
const BUTTON_PREFIX: &str = "cg";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Yes,
    No,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Yes => "yes",
            Self::No => "no",
        }
    }
}

/// Which confirmation an answer names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    /// A button tap: the nonce is unguessable and names exactly one confirmation.
    Nonce(String),
    /// `YES K7Q2MX`: a short code, unique enough among one actor's pending confirmations.
    Code(String),
    /// A bare `yes`: only valid when the actor has exactly one pending confirmation.
    Bare,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub verdict: Verdict,
    pub named: Named,
}

impl Answer {
    /// Reads a message as an answer, or `None` when it is something else (a command, help).
    pub fn parse(content: &Content) -> Option<Self> {
        match content {
            Content::Reply { id, .. } => Self::parse_button(id),
            Content::Text(text) => Self::parse_text(text),
            _ => None,
        }
    }

    fn parse_button(id: &str) -> Option<Self> {
        let mut parts = id.splitn(3, ':');
        let (prefix, verdict, nonce) = (parts.next()?, parts.next()?, parts.next()?);
        if prefix != BUTTON_PREFIX || nonce.is_empty() {
            return None;
        }
        let verdict = match verdict {
            "yes" => Verdict::Yes,
            "no" => Verdict::No,
            _ => return None,
        };
        Some(Self { verdict, named: Named::Nonce(nonce.to_owned()) })
    }

    fn parse_text(text: &str) -> Option<Self> {
        let mut words = text.split_whitespace();
        let first = words.next()?.trim_end_matches(['.', '!', ',']).to_lowercase();
        let verdict = match first.as_str() {
            "yes" | "y" | "sim" | "s" => Verdict::Yes,
            "no" | "n" | "nao" | "não" => Verdict::No,
            _ => return None,
        };
        let named = match (words.next(), words.next()) {
            (None, _) => Named::Bare,
            (Some(code), None) => Named::Code(normalize_code(code)?),
            // "no refund 1234 5": a sentence, not an answer.
            _ => return None,
        };
        Some(Self { verdict, named })
    }
}

/// A typed code, as stored: upper case, only the code alphabet.
fn normalize_code(raw: &str) -> Option<String> {
    let code = raw.trim_matches(|c: char| !c.is_ascii_alphanumeric()).to_ascii_uppercase();
    (code.len() == CODE_LENGTH && code.bytes().all(|b| CODE_ALPHABET.contains(&b))).then_some(code)
}

pub fn new_code() -> String {
    let mut rng = rand::rng();
    (0..CODE_LENGTH).map(|_| char::from(CODE_ALPHABET[rng.random_range(0..CODE_ALPHABET.len())])).collect()
}

/// 128 random bits, hex: a button id nobody can guess or derive from the code.
pub fn new_nonce() -> String {
    let bytes: [u8; 16] = rand::rng().random();
    hex::encode(bytes)
}

pub fn button_id(verdict: Verdict, nonce: &str) -> String {
    format!("{BUTTON_PREFIX}:{}:{nonce}", verdict.as_str())
}

/// What a prompt says of the command it asks about (the confirmation adds its code and time).
#[derive(Debug, Clone, PartialEq)]
pub struct PromptFor {
    pub command: String,
    pub what: String,
    pub usage: String,
    pub args: serde_json::Value,
    pub step_up: bool,
    /// The executor's preview, shown in the prompt; `preview_missing` when one was asked for
    /// and none came.
    pub preview: Option<crate::domain::preview::Preview>,
    pub preview_missing: bool,
}

/// A new confirmation and its prompt: the prompt gets the code and the time left, and its buttons
/// carry the nonce.
pub fn prompt(reply_to: &ReplyTo, asked: PromptFor, ttl: std::time::Duration, now: OffsetDateTime) -> NewConfirmation {
    let (code, nonce) = (new_code(), new_nonce());
    let expires_at = now + ttl;
    let PromptFor { command, what, usage, args, step_up, preview, preview_missing } = asked;
    let vars = Prompt {
        command,
        what,
        usage,
        args,
        step_up,
        code: code.clone(),
        expires_at: expires_at.unix_timestamp(),
        expires_in_minutes: ttl.as_secs().div_ceil(60),
        preview,
        preview_missing,
    };
    let reply = Reply::ConfirmationPrompt(vars);
    let mut prompt = reply_to.chat(&reply);
    let message = prompt.message_mut();
    message.purpose = Purpose::Prompt;
    message.buttons = [Verdict::Yes, Verdict::No]
        .into_iter()
        .zip(reply.button_templates())
        .map(|(verdict, template)| ButtonSpec { id: button_id(verdict, &nonce), template: (*template).into() })
        .collect();
    NewConfirmation { code, nonce, expires_at, prompt }
}

/// The prompt as an outbox message.
pub fn prompt_message(reply_to: &ReplyTo, confirmation: &NewConfirmation) -> NewOutboxMessage {
    reply_to.outbox(&confirmation.prompt)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(t: &str) -> Option<Answer> {
        Answer::parse(&Content::Text(t.into()))
    }

    #[test]
    fn text_answers_with_a_code_or_bare() {
        assert_eq!(text("YES K7Q2MX"), Some(Answer { verdict: Verdict::Yes, named: Named::Code("K7Q2MX".into()) }));
        assert_eq!(text(" no  k7q2mx. "), Some(Answer { verdict: Verdict::No, named: Named::Code("K7Q2MX".into()) }));
        assert_eq!(text("Sim K7Q2MX"), Some(Answer { verdict: Verdict::Yes, named: Named::Code("K7Q2MX".into()) }));
        assert_eq!(text("NÃO K7Q2MX"), Some(Answer { verdict: Verdict::No, named: Named::Code("K7Q2MX".into()) }));
        assert_eq!(text("yes"), Some(Answer { verdict: Verdict::Yes, named: Named::Bare }));
        assert_eq!(text("No!"), Some(Answer { verdict: Verdict::No, named: Named::Bare }));
    }

    #[test]
    fn other_text_is_not_an_answer() {
        for other in ["refund 1234 25", "yes please do it", "yesterday", "", "yes K7Q", "yes K0Q2MX", "maybe"] {
            assert_eq!(text(other), None, "{other}");
        }
    }

    #[test]
    fn buttons_carry_the_nonce_and_nothing_else_is_a_button_answer() {
        let nonce = new_nonce();
        assert_eq!(nonce.len(), 32);
        let tap = |id: String| Answer::parse(&Content::Reply { id, title: "Yes".into() });
        assert_eq!(
            tap(button_id(Verdict::Yes, &nonce)),
            Some(Answer { verdict: Verdict::Yes, named: Named::Nonce(nonce.clone()) })
        );
        assert_eq!(
            tap(button_id(Verdict::No, &nonce)),
            Some(Answer { verdict: Verdict::No, named: Named::Nonce(nonce.clone()) })
        );
        for other in ["order_status:1234", "cg:maybe:abc", "cg:yes:", "xx:yes:abc"] {
            assert_eq!(tap(other.into()), None, "{other}");
        }
    }

    #[test]
    fn codes_are_readable_and_read_back() {
        for _ in 0..200 {
            let code = new_code();
            assert_eq!(code.len(), CODE_LENGTH);
            assert_eq!(normalize_code(&code.to_lowercase()), Some(code));
        }
        assert_ne!(new_nonce(), new_nonce());
    }

    fn whatsapp() -> crate::domain::command::Channel {
        crate::domain::command::Channel::parse("whatsapp").expect("a channel")
    }

    #[test]
    fn a_prompt_carries_code_expiry_and_buttons_with_the_nonce() {
        let reply_to = ReplyTo {
            destination: "whatsapp:1:2".into(),
            base: crate::domain::outbound::ReplyAddress::new(whatsapp(), "1", "2", "en"),
            command: None,
            what: None,
            executed_template: None,
            hold: None,
        };
        let now = OffsetDateTime::UNIX_EPOCH;
        let asked = PromptFor {
            command: "refund".into(),
            what: "refund 25 on order 1234".into(),
            usage: "refund {order_id} {amount}".into(),
            args: json!({"order_id": "1234", "amount": "25"}),
            step_up: false,
            preview: None,
            preview_missing: false,
        };
        let c = prompt(&reply_to, asked, std::time::Duration::from_secs(300), now);
        assert_eq!(c.expires_at, now + std::time::Duration::from_secs(300));
        let message = c.prompt.message();
        assert_eq!(message.vars["code"], c.code.as_str());
        assert_eq!(message.vars["expires_in_minutes"], 5);
        assert_eq!(message.purpose, Purpose::Prompt);
        assert_eq!(message.buttons[0].id, button_id(Verdict::Yes, &c.nonce));
        assert_eq!(message.buttons[1].id, button_id(Verdict::No, &c.nonce));
        assert_eq!(prompt_message(&reply_to, &c).kind, crate::store::MESSAGE_KIND);
    }
}
