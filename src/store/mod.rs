//! Storage: one `Store` over sqlx, with SQLite (the embedded default) and PostgreSQL behind it,
//! read and written through a repository per aggregate (`store.commands()`, `.outbox()`,
//! `.evidence()`, `.deliveries()`, ...; `repos.rs`). Imports `domain` and `config` only.
//!
//! Both backends run the same SQL through sqlx's `Any` driver: the schemas are kept identical
//! (`migrations/sqlite`, `migrations/postgres`), times are epoch milliseconds and JSON is text, so
//! that every query is written once and the conformance suite proves it on both. What truly differs
//! (opening a database, transaction start, row claiming) lives in `sqlite.rs` and `postgres.rs`
//! behind [`Dialect`]. The store persists what the engine decided and states facts (a duplicate,
//! a command in progress); it never decides a transition.

mod admission;
mod agents;
mod api_keys;
mod approvals;
mod backup;
mod batch;
mod breaker;
mod command_reads;
mod commands;
mod commits;
mod confirmations;
mod console;
mod conversations;
mod decoded;
mod dedupe;
mod deliveries;
mod directory;
mod error;
mod evidence;
mod evidence_export;
mod feed;
mod figures;
mod health;
mod held;
mod inbound;
mod inbox;
mod inbox_db;
mod link_codes;
mod locks;
mod named;
mod open;
mod outbound;
mod outbox;
mod pool;
mod postgres;
mod previews;
mod rate_limits;
pub use rate_limits::{Chain, Take};
mod keyed;
mod registry_versions;
mod repos;
mod retention;
mod retention_chain;
mod retention_pace;
mod retention_records;
mod rows;
mod signals;
mod snapshot;
mod sqlite;
mod step;
mod step_batch;
mod texts;
mod tidy;
mod tokens;
mod trace;
mod tx;
mod writer;

use std::sync::Arc;

use sqlx::AnyPool;

pub use crate::config::BackendKind;
pub use admission::{AdmissionWrite, Admitted, DuplicateOf, DuplicateReply};
pub use api_keys::KeyClaim;
pub use approvals::{
    ApprovalDecision, ApprovalStatus, ApprovalWrite, AskedBy, DecisionRecorded, NewApproval, Recording, StoredApproval,
};
pub use backup::{BackupFile, backup_sqlite};
pub use batch::GroupCommitStats;
pub use command_reads::StoredMove;
pub use commands::{CommandFilter, CommittedTransition, StoredCommand, TransitionRecord, TransitionWrite};
pub use confirmations::{Confirmation, ConfirmationStatus, NewConfirmation, SettleConfirmation};
pub use console::{ConsoleSession, Finished, MinuteCount};
pub use conversations::{Conversation, ConversationKey, ConversationMove, TurnWrite};
pub use deliveries::{Delivery, DeliveryChange, DeliveryLogEntry, NewDelivery};
pub use directory::{
    BatchRow, ClaimedLookup, ERASED_PAYLOAD, Erased, Erasure, NewLookup, PersonWrite, Search, Source, StoredAnswer,
    StoredPerson, StoredRole, Written,
};
pub use error::StoreError;
pub use evidence::{AuditReport, ChainReport, StoredArtifact};
pub use inbound::{InboundOutcome, NewInbound};
pub use inbox::{Adopted, Entered, InboxEntry, Lease, NewInboxEntry, ParkedSender, Released};
pub use inbox_db::inbox_url;
pub use link_codes::{NewLinkCode, Redeemed, Redemption, UndoableLink};
pub use locks::{HeldLock, LOCK_WAIT_KIND};
pub use outbound::{OutboundRecord, Recorded};
pub use outbox::{
    ClaimedMessage, DISPATCH_KIND, Handoff, MESSAGE_KIND, NOTICE_KIND, NewOutboxMessage, OutboxSettle, ReplyTo,
};
pub use previews::PromptWrite;
pub use repos::{
    Agents, ApiKeys, Approvals, Commands, Confirmations, Console, Dedupe, Deliveries, Directory, Evidence, Identities,
    Inbound, Inbox, LinkCodes, Locks, Outbox, RateLimits, RegistryVersions, Tokens,
};
pub use retention::{EXPIRED_PAYLOAD, PurgedTexts, Scope as RetentionScope};
pub use retention_pace::Pace as RetentionPace;
pub use retention_records::PurgedRecords;
pub use signals::{CommittedMove, MoveObserver};
pub use snapshot::{KEY_LOOKUPS, SNAPSHOT_QUERIES, SWEEP_QUERIES, Snapshot};
pub use step::{StepOutcome, StepWrite};
pub use tokens::ConsumedToken;
pub use trace::TraceNode;
pub(crate) use tx::Tx;

