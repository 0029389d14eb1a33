//! The inbox's admission pass, both halves of the inbox behind it: rows claimed from the
//! database in a large batch, oldest first, read back, admitted conversation by conversation
//! (side by side; each conversation's messages in order, up to the first that must wait), and
//! marked admitted once their admissions committed; the process's own half (`inbox::Inbox`)
//! told of each. The worker (`workers::admission`) only decides when a pass runs.

use std::collections::HashMap;

use futures_util::StreamExt;
use time::OffsetDateTime;
use tracing::Instrument;

use crate::domain::message::InboundMessage;
use crate::service::engine::EngineError;
use crate::service::intake::{Handled, Ingress};
use crate::store::{InboxEntry, StoreError};

/// Conversations admitted side by side. More would only queue their reads for the pool's few
/// connections ahead of the group commit's own.
const CONVERSATIONS_AT_ONCE: usize = 64;

/// A row admitted (or kept for good): its id, how it was handled, when it came.
type Done = (i64, Option<Handled>, OffsetDateTime);

impl Ingress {
    /// One batch claimed and admitted: how many rows were claimed.
    pub async fn admission_pass(&self) -> Result<usize, StoreError> {
        let inbox = self.inbox();
        let now = OffsetDateTime::now_utc();
        let rows = self.engine.store().inbox();
        let claimed = rows.claim(inbox.lease(now), now, inbox.config().admission_batch).await?;
        let count = claimed.len();
        // Each message read back once; their writers looked up together.
        let read: Vec<(InboxEntry, Option<InboundMessage>)> = claimed
            .into_iter()
            .map(|entry| {
                let message = self.from_inbox(&entry);
                (entry, message)
            })
            .collect();
        let messages: Vec<&InboundMessage> = read.iter().filter_map(|(_, message)| message.as_ref()).collect();
        self.know_writers(&messages).await;
        self.read_conversations_ahead(&messages).await;
        let mut conversations: HashMap<String, Vec<(InboxEntry, Option<InboundMessage>)>> = HashMap::new();
        for (entry, message) in read {
            conversations.entry(entry.conversation_id.clone()).or_default().push((entry, message));
        }
        // Each conversation a task of its own: admission's work (reading, deciding, hashing
        // evidence) spreads over every core, and the admissions meet in the engine's group commits.
        let tasks = conversations.into_values().map(|entries| tokio::spawn(self.clone().admit_in_order(entries)));
        let mut running = futures_util::stream::iter(tasks).buffer_unordered(CONVERSATIONS_AT_ONCE);
        let mut admitted: Vec<Done> = Vec::with_capacity(count);
        while let Some(task) = running.next().await {
            match task {
                Ok(done) => admitted.extend(done),
                // A panicked admission: its messages stay in the inbox for the next pass.
                Err(error) => tracing::error!(%error, "an admission task failed"),
            }
        }
        self.ahead.clear();
        // A message parked for the identity resolver stays in the inbox, unadmitted, in its place.
        let parked = |handled: &Option<Handled>| matches!(handled, Some(Handled::AwaitingIdentity));
        let ids: Vec<i64> = admitted.iter().filter(|(_, handled, _)| !parked(handled)).map(|(id, ..)| *id).collect();
        rows.admitted(&ids, OffsetDateTime::now_utc()).await?;
        for (id, handled, received_at) in admitted {
            inbox.admitted(id, handled, received_at);
        }
        Ok(count)
    }

    /// One conversation's messages, in order, up to the first that must wait.
    async fn admit_in_order(self, entries: Vec<(InboxEntry, Option<InboundMessage>)>) -> Vec<Done> {
        let mut admitted = Vec::with_capacity(entries.len());
        for (entry, message) in &entries {
            match self.admit(entry, message.as_ref()).await {
                Ok(handled) => admitted.push((entry.id, handled, entry.received_at)),
                Err(error) => {
                    tracing::warn!(%error, id = entry.id, "a message waits in the inbox for the next pass");
                    break;
                }
            }
        }
        admitted
    }

    /// Admits one message (`message`: `entry` as read back); `None` when it could not be, for
    /// good (it is kept, and counted).
    async fn admit(
        &self,
        entry: &InboxEntry,
        message: Option<&InboundMessage>,
    ) -> Result<Option<Handled>, EngineError> {
        let Some(message) = message else {
            tracing::error!(id = entry.id, channel = %entry.channel, "a stored message cannot be read back");
            metrics::counter!("chatgate_inbox_unadmitted_total", "reason" => "unreadable").increment(1);
            return Ok(None);
        };
        use crate::service::telemetry::{Carried, admission_span, carrying};
        let span = admission_span(&entry.channel, entry.trace_parent.as_deref());
        let carried = Carried::from_traceparent(entry.trace_parent.as_deref());
        match carrying(carried, self.handle(message, entry.released, entry.received_at).instrument(span)).await {
            Ok(handled) => Ok(Some(handled)),
            Err(EngineError::Store(error)) if error.is_retryable() => Err(EngineError::Store(error)),
            Err(error) => {
                // Doing it again would fail the same way: kept in the inbox and the logs, not retried.
                tracing::error!(%error, id = entry.id, "a stored message cannot be admitted");
                metrics::counter!("chatgate_inbox_unadmitted_total", "reason" => "refused").increment(1);
                Ok(None)
            }
        }
    }

    /// The heartbeat of this instance's rows, and the backlog as the database counts it.
    pub async fn refresh_backlog(&self) {
        let rows = self.engine.store().inbox();
        let lease = self.inbox().lease(OffsetDateTime::now_utc());
        match rows.renew(lease).await {
            Ok(()) => self.inbox().renewed(lease.until),
            Err(error) => tracing::warn!(%error, "cannot renew the hold on this instance's inbox rows"),
        }
        match rows.backlog().await {
            Ok((pending, oldest)) => {
                self.inbox().set_backlog(pending);
                let age = oldest.map_or(0.0, |at| (OffsetDateTime::now_utc() - at).as_seconds_f64().max(0.0));
                metrics::gauge!("chatgate_inbox_oldest_pending_seconds").set(age);
            }
            Err(error) => tracing::debug!(%error, "cannot count the inbox's backlog"),
        }
        if let Ok(parked) = rows.parked().await {
            metrics::gauge!("chatgate_inbox_parked").set(parked as f64);
        }
    }
}
