//! The outbound worker: claims due messages from the outbox, renders them from their templates,
//! sends them through the provider and records what happened, with evidence.
//!
//! A message is claimed with a lease, so several gateway instances never send it at the same
//! time, and it is marked done only after the provider took it. A gateway that stops between
//! the commit and the send sends it after its restart; one that dies after the provider took the
//! message but before recording it sends it again when the lease runs out — the WhatsApp Cloud
//! API has no idempotency key, so that narrow window is at least once. A claimed batch's outcomes
//! are recorded together once the batch is sent (one transaction, not one per message), so the
//! window is the batch's send time.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use time::OffsetDateTime;
use tokio::task::JoinSet;

use crate::channels::outbound::{ChannelSender, SendResult};
use crate::channels::{CHANNELS, capabilities_of};
use crate::config::Config;

use crate::config::OutboundConfig;
use crate::domain::outbound::SendOutcome;
use crate::domain::retry::RetryPolicy;
use crate::service::database::StoreError;
use crate::service::engine::Engine;
use crate::service::live::Live;
use crate::service::replies::outgoing::Outgoing;
use crate::service::replies::sending::{ClaimedMessage, Recorded, count};
use crate::service::replies::templates::Templates;

/// The providers messages leave through, by channel: a sender for each registered channel
/// (`channels::CHANNELS`) the configuration gives credentials.
#[derive(Clone, Debug, Default)]
pub struct Providers {
    senders: BTreeMap<&'static str, Arc<dyn ChannelSender>>,
}

/// How long a message for a provider without credentials waits before it is looked at again.
const NO_CREDENTIALS_WAIT: Duration = Duration::from_secs(60);

impl Providers {
    /// A sender for every channel the configuration gives credentials.
    pub fn from_config(config: &Config, timeout: Duration) -> Result<Self, reqwest::Error> {
        let mut senders = BTreeMap::new();
        for channel in CHANNELS {
            if let Some(sender) = (channel.sender)(config, timeout)? {
                senders.insert(channel.name, sender);
            }
        }
        Ok(Self { senders })
    }

    pub fn is_empty(&self) -> bool {
        self.senders.is_empty()
    }

    /// Sends through the message's provider; `None` when it has no credentials here.
    async fn send(&self, outgoing: &Outgoing) -> Option<SendResult> {
        self.senders.get(outgoing.channel.as_str())?.send(outgoing).await
    }
}

#[derive(Clone)]
pub struct Sender {
    engine: Engine,
    templates: Live<Templates>,
    providers: Providers,
    policy: RetryPolicy,
    lease: Duration,
    batch: i64,
    /// How often the table is claimed from while messages are handed over (`Handoff`).
    poll: Duration,
}

impl Sender {
    pub fn new(engine: Engine, templates: Live<Templates>, providers: Providers, config: &OutboundConfig) -> Self {
        Self {
            engine,
            templates,
            providers,
            policy: config.retry_policy(),
            lease: Duration::from_millis(config.lease_ms),
            batch: config.batch,
            poll: Duration::from_millis(config.poll_interval_ms),
        }
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Opens the handoff: the messages this process's commits write come to this sender
    /// leased, without a claim, until it is closed (SQLite only).
    pub fn open_handoff(&self) -> Option<Arc<crate::service::replies::sending::Handoff>> {
        self.engine.sending().open_handoff(self.lease)
    }

    /// How many messages one claim takes at most.
    pub fn batch(&self) -> usize {
        usize::try_from(self.batch).unwrap_or(0)
    }

    /// Claims and sends one batch; returns how many were claimed. Messages to one person go in
    /// order; different people's go at the same time. Messages to known people go first; notices
    /// to strangers only fill the room they leave.
    pub async fn send_due(&self, now: OffsetDateTime) -> Result<usize, StoreError> {
        // In the order they were written (the store sorts what it claims).
        let claimed = self.engine.sending().claim_due(self.batch, (self.lease, self.poll), now).await?;
        let count = claimed.len();
        let mut by_person: BTreeMap<String, Vec<ClaimedMessage>> = BTreeMap::new();
        for message in claimed {
            by_person.entry(message.destination.clone()).or_default().push(message);
        }
        let mut sending = JoinSet::new();
        for (_, messages) in by_person {
            let sender = self.clone();
            sending.spawn(async move {
                let mut recorded = Vec::with_capacity(messages.len());
                for message in messages {
                    match sender.send_one(&message).await {
                        Ok(outcome) => recorded.extend(outcome),
                        // The lease runs out and the message is tried again.
                        Err(error) => tracing::warn!(%error, id = %message.id, "cannot record a send"),
                    }
                }
                recorded
            });
        }
        let mut recorded = Vec::with_capacity(count);
        while let Some(sent) = sending.join_next().await {
            recorded.extend(sent.unwrap_or_default());
        }
        // One transaction for the batch's outcomes. If it fails, the leases run out and the
        // messages go again: the same at-least-once window as a crash after the provider's answer.
        if let Err(error) = self.engine.sending().record(&recorded, OffsetDateTime::now_utc()).await {
            tracing::warn!(%error, messages = recorded.len(), "cannot record a batch of sends");
        }
        Ok(count)
    }

    /// Sends one message; what became of it, to record with the batch's (none when it is tried
    /// again later, which is written here).
    async fn send_one(&self, message: &ClaimedMessage) -> Result<Option<Recorded>, StoreError> {
        let now = OffsetDateTime::now_utc();
        let sending = self.engine.sending();
        let outgoing = match sending.render(&self.templates.get(), message, capabilities_of) {
            Ok(outgoing) => outgoing,
            Err(given_up) => return Ok(Some(*given_up)),
        };
        let Some(result) = self.providers.send(&outgoing).await else {
            // Not a failure of the message: it goes once the provider's credentials are set.
            let (id, channel) = (message.id, &outgoing.channel);
            tracing::warn!(%id, %channel, "no credentials for this channel; the message waits");
            let error = format!("no credentials for {}", outgoing.channel);
            return sending.later(message.id, &error, Some(now + NO_CREDENTIALS_WAIT), now).await.map(|()| None);
        };
        match result {
            SendResult::Sent { id } => Ok(Some(sending.sent(message, &outgoing, Some(id), &SendOutcome::Sent))),
            SendResult::Retry { error, retry_after } => {
                match self.policy.next_delay(u32::try_from(message.attempt).unwrap_or(u32::MAX), retry_after) {
                    Some(delay) => {
                        count(outgoing.channel.as_str(), "retry");
                        let (id, attempt) = (message.id, message.attempt);
                        tracing::info!(%id, attempt, ?delay, %error, "send failed; retrying");
                        // Retry-After counts from the answer, not from when the call started.
                        let answered = OffsetDateTime::now_utc();
                        sending.later(message.id, &error, Some(answered + delay), answered).await.map(|()| None)
                    }
                    None => {
                        let (errors, exhausted) =
                            (Some(json!({"last_error": error})), SendOutcome::Failed("attempts_exhausted".into()));
                        Ok(Some(sending.given_up(message, Some(&outgoing), &exhausted, errors, &error)))
                    }
                }
            }
            SendResult::Refused { status, error } => {
                let (text, refused) = (format!("{status}: {error}"), SendOutcome::Failed("refused".into()));
                Ok(Some(sending.given_up(message, Some(&outgoing), &refused, Some(error), &text)))
            }
        }
    }
}
