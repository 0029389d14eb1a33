//! The outbound worker: claims due messages from the outbox, renders them from their templates,
//! sends them through the provider and records what happened, with evidence.
//!
//! A message is claimed with a lease, so several gateway instances never send it at the same
//! time, and it is marked done only after the provider took it. A gateway that stops between
//! the commit and the send sends it after its restart; one that dies after the provider took the
//! message but before recording it sends it again when the lease runs out — the WhatsApp Cloud
//! API has no idempotency key, so that narrow window is at least once.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use time::OffsetDateTime;
use tokio::task::JoinSet;

use crate::channels::whatsapp::client::Button;

use crate::channels::whatsapp::client::GraphClient;

use crate::channels::whatsapp::client::SendResult;

use crate::channels::standard::client::Reply;
use crate::channels::standard::client::StandardReplies;
use crate::channels::twilio::client::TwilioClient;
use crate::channels::whatsapp::client::whatsapp_body;
use crate::config::OutboundConfig;
use crate::domain::command::Channel;
use crate::domain::evidence::EvidenceDraft;
use crate::domain::evidence::TraceBindings;
use crate::domain::lifecycle::EvidenceKind;
use crate::domain::retry::RetryPolicy;
use crate::service::engine::Engine;
use crate::service::replies::templates::Templates;
use crate::store::{ClaimedMessage, MESSAGE_KIND, OutboundRecord, StoreError};

/// The providers messages leave through, by channel.
#[derive(Clone, Debug, Default)]
pub struct Providers {
    pub whatsapp: Option<GraphClient>,
    pub twilio: Option<TwilioClient>,
    pub standard: Option<StandardReplies>,
}

/// The channels a message can be sent on.
const CHANNELS: &[&str] = &["whatsapp", "twilio", "standard"];

/// How long a message for a provider without credentials waits before it is looked at again.
const NO_CREDENTIALS_WAIT: Duration = Duration::from_secs(60);

impl Providers {
    pub fn is_empty(&self) -> bool {
        self.whatsapp.is_none() && self.twilio.is_none() && self.standard.is_none()
    }

    /// Sends through the message's provider; `None` when it has no credentials here.
    async fn send(&self, outgoing: &Outgoing) -> Option<SendResult> {
        match outgoing.channel.as_str() {
            "whatsapp" => {
                let client = self.whatsapp.as_ref()?;
                let o = outgoing;
                let body = whatsapp_body(&o.to, &o.text, &o.buttons, o.in_reply_to.as_deref());
                Some(client.send(&o.from, &body).await)
            }
            // Buttons need a pre-approved content template on Twilio; the prompt's text always
            // says how to answer by typing.
            "twilio" => Some(self.twilio.as_ref()?.send(&outgoing.from, &outgoing.to, &outgoing.text).await),
            "standard" => {
                let o = outgoing;
                let reply = Reply {
                    id: &o.id.to_string(),
                    source: &o.from,
                    to: &o.to,
                    conversation: o.conversation.as_deref(),
                    in_reply_to: o.in_reply_to.as_deref(),
                    text: &o.text,
                };
                self.standard.as_ref()?.send(&reply).await
            }
            _ => None,
        }
    }
}

#[derive(Clone)]
pub struct Sender {
    engine: Engine,
    templates: Arc<Templates>,
    providers: Providers,
    policy: RetryPolicy,
    lease: Duration,
    batch: i64,
}

/// A claimed message, rendered: where it goes and what it says.
pub(crate) struct Outgoing {
    /// The outbox row's id.
    id: uuid::Uuid,
    channel: Channel,
    /// Ours: WhatsApp's `phone_number_id`, Twilio's `From` address.
    from: String,
    /// Theirs: a `wa_id`, Twilio's `To` address.
    to: String,
    pub(crate) text: String,
    buttons: Vec<Button>,
    in_reply_to: Option<String>,
    /// The sender system's own conversation id, when it gave one.
    conversation: Option<String>,
    purpose: String,
    template: String,
}

impl Sender {
    pub fn new(engine: Engine, templates: Arc<Templates>, providers: Providers, config: &OutboundConfig) -> Self {
        Self {
            engine,
            templates,
            providers,
            policy: config.retry_policy(),
            lease: Duration::from_millis(config.lease_ms),
            batch: config.batch,
        }
    }

