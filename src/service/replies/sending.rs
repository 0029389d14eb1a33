//! The one sending path, shared by the outbox's sender (`workers::sender`, through a provider's
//! API) and the answers carried by a provider's own webhook (Twilio's TwiML): claim under a
//! lease, render, record what became of each message with its evidence, give up on what cannot
//! be rendered. Only the provider's call is the caller's.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::{Channel, ExternalId};
use crate::domain::evidence::Pseudonymizer;
use crate::domain::outbound::SendOutcome;
use crate::service::database::StoreError;
use crate::service::replies::outgoing::{CapabilitiesOf, Outgoing, record, render};
use crate::service::replies::templates::Templates;
use crate::store::{MESSAGE_KIND, NOTICE_KIND, Store};

pub use crate::store::{ClaimedMessage, Handoff, Recorded};

/// The sending path (`Engine::sending`).
#[derive(Clone, Copy, Debug)]
pub struct Sending<'a> {
    store: &'a Store,
    pseudonyms: &'a Pseudonymizer,
}

impl<'a> Sending<'a> {
    pub(in crate::service) fn new(store: &'a Store, pseudonyms: &'a Pseudonymizer) -> Self {
        Self { store, pseudonyms }
    }

    /// Notified when a message or a notice is queued on this instance.
    pub fn signals(&self) -> Vec<Arc<tokio::sync::Notify>> {
        [MESSAGE_KIND, NOTICE_KIND].map(|kind| self.store.outbox_signal(kind)).to_vec()
    }

    /// Opens the handoff of messages to this process's sender, which leases for `lease` (on
    /// SQLite only: `Store::open_handoff`).
    pub fn open_handoff(&self, lease: Duration) -> Option<Arc<Handoff>> {
        self.store.open_handoff(MESSAGE_KIND, lease)
    }

    /// Lets go of the leases of handed messages a stopping sender did not take.
    pub async fn release_handed(&self, ids: &[Uuid]) -> Result<(), StoreError> {
        self.store.release_handed(ids).await
    }

    /// Up to `batch` due messages, in the order they were written: those this process's
    /// commits handed over already leased, then, when none was or the table was last looked
    /// at `every` ago, messages to known people claimed from it, and notices to strangers only
    /// in the room they leave.
    pub async fn claim_due(
        &self,
        batch: i64,
        (lease, every): (Duration, Duration),
        now: OffsetDateTime,
    ) -> Result<Vec<ClaimedMessage>, StoreError> {
        let (mut claimed, looked) = self.store.take_due(MESSAGE_KIND, batch, (lease, every), now).await?;
        let room = batch - i64::try_from(claimed.len()).unwrap_or(batch);
        if looked && room > 0 {
            claimed.extend(self.store.outbox().claim(NOTICE_KIND, room, lease, now).await?);
        }
        Ok(claimed)
    }

    /// `message` rendered for its channel; one that cannot be is given up (the same row renders
    /// the same way next time), and what to record of it comes back instead.
    pub fn render(
        &self,
        templates: &Templates,
        message: &ClaimedMessage,
        capabilities: CapabilitiesOf,
    ) -> Result<Outgoing, Box<Recorded>> {
        render(templates, message, capabilities).map_err(|problem| {
            tracing::error!(id = %message.id, %problem, "a message cannot be rendered; giving it up");
            let errors = Some(json!({"render": problem}));
            Box::new(self.given_up(message, None, &SendOutcome::unrendered(), errors, &problem))
        })
    }

    /// The provider took `outgoing` (`provider_id`: its id for it, when it gave one).
    pub fn sent(
        &self,
        message: &ClaimedMessage,
        outgoing: &Outgoing,
        provider_id: Option<String>,
        outcome: &SendOutcome,
    ) -> Recorded {
        count(outgoing.channel.as_str(), outcome.as_str());
        Recorded::Sent(record(self.pseudonyms, message, Some(outgoing), provider_id, outcome, None))
    }

    /// `message` is given up for good (`error`: why, for the log and the row).
    pub fn given_up(
        &self,
        message: &ClaimedMessage,
        outgoing: Option<&Outgoing>,
        outcome: &SendOutcome,
        errors: Option<Value>,
        error: &str,
    ) -> Recorded {
        let record = record(self.pseudonyms, message, outgoing, None, outcome, errors);
        count(&record.channel, "given_up");
        tracing::warn!(id = %record.outbox_id, %error, "message given up");
        Recorded::GivenUp { record, error: error.to_owned() }
    }

    /// What became of a batch, with its evidence, in one transaction.
    pub async fn record(&self, recorded: &[Recorded], now: OffsetDateTime) -> Result<(), StoreError> {
        self.store.outbox().record_all(recorded, now).await
    }

    /// Message `id` is tried again at `at` (or looked at again then: `None` is at once).
    pub async fn later(
        &self,
        id: Uuid,
        error: &str,
        at: Option<OffsetDateTime>,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        self.store.outbox().fail(id, error, at, now).await
    }

    /// The texts a webhook's own answer carries to `destination` (Twilio's TwiML): the messages
    /// held for it, claimed, rendered and recorded as sent before the answer goes back. A claim
    /// not recorded ends with its lease, and the outbox sends the message the usual way.
    pub async fn answer_inline(
        &self,
        templates: &Templates,
        capabilities: CapabilitiesOf,
        (destination, lease): (&str, Duration),
        now: OffsetDateTime,
    ) -> Vec<String> {
        let held = match self.store.outbox().claim_held(destination, lease, now).await {
            Ok(held) => held,
            Err(error) => {
                // They go out through the API once the hold ends.
                tracing::warn!(%error, "cannot claim the replies held for this answer");
                return vec![];
            }
        };
        let (mut texts, mut recorded) = (Vec::with_capacity(held.len()), Vec::with_capacity(held.len()));
        for message in &held {
            match self.render(templates, message, capabilities) {
                Ok(outgoing) => {
                    recorded.push(self.sent(message, &outgoing, None, &SendOutcome::SentInline));
                    texts.push(outgoing.text);
                }
                Err(given_up) => recorded.push(*given_up),
            }
        }
        match self.record(&recorded, now).await {
            Ok(()) => texts,
            Err(error) => {
                tracing::warn!(%error, "the replies are left to the outbox");
                vec![]
            }
        }
    }

    /// The answer given to the provider's message `id` on `channel`, kept for its retries.
    pub async fn answer_of(&self, channel: &Channel, id: &ExternalId) -> Result<Option<String>, StoreError> {
        self.store.inbound().answer_of(channel, id).await
    }

    /// Keeps `answer` for the provider's retries of message `id`.
    pub async fn keep_answer(&self, channel: &Channel, id: &ExternalId, answer: &str) -> Result<(), StoreError> {
        self.store.inbound().record_answer(channel, id, answer).await
    }
}

/// One outbound message's fate, counted in `chatgate_outbound_messages_total`.
pub fn count(channel: &str, outcome: &str) {
    let labels = [("channel", channel.to_owned()), ("outcome", outcome.to_owned())];
    metrics::counter!("chatgate_outbound_messages_total", &labels).increment(1);
}