/// What the two SQL dialects do differently.
pub(crate) trait Dialect: Send + Sync {
    /// Claims due outbox rows without two workers taking the same one.
    fn claim_outbox_sql(&self) -> &'static str;
    /// The texts of the JSON array bound as `$1`, one row each: a statement that takes a list of
    /// any length is then one statement, prepared once (sqlx's `Any` binds no arrays).
    fn texts_of_list(&self) -> &'static str;
}

/// The store: a handle, cheap to clone (every request and every worker holds one).
#[derive(Clone)]
pub struct Store {
    parts: Arc<Parts>,
}

/// What every clone of a [`Store`] shares.
#[derive(Clone)]
pub struct Parts {
    pool: AnyPool,
    /// SQLite only: the main file's connection for work that can wait (a purge's, the
    /// checkpoints), apart from the pipeline's (`sqlite::UNHURRIED`).
    unhurried: Option<AnyPool>,
    backend: BackendKind,
    /// SQLite only: see [`Tx`].
    write_gate: Option<tx::WriteGate>,
    /// SQLite only: the main file's writer (`held::Held`; `pool` holds its readers).
    writer: Option<held::Held>,
    /// The admission writer's queue (group commit); the writer's own handle has none.
    admissions: Option<tokio::sync::mpsc::Sender<writer::Job>>,
    stats: Arc<GroupCommitStats>,
    /// Wakes the outbox workers when a commit writes their rows.
    signals: Arc<signals::OutboxSignals>,
    /// Fails fast while the database is down.
    breaker: Arc<breaker::Breaker>,
    /// Wakes the readers of moves.
    feed: Arc<feed::MoveFeed>,
    /// Whether the gateway's own writes fail for want of space (readiness).
    health: Arc<health::WriteHealth>,
    /// Where the inbox lives (SQLite: a file of its own).
    inbox_db: inbox_db::InboxDb,
    /// The dispatch rows this process's commits hand its dispatcher (`outbox::Handoff`).
    handoffs: Arc<outbox::Handoffs>,
}

impl std::ops::Deref for Store {
    type Target = Parts;

    fn deref(&self) -> &Parts {
        &self.parts
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("backend", &self.backend).finish_non_exhaustive()
    }
}

impl Store {
    /// SQLite: the WAL of each file copied into it, beside the writers (see `sqlite::open`);
    /// nothing on PostgreSQL, which checkpoints by itself.
    /// A checkpoint that cannot grow a file fails the store's writes (see `health`): the WAL,
    /// written from its start again after each checkpoint, goes on taking writes over space it
    /// already holds until then. True when every file has all of its WAL.
    pub async fn checkpoint(&self) -> Result<bool, StoreError> {
        let main = match &self.write_gate {
            // On the connection of work that can wait: a copy of a purge's pages takes a while,
            // and the pipeline keeps its connections meanwhile.
            Some(gate) => sqlite::checkpoint(self.unhurried_pool(), gate.lock()).await,
            None => Ok(true),
        };
        let copied = match main {
            Ok(main) => self.inbox_db.checkpoint().await.map(|inbox| main && inbox),
            failed => failed,
        };
        if let Err(error) = &copied {
            self.health.observe_failure(error);
        }
        copied
    }