    /// How many messages one claim takes at most.
    pub fn batch(&self) -> usize {
        usize::try_from(self.batch).unwrap_or(0)
    }

    /// Claims and sends one batch; returns how many were claimed. Messages to one person go in
    /// order; different people's go at the same time.
    pub async fn send_due(&self, now: OffsetDateTime) -> Result<usize, StoreError> {
        // In the order they were written (the store sorts what it claims).
        let claimed = self.engine.store().claim_outbox(MESSAGE_KIND, self.batch, self.lease, now).await?;
        let count = claimed.len();
        let mut by_person: BTreeMap<String, Vec<ClaimedMessage>> = BTreeMap::new();
        for message in claimed {
            by_person.entry(message.destination.clone()).or_default().push(message);
        }
        let mut sending = JoinSet::new();
        for (_, messages) in by_person {
            let sender = self.clone();
            sending.spawn(async move {
                for message in messages {
                    if let Err(error) = sender.send_one(&message).await {
                        // The lease runs out and the message is tried again.
                        tracing::warn!(%error, id = %message.id, "cannot record a send");
                    }
                }
            });
        }
        while sending.join_next().await.is_some() {}
        Ok(count)
    }

    async fn send_one(&self, message: &ClaimedMessage) -> Result<(), StoreError> {
        let now = OffsetDateTime::now_utc();
        let outgoing = match render(&self.templates, message) {
            Ok(outgoing) => outgoing,
            Err(problem) => {
                // Nothing to retry: the same row renders the same way next time.
                tracing::error!(id = %message.id, %problem, "a message cannot be rendered; giving it up");
                let record = record(&self.engine, message, None, None, &problem, Some(json!({"render": problem})));
                return self.give_up(&record, &problem, now).await;
            }
        };
        let Some(result) = self.providers.send(&outgoing).await else {
            // Not a failure of the message: it goes once the provider's credentials are set.
            tracing::warn!(id = %message.id, channel = %outgoing.channel, "no credentials for this channel; the message waits");
            let error = format!("no credentials for {}", outgoing.channel);
            return self.engine.store().fail_outbox(message.id, &error, Some(now + NO_CREDENTIALS_WAIT), now).await;
        };
        match result {
            SendResult::Sent { id } => {
                count(outgoing.channel.as_str(), "sent");
                let record = record(&self.engine, message, Some(&outgoing), Some(id), "sent", None);
                self.engine.store().record_sent(&record, OffsetDateTime::now_utc()).await
            }
            SendResult::Retry { error, retry_after } => {
                match self.policy.next_delay(u32::try_from(message.attempt).unwrap_or(u32::MAX), retry_after) {
                    Some(delay) => {
                        count(outgoing.channel.as_str(), "retry");
                        tracing::info!(id = %message.id, attempt = message.attempt, ?delay, %error, "send failed; retrying");
                        self.engine.store().fail_outbox(message.id, &error, Some(now + delay), now).await
                    }
                    None => {
                        let errors = Some(json!({"last_error": error}));
                        let record = record(&self.engine, message, Some(&outgoing), None, "attempts_exhausted", errors);
                        self.give_up(&record, &error, now).await
                    }
                }
            }
            SendResult::Refused { status, error } => {
                let text = format!("{status}: {error}");
                let record = record(&self.engine, message, Some(&outgoing), None, "refused", Some(error));
                self.give_up(&record, &text, now).await
            }
        }
    }

    async fn give_up(&self, record: &OutboundRecord, error: &str, now: OffsetDateTime) -> Result<(), StoreError> {
        count(&record.channel, "given_up");
        tracing::warn!(id = %record.outbox_id, %error, "message given up");
        self.engine.store().record_given_up(record, error, now).await
    }
}

/// Renders a claimed row into what the provider gets.
pub(crate) fn render(templates: &Templates, message: &ClaimedMessage) -> Result<Outgoing, String> {
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
pub(crate) fn record(
    engine: &Engine,
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
        conversation: Some(engine.pseudonym(&message.destination)),
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

fn count(channel: &str, outcome: &'static str) {
    metrics::counter!("chatgate_outbound_messages_total", "channel" => channel.to_string(), "outcome" => outcome)
        .increment(1);
}
