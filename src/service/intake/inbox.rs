//! The inbox's front: a webhook's messages are handed to one writer task that stores whatever
//! deliveries wait together in one transaction (group commit) and answers each once its rows are
//! durable. Admission runs behind it (`workers::admission`), woken by each commit. Past the
//! configured backlog nothing is stored and the webhook is told to come back later.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::{Notify, mpsc, oneshot};

use super::Handled;
use crate::config::IngestConfig;
use crate::domain::command::ExternalId;
use crate::domain::message::InboundMessage;
use crate::store::{Entered, InboxEntry, Lease, NewInboxEntry, Store, StoreError};

mod burst;
use burst::Burst;

/// The most deliveries one transaction carries.
const MAX_DELIVERIES: usize = 256;

/// Why a delivery was not stored.
#[derive(Debug, thiserror::Error)]
pub enum InboxError {
    /// The backlog is at its limit: nothing was stored; the provider should retry after this.
    #[error("the inbox holds {backlog} messages not yet admitted; retry in {retry_after_secs} s")]
    Full { backlog: i64, retry_after_secs: u64 },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What storing one message came to; `outcome` answers once it is admitted, when asked for.
#[derive(Debug)]
pub struct Received {
    pub entered: Entered,
    pub outcome: Option<oneshot::Receiver<Handled>>,
}

struct Entering {
    entries: Vec<NewInboxEntry>,
    wants_outcome: bool,
    reply: oneshot::Sender<Result<Vec<Received>, StoreError>>,
}

/// What the front shares with the admission worker.
struct Shared {
    store: Store,
    /// This instance, as the inbox's rows name their owner.
    owner: String,
    config: IngestConfig,
    /// Stored and not yet admitted, as this instance counts it (the database's count replaces
    /// it at every idle pass of the worker).
    backlog: AtomicI64,
    /// Until when the database holds this instance alive (Unix seconds), as it last said so.
    alive_until: AtomicI64,
    /// Set once the backlog was first read from the database (before the first delivery).
    counted: tokio::sync::OnceCell<()>,
    wake: Notify,
    /// What admission reads to give way to a burst.
    burst: Burst,
    outcomes: std::sync::Mutex<HashMap<i64, oneshot::Sender<Handled>>>,
}

#[derive(Clone)]
pub struct Inbox {
    queue: mpsc::Sender<Entering>,
    shared: Arc<Shared>,
}

impl Inbox {
    /// The inbox of `store`, with its writer task running.
    pub fn new(store: Store, config: &IngestConfig) -> Self {
        let owner = uuid::Uuid::now_v7().to_string();
        let backlog = AtomicI64::new(0);
        let outcomes = std::sync::Mutex::default();
        let (counted, wake) = (tokio::sync::OnceCell::new(), Notify::new());
        let alive_until = AtomicI64::new(0);
        let (config, burst) = (config.clone(), Burst::new());
        let shared = Arc::new(Shared { store, owner, config, backlog, alive_until, counted, wake, burst, outcomes });
        let (queue, jobs) = mpsc::channel(1_024);
        tokio::spawn(write(shared.clone(), jobs));
        Self { queue, shared }
    }

    /// Stores `entries` (one delivery's messages) and answers once they are durable; with
    /// `wants_outcome`, each new one's [`Received::outcome`] answers once it is admitted.
    /// Never longer than `ingest.store_timeout_ms`, whatever the database does: past it, the
    /// store is `Unavailable` (503 with `Retry-After`), and a delivery that waits in the writer's
    /// queue still is dropped, not stored, once its webhook has been answered.
    pub async fn enter(&self, entries: Vec<NewInboxEntry>, wants_outcome: bool) -> Result<Vec<Received>, InboxError> {
        if entries.is_empty() {
            return Ok(vec![]);
        }
        let bound = Duration::from_millis(self.shared.config.store_timeout_ms);
        match tokio::time::timeout(bound, self.store(entries, wants_outcome)).await {
            Ok(stored) => stored,
            Err(_) => {
                let late = format!("the inbox was not written within {} ms", self.shared.config.store_timeout_ms);
                Err(InboxError::Store(StoreError::Unavailable(late)))
            }
        }
    }

