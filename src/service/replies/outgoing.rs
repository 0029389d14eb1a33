//! A queued reply made ready to leave: rendered from its template for its channel and locale,
//! and the record (with its `message.sent` or `message.failed` evidence) of what became of it.
//! The outbox sender and the answers carried inline (Twilio's TwiML) use the same two steps.

use serde_json::{Value, json};

use crate::domain::command::Channel;
use crate::domain::evidence::Pseudonymizer;
use crate::domain::evidence::{EvidenceDraft, TraceBindings};
use crate::domain::lifecycle::EvidenceKind;
use crate::domain::outbound::{Capabilities, OutboxMessage, Purpose, SendOutcome};
use crate::service::replies::templates::Templates;
use crate::store::{ClaimedMessage, OutboundRecord};

/// What a channel can show, by its name (`channels::capabilities_of`); `None`: a channel that
/// sends nothing.
pub type CapabilitiesOf = fn(&str) -> Option<Capabilities>;

/// A quick-reply button (WhatsApp interactive buttons).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Button {
    pub id: String,
    pub title: String,
}

impl Button {
    /// A confirmation's two buttons as the channels' tests send them (`cg:yes:n`, `cg:no:n`).
    pub fn yes_and_no() -> [Button; 2] {
        [Button { id: "cg:yes:n".into(), title: "Yes".into() }, Button { id: "cg:no:n".into(), title: "No".into() }]
    }
}

/// A claimed message, rendered: where it goes and what it says.
pub struct Outgoing {
    /// The outbox row's id.
    pub id: uuid::Uuid,
    pub channel: Channel,
    /// Ours: WhatsApp's `phone_number_id`, Twilio's `From` address.
    pub from: String,
    /// Theirs: a `wa_id`, Twilio's `To` address.
    pub to: String,
    pub text: String,
    pub buttons: Vec<Button>,
    pub in_reply_to: Option<String>,
    /// The sender system's own conversation id, when it gave one.
    pub conversation: Option<String>,
    pub purpose: Purpose,
    pub template: String,
    /// The person as routing knows them (the delivery statuses' recipient).
    pub recipient: String,
}

/// Renders a claimed row into what the provider gets, fitted to what its channel can show.
pub fn render(
    templates: &Templates,
    message: &ClaimedMessage,
    capabilities_of: CapabilitiesOf,
) -> Result<Outgoing, String> {
    let stored = OutboxMessage::from_payload(&message.payload)?;
    let m = stored.message();
    let channel = &m.address.channel;
    let Some(fits) = capabilities_of(channel.as_str()) else {
        return Err(format!("no sender for channel `{channel}`"));
    };
    let render = |name: &str| templates.render(channel.as_str(), &m.address.locale, name, &m.vars);
    let text = Capabilities::cut(&render(&m.template).map_err(|e| e.to_string())?, fits.max_text_chars);
    let mut buttons = Vec::with_capacity(m.buttons.len().min(fits.max_buttons));
    for button in m.buttons.iter().take(fits.max_buttons) {
        let title = render(&button.template).map_err(|e| e.to_string())?;
        buttons.push(Button { id: button.id.clone(), title: Capabilities::cut(&title, fits.max_button_title_chars) });
    }
    let (from, to) = m.address.endpoints();
    Ok(Outgoing {
        id: message.id,
        channel: channel.clone(),
        from: from.to_owned(),
        to: to.to_owned(),
        text,
        buttons,
        in_reply_to: m.address.in_reply_to.clone(),
        conversation: m.address.conversation.clone(),
        purpose: m.purpose,
        template: m.template.clone(),
        recipient: m.address.person.clone(),
    })
}

