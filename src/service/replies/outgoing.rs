//! A queued reply made ready to leave: rendered from its template for its channel and locale,
//! and the record (with its `message.sent` or `message.failed` evidence) of what became of it.
//! The outbox sender and the answers carried inline (Twilio's TwiML) use the same two steps.

use serde_json::{Value, json};

use crate::domain::command::Channel;
use crate::domain::evidence::Pseudonymizer;
use crate::domain::evidence::{EvidenceDraft, TraceBindings};
use crate::domain::lifecycle::EvidenceKind;
use crate::service::replies::templates::Templates;
use crate::store::{ClaimedMessage, OutboundRecord};

/// The channels a reply can be sent on.
pub const CHANNELS: &[&str] = &["whatsapp", "twilio", "standard"];

/// A quick-reply button (WhatsApp interactive buttons).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Button {
    pub id: String,
    pub title: String,
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
    pub purpose: String,
    pub template: String,
}

/// Renders a claimed row into what the provider gets.
pub fn render(templates: &Templates, message: &ClaimedMessage) -> Result<Outgoing, String> {
    let p = &message.payload;
    let field = |name: &str| p[name].as_str().map(str::to_owned).ok_or_else(|| format!("the message has no `{name}`"));
    let channel = Channel::parse(&field("channel")?).map_err(|e| e.to_string())?;
    if !CHANNELS.contains(&channel.as_str()) {
        return Err(format!("no sender for channel `{channel}`"));
    }
    let locale = p["locale"].as_str().unwrap_or(crate::service::replies::FALLBACK_LOCALE);
    let template = field("template")?;
    let vars = p.get("vars").cloned().unwrap_or_else(|| json!({}));
    let text = templates.render(channel.as_str(), locale, &template, &vars).map_err(|e| e.to_string())?;
    let mut buttons = vec![];
    for button in p["buttons"].as_array().into_iter().flatten() {
        let id = button["id"].as_str().ok_or("a button has no id")?.to_owned();
        let name = button["template"].as_str().ok_or("a button has no title template")?;
        let title = templates.render(channel.as_str(), locale, name, &vars).map_err(|e| e.to_string())?;
        buttons.push(Button { id, title });
    }
    // The provider's own addresses when the conversation has them, else Meta's ids.
    let (from, to) = match (field("from_address"), field("to_address")) {
        (Ok(from), Ok(to)) => (from, to),
        _ => (field("phone_number_id")?, field("to")?),
    };
    Ok(Outgoing {
        id: message.id,
        channel,
        from,
        to,
        text,
        buttons,
        in_reply_to: p["in_reply_to"].as_str().map(str::to_owned),
        conversation: p["conversation"].as_str().map(str::to_owned),
        purpose: p["purpose"].as_str().unwrap_or("reply").to_owned(),
        template,
    })
}

/// What is kept of a send: the row for status webhooks and the evidence. `outcome` is `sent`
/// (through the provider's API), `sent_inline` (in the answer to its webhook) or why it failed.
pub fn record(
    pseudonyms: &Pseudonymizer,
    message: &ClaimedMessage,
    outgoing: Option<&Outgoing>,
    provider_id: Option<String>,
    outcome: &str,
    errors: Option<Value>,
) -> OutboundRecord {
    let p = &message.payload;
    let sent = outcome.starts_with("sent");
    let kind = if sent { EvidenceKind::MessageSent } else { EvidenceKind::MessageFailed };
    let trace = TraceBindings {
        conversation: Some(pseudonyms.pseudonym(&message.destination)),
        message_ids: provider_id.iter().cloned().chain(p["in_reply_to"].as_str().map(str::to_owned)).collect(),
        ..TraceBindings::default()
    };
    let decision = json!({
        "outcome": outcome,
        "purpose": outgoing.map(|o| o.purpose.as_str()).or(p["purpose"].as_str()),
        "template": outgoing.map(|o| o.template.as_str()).or(p["template"].as_str()),
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
        trace,
        decision: Some(decision),
        reason_code: (!sent).then(|| outcome.to_owned()),
    };
    OutboundRecord {
        outbox_id: message.id,
        tenant_id: message.tenant_id.clone(),
        channel: outgoing
            .map(|o| o.channel.to_string())
            .or_else(|| p["channel"].as_str().map(str::to_owned))
            .unwrap_or_else(|| "unknown".into()),
        command_id: message.command_id,
        recipient: p["to"].as_str().unwrap_or_default().to_owned(),
        provider_message_id: provider_id,
        errors,
        evidence,
    }
}