    async fn store(&self, entries: Vec<NewInboxEntry>, wants_outcome: bool) -> Result<Vec<Received>, InboxError> {
        // What other instances, or this one before a restart, left counts from the first delivery.
        let store = &self.shared.store;
        let count = || async { store.inbox().backlog().await.map(|(pending, _)| self.set_backlog(pending)) };
        if let Err(error) = self.shared.counted.get_or_try_init(count).await {
            // Counted at the next delivery; storing this one says whether the database is there.
            tracing::debug!(%error, "cannot count the inbox's backlog yet");
        }
        let backlog = self.backlog();
        let room = i64::try_from(self.shared.config.max_backlog).unwrap_or(i64::MAX);
        if backlog.saturating_add(entries.len() as i64) > room {
            metrics::counter!("chatgate_inbox_refused_total").increment(1);
            return Err(InboxError::Full { backlog, retry_after_secs: self.shared.config.retry_after_secs.max(1) });
        }
        let (reply, answer) = oneshot::channel();
        let gone = || StoreError::Unavailable("the inbox writer stopped".into());
        self.queue.send(Entering { entries, wants_outcome, reply }).await.map_err(|_| gone())?;
        Ok(answer.await.map_err(|_| gone())??)
    }

    pub fn config(&self) -> &IngestConfig {
        &self.shared.config
    }

    /// The lease this instance's admission holds its rows under, from `now`.
    pub fn lease(&self, now: OffsetDateTime) -> Lease<'_> {
        Lease { owner: &self.shared.owner, until: now + Duration::from_secs(self.shared.config.lease_secs) }
    }

    /// The database now holds this instance alive until `until` (the worker's heartbeat).
    pub fn renewed(&self, until: OffsetDateTime) {
        self.shared.alive_until.fetch_max(until.unix_timestamp(), Ordering::Relaxed);
    }

    /// Messages stored and not yet admitted.
    pub fn backlog(&self) -> i64 {
        self.shared.backlog.load(Ordering::Relaxed)
    }

    /// The backlog as the database counts it (every instance's).
    pub fn set_backlog(&self, pending: i64) {
        self.shared.backlog.store(pending, Ordering::Relaxed);
        metrics::gauge!("chatgate_inbox_backlog").set(pending as f64);
    }

    /// Resolves when a commit stored new messages (or at once if one did since the last call).
    pub async fn stored(&self) {
        self.shared.wake.notified().await;
    }

    /// How long admission should still wait before its next pass, if at all: a burst of webhooks
    /// still coming is answered first (`burst`), unless an answer waits for an admission or the
    /// backlog is past half its limit.
    pub fn give_way(&self) -> Option<Duration> {
        let defer = Duration::from_millis(self.shared.config.admission_defer_ms);
        let room = i64::try_from(self.shared.config.max_backlog / 2).unwrap_or(i64::MAX);
        let awaited = self.shared.outcomes.lock().map_or(true, |waiting| !waiting.is_empty());
        if defer.is_zero() || awaited || self.backlog() >= room {
            return None;
        }
        self.shared.burst.give_way(defer)
    }

    /// Admission found nothing left to admit: the next commit starts a new burst.
    pub fn drained(&self) {
        self.shared.burst.drained();
    }

    /// Wakes admission: rows it may take now (parked messages let go).
    pub fn wake(&self) {
        self.shared.wake.notify_one();
    }

    /// Row `id` is admitted as `handled`: counted off the backlog, and its waiter told.
    pub fn admitted(&self, id: i64, handled: Option<Handled>, received_at: OffsetDateTime) {
        let backlog = self.shared.backlog.fetch_sub(1, Ordering::Relaxed) - 1;
        metrics::gauge!("chatgate_inbox_backlog").set(backlog.max(0) as f64);
        let lag = (OffsetDateTime::now_utc() - received_at).as_seconds_f64().max(0.0);
        metrics::histogram!("chatgate_inbox_admission_lag_seconds").record(lag);
        let waiter = self.shared.outcomes.lock().ok().and_then(|mut waiting| waiting.remove(&id));
        if let (Some(waiter), Some(handled)) = (waiter, handled) {
            // The webhook may have stopped waiting; the admission stands either way.
            let _ = waiter.send(handled);
        }
    }
}

/// The writer: every delivery waiting goes into one transaction. (Several in flight on
/// PostgreSQL made smaller ones that took longer: docs/BENCHMARKS.md.)
async fn write(shared: Arc<Shared>, mut jobs: mpsc::Receiver<Entering>) {
    let mut batch = Vec::with_capacity(MAX_DELIVERIES);
    while jobs.recv_many(&mut batch, MAX_DELIVERIES).await > 0 {
        // A delivery whose webhook was answered already (503: the store took too long) is not
        // stored: the provider sends it again.
        let jobs: Vec<Entering> = std::mem::take(&mut batch).into_iter().filter(|job| !job.reply.is_closed()).collect();
        if jobs.is_empty() {
            continue;
        }
        match commit(&shared, &jobs).await {
            Ok(entered) => answer(&shared, jobs, entered),
            // One delivery the database refuses (a value it cannot hold) must not cost the
            // others of its batch: each is stored on its own, and only it is refused.
            Err(error) if !error.is_retryable() && jobs.len() > 1 => {
                for job in jobs {
                    match commit(&shared, std::slice::from_ref(&job)).await {
                        Ok(entered) => answer(&shared, vec![job], entered),
                        Err(error) => drop(job.reply.send(Err(error))),
                    }
                }
            }
            Err(error) => {
                for job in jobs {
                    let _ = job.reply.send(Err(StoreError::Unavailable(error.to_string())));
                }
            }
        }
    }
}