/// What is kept of a send: the row for status webhooks and the evidence (`message.sent` for a
/// send, else `message.failed` with the reason).
pub fn record(
    pseudonyms: &Pseudonymizer,
    message: &ClaimedMessage,
    outgoing: Option<&Outgoing>,
    provider_id: Option<String>,
    outcome: &SendOutcome,
    errors: Option<Value>,
) -> OutboundRecord {
    // What the row says of itself, read again only for a message that could not be rendered.
    let stored = match outgoing {
        Some(_) => None,
        None => OutboxMessage::from_payload(&message.payload).ok(),
    };
    let stored = stored.as_ref().map(OutboxMessage::message);
    let sent = outcome.is_sent();
    let kind = if sent { EvidenceKind::MessageSent } else { EvidenceKind::MessageFailed };
    let in_reply_to = match outgoing {
        Some(o) => o.in_reply_to.clone(),
        None => stored.and_then(|m| m.address.in_reply_to.clone()),
    };
    let trace = TraceBindings {
        conversation: Some(pseudonyms.pseudonym(&message.destination)),
        message_ids: provider_id.iter().cloned().chain(in_reply_to).collect(),
        ..TraceBindings::default()
    };
    let decision = json!({
        "outcome": outcome.as_str(),
        "purpose": outgoing.map(|o| o.purpose).or(stored.map(|m| m.purpose)).map(Purpose::as_str),
        "template": outgoing.map(|o| o.template.as_str()).or(stored.map(|m| m.template.as_str())),
        "attempt": message.attempt,
        "provider_message_id": provider_id,
        "error": errors,
    });
    let evidence = EvidenceDraft {
        kind,
        command_id: message.command_id,
        stage: None,
        from: None,
        event: None,
        trace: trace.into(),
        decision: Some(decision),
        reason_code: (!sent).then(|| outcome.as_str().to_owned()),
    };
    let channel = outgoing.map(|o| &o.channel).or(stored.map(|m| &m.address.channel));
    OutboundRecord {
        outbox_id: message.id,
        tenant_id: message.tenant_id.clone(),
        channel: channel.map_or_else(|| "unknown".into(), Channel::to_string),
        command_id: message.command_id,
        recipient: outgoing
            .map(|o| o.recipient.clone())
            .or(stored.map(|m| m.address.person.clone()))
            .unwrap_or_default(),
        provider_message_id: provider_id,
        errors,
        evidence,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::outbound::{ButtonSpec, ChatMessage, ReplyAddress};

    fn claimed(channel: &str, buttons: usize) -> ClaimedMessage {
        let channel = Channel::parse(channel).expect("a channel");
        let message = OutboxMessage::V1(ChatMessage {
            address: ReplyAddress::new(channel, "1", "2", "en"),
            purpose: Purpose::Prompt,
            template: "help".into(),
            vars: json!({}),
            buttons: (0..buttons).map(|n| ButtonSpec { id: format!("b{n}"), template: "title".into() }).collect(),
        });
        let (id, tenant_id, kind, destination) = (uuid::Uuid::nil(), "demo".into(), "message".into(), "d".into());
        ClaimedMessage { id, tenant_id, command_id: None, kind, destination, payload: message.to_payload(), attempt: 1 }
    }

    fn small(channel: &str) -> Option<Capabilities> {
        (channel == "small").then_some(Capabilities { max_text_chars: 8, max_buttons: 2, max_button_title_chars: 4 })
    }

    #[test]
    fn a_reply_is_cut_to_what_its_channel_can_show_and_a_channel_without_a_sender_is_refused() {
        let sources = [("small/en/help", "a long help text"), ("small/en/title", "a long title")];
        let templates = Templates::from_sources(sources.map(|(k, v)| (k.to_owned(), v.to_owned()))).expect("parses");
        let outgoing = render(&templates, &claimed("small", 3), small).expect("renders");
        assert_eq!(outgoing.text, "a long …");
        let titles: Vec<_> = outgoing.buttons.iter().map(|b| (b.id.as_str(), b.title.as_str())).collect();
        assert_eq!(titles, [("b0", "a l…"), ("b1", "a l…")], "two buttons at most, titles cut");
        let none = render(&templates, &claimed("other", 0), small).err().expect("no sender");
        assert!(none.contains("no sender for channel `other`"), "{none}");
    }
}