    /// Answers when the database does (`/readyz`).
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        sqlx::query("SELECT 1").execute(self.inbox_db.pool()).await?;
        Ok(())
    }

    /// Whether the database can write what the gateway acknowledges (readiness): one row updated
    /// and committed; and, while the gateway's own writes fail for want of space or I/O, a write
    /// the size of an admission batch (`health::PROBE_BYTES`), whose success ends the failure. A
    /// database that answers but cannot write (a full disk, read-only) is not ready.
    pub async fn can_write(&self) -> Result<(), StoreError> {
        let began = std::time::Instant::now();
        let sized = self.health.failing_since().is_some();
        let filler = if sized { health::probe_filler() } else { String::new() };
        let mut tx = self.begin().await?;
        sqlx::query("UPDATE readiness SET checked_at = $1, filler = $2 WHERE id = 1")
            .bind(rows::to_ms(time::OffsetDateTime::now_utc()))
            .bind(filler)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        if sized {
            // The space the probe took is given back (the next probe finds it free again).
            let mut tx = self.begin().await?;
            sqlx::query("UPDATE readiness SET filler = '' WHERE id = 1").execute(&mut *tx).await?;
            tx.commit().await?;
            // SQLite: the probe's pages are in the WAL, over space it held already; they count
            // once they are in the database file (a reader may hold some back: not yet, then).
            if !self.checkpoint().await? {
                return Err(StoreError::CannotWrite("the probe is not in the database file yet".into()));
            }
            self.health.recovered(began);
        }
        Ok(())
    }

    /// An admission batch that failed for want of space starts a write failure. One that committed
    /// does not end it: it proves room in the commands' database, not in the inbox's (a file of
    /// its own on SQLite), and made readiness flap while webhooks were refused; the sized probe
    /// of [`Self::can_write`] ends it.
    pub(crate) fn observe_admissions<T>(&self, results: &[Result<T, StoreError>]) {
        if results.iter().all(Result::is_err)
            && let Some(Err(error)) = results.first()
        {
            self.health.observe_failure(error);
        }
    }

    pub fn backend(&self) -> BackendKind {
        self.backend
    }

    pub fn backend_name(&self) -> &'static str {
        match self.backend {
            BackendKind::Sqlite => "sqlite",
            BackendKind::Postgres => "postgres",
        }
    }

    fn dialect(&self) -> &'static dyn Dialect {
        match self.backend {
            BackendKind::Sqlite => &sqlite::SqliteDialect,
            BackendKind::Postgres => &postgres::PostgresDialect,
        }
    }

    /// A connection to read with. Like `begin`, whatever keeps a connection from being had means
    /// the database is unavailable: the caller should retry, never get a 500.
    pub(crate) async fn reader(&self) -> Result<sqlx::pool::PoolConnection<sqlx::Any>, StoreError> {
        if self.breaker.is_open() {
            return Err(StoreError::Unavailable("the database was unreachable a moment ago".into()));
        }
        self.pool.acquire().await.map_err(|e| StoreError::Unavailable(format!("cannot get a connection: {e}")))
    }

    /// Group commit so far: (transactions that carried a batch, admissions in them).
    pub fn admission_stats(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.stats.batches.load(Relaxed), self.stats.batched.load(Relaxed))
    }

    /// Group commit of the workers' steps so far: (transactions that carried a batch, steps in them).
    pub fn step_batch_stats(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.stats.step_batches.load(Relaxed), self.stats.steps_batched.load(Relaxed))
    }

    /// How many times the moves were read for the event streams so far.
    pub fn move_reads(&self) -> u64 {
        self.stats.move_reads.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn admission_writer(&self) -> Option<&tokio::sync::mpsc::Sender<writer::Job>> {
        self.admissions.as_ref()
    }

    /// What wakes the worker that claims outbox rows of `kind` when this process writes some.
    pub fn outbox_signal(&self, kind: &str) -> Arc<tokio::sync::Notify> {
        self.signals.of(kind)
    }

    pub(crate) fn signals(&self) -> &signals::OutboxSignals {
        &self.signals
    }

    /// Called after a commit with the moves it made: counted, observed, and the readers woken.
    pub(crate) fn moved<'a>(&self, moves: impl IntoIterator<Item = signals::CommittedMove<'a>>) {
        if self.signals.moved(moves) {
            self.feed.bump();
        }
    }

    /// Changes whenever moves are committed, by this process or (on PostgreSQL) by any instance.
    pub fn moves_feed(&self) -> tokio::sync::watch::Receiver<u64> {
        self.feed.subscribe()
    }

    /// Tells `observer` of every move this process commits from now on (all clones of this
    /// store share it); the first observer set stays. Returns whether this one was set.
    pub fn observe_moves(&self, observer: Arc<dyn signals::MoveObserver>) -> bool {
        self.signals.observe(observer)
    }

    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// The pool work that can wait reads and writes with (`Store::begin_when_idle`).
    pub(crate) fn unhurried_pool(&self) -> &AnyPool {
        self.unhurried.as_ref().unwrap_or(&self.pool)
    }

    /// A write transaction on the inbox's database (`inbox_db`: on SQLite, a file of its own).
    pub(crate) async fn begin_inbox(&self) -> Result<Tx, StoreError> {
        self.inbox_db.begin(self.health.clone()).await
    }

    /// A write transaction on the inbox for work that can wait (see `tx::idle_gate`).
    pub(crate) async fn begin_inbox_when_idle(&self, patience: std::time::Duration) -> Result<Tx, StoreError> {
        self.inbox_db.begin_when_idle(self.health.clone(), patience).await
    }

    /// One statement's connection to the inbox's database (see `inbox_db::InboxDb::writer`).
    pub(crate) async fn inbox_writer(&self) -> Result<inbox_db::Writer, StoreError> {
        self.inbox_db.writer().await
    }

    /// A write of ours failed: a full disk makes readiness fail.
    pub(crate) fn observe_write_failure(&self, error: &StoreError) {
        self.health.observe_failure(error);
    }

    pub(crate) fn inbox_pool(&self) -> &AnyPool {
        self.inbox_db.pool()
    }
}