async fn commit(shared: &Shared, jobs: &[Entering]) -> Result<Vec<Vec<Entered>>, StoreError> {
    let now = OffsetDateTime::now_utc();
    let deliveries: Vec<&[NewInboxEntry]> = jobs.iter().map(|job| job.entries.as_slice()).collect();
    let lease = Lease { owner: &shared.owner, until: now + Duration::from_secs(shared.config.lease_secs) };
    // Said with the rows when half the last hold has gone by (the worker says it every second).
    let half = i64::try_from(shared.config.lease_secs / 2).unwrap_or(i64::MAX);
    let heartbeat = shared.alive_until.load(Ordering::Relaxed) - now.unix_timestamp() < half.max(1);
    let started = std::time::Instant::now();
    let entered = shared.store.inbox().enter(&deliveries, lease, heartbeat, now).await;
    if heartbeat && entered.is_ok() {
        shared.alive_until.fetch_max(lease.until.unix_timestamp(), Ordering::Relaxed);
    }
    metrics::histogram!("chatgate_inbox_commit_seconds").record(started.elapsed().as_secs_f64());
    metrics::histogram!("chatgate_inbox_commit_deliveries").record(jobs.len() as f64);
    entered
}

/// Registers the waiters before the worker is woken (it cannot admit a row nobody waits for
/// yet), counts the new rows, wakes the worker and answers each delivery.
fn answer(shared: &Shared, jobs: Vec<Entering>, entered: Vec<Vec<Entered>>) {
    let (mut new, mut with_new) = (0, 0);
    let mut answers = Vec::with_capacity(jobs.len());
    for (job, entered) in jobs.into_iter().zip(entered) {
        let mut received = Vec::with_capacity(entered.len());
        for entered in entered {
            let outcome = match entered {
                Entered::New(id) => {
                    new += 1;
                    job.wants_outcome.then(|| waiter(shared, id))
                }
                Entered::Seen => None,
            };
            received.push(Received { entered, outcome });
        }
        with_new += usize::from(received.iter().any(|r| matches!(r.entered, Entered::New(_))));
        answers.push((job.reply, received));
    }
    let backlog = shared.backlog.fetch_add(new, Ordering::Relaxed) + new;
    metrics::gauge!("chatgate_inbox_backlog").set(backlog as f64);
    if new > 0 {
        shared.burst.committed(with_new);
        shared.wake.notify_one();
    }
    for (reply, received) in answers {
        let _ = reply.send(Ok(received));
    }
}

fn waiter(shared: &Shared, id: i64) -> oneshot::Receiver<Handled> {
    let (tell, told) = oneshot::channel();
    if let Ok(mut waiting) = shared.outcomes.lock() {
        waiting.insert(id, tell);
    }
    told
}

impl super::Ingress {
    /// Stores one delivery's `messages` in the inbox (see [`Inbox::enter`]), each as it was read.
    pub(super) async fn receive(
        &self,
        messages: &[InboundMessage],
        wants_outcome: bool,
    ) -> Result<Vec<Received>, InboxError> {
        let mut entries = Vec::with_capacity(messages.len());
        let trace_parent = crate::service::telemetry::current_traceparent();
        for message in messages {
            let payload = serde_json::to_string(message).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            entries.push(NewInboxEntry {
                channel: message.channel.clone(),
                provider_message_id: message.provider_message_id.clone(),
                conversation_id: super::reply_destination(message),
                payload,
                hold: message.answered_inline,
                trace_parent: trace_parent.clone(),
                answer_waits: wants_outcome,
            });
        }
        self.inbox.enter(entries, wants_outcome).await
    }

    /// A stored message as it was read at receipt; one an older version stored in another shape
    /// is read again from what the provider sent, by its channel.
    pub fn from_inbox(&self, entry: &InboxEntry) -> Option<InboundMessage> {
        if let Ok(message) = serde_json::from_str::<InboundMessage>(&entry.payload) {
            return Some(message);
        }
        let conversation = ExternalId::parse(&entry.conversation_id).ok()?;
        let stored: serde_json::Value = serde_json::from_str(&entry.payload).ok()?;
        let raw = stored.get("raw").unwrap_or(&stored);
        let mut message = self.reread(&entry.channel, raw, &conversation)?;
        message.answered_inline = entry.hold;
        Some(message)
    }
}
