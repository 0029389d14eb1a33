//! A write transaction, and what it writes last.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sqlx::{Any, AnyConnection, Transaction};
use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::config::BackendKind;
use crate::store::commits::{Commits, begin_statement};
use crate::store::held::{Held, HeldTx};
use crate::store::outbox::Handoffs;
use crate::store::{ClaimedMessage, Store, StoreError, breaker, figures, health};

/// A write transaction. On SQLite it also holds the process's write gate: SQLite has one writer at
/// a time, and queueing writers here (first come, first served) is far steadier than letting them
/// poll the database lock through the busy timeout, which still covers other processes.
pub(crate) struct Tx {
    open: Open,
    health: Arc<health::WriteHealth>,
    /// The figures this transaction moves, written as its last statement (`figures::Moves`).
    pub(crate) figures: figures::Moves,
    /// Where the rows it writes leased go once it commits, while a worker takes them in memory.
    pub(crate) handoffs: Option<Arc<Handoffs>>,
    /// The rows it wrote leased for a handoff, with when.
    pub(crate) handed: Vec<(ClaimedMessage, Instant)>,
}

/// Where a transaction runs.
pub(crate) enum Open {
    /// On a connection of a pool (PostgreSQL's; on SQLite the connection of work that can wait),
    /// holding SQLite's write `gate` (`None` on PostgreSQL) until it ends.
    Pooled { tx: Transaction<'static, Any>, gate: Option<OwnedMutexGuard<()>> },
    /// On a SQLite file's writer, which holds its gate (`held::HeldTx`).
    Held(HeldTx),
}

impl Tx {
    /// A transaction `open`.
    pub(crate) fn new(open: Open, health: Arc<health::WriteHealth>, handoffs: Option<Arc<Handoffs>>) -> Self {
        Self { open, health, figures: figures::Moves::default(), handoffs, handed: vec![] }
    }

    /// Commits; a commit the database cannot write (a full disk) makes readiness fail.
    pub(crate) async fn commit(mut self) -> Result<(), StoreError> {
        std::mem::take(&mut self.figures).record(&mut self).await?;
        let committed = match self.open {
            Open::Pooled { tx, gate: _gate } => tx.commit().await.map_err(StoreError::from),
            Open::Held(tx) => tx.commit().await,
        };
        match (&committed, &self.handoffs) {
            (Err(error), _) => self.health.observe_failure(error),
            (Ok(()), Some(handoffs)) if !self.handed.is_empty() => handoffs.hand(std::mem::take(&mut self.handed)),
            (Ok(()), _) => {}
        }
        committed
    }

    pub(crate) async fn rollback(self) -> Result<(), StoreError> {
        match self.open {
            Open::Pooled { tx, gate: _gate } => Ok(tx.rollback().await?),
            Open::Held(tx) => tx.rollback().await,
        }
    }
}

impl std::ops::Deref for Tx {
    type Target = AnyConnection;
    fn deref(&self) -> &AnyConnection {
        match &self.open {
            Open::Pooled { tx, .. } => tx,
            Open::Held(tx) => tx,
        }
    }
}

impl std::ops::DerefMut for Tx {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        match &mut self.open {
            Open::Pooled { tx, .. } => tx,
            Open::Held(tx) => tx,
        }
    }
}

/// SQLite's write gate of one file: its writers queue here, first come, first served, and work
/// that can wait sees whether any does ([`WriteGate::waited_for`]).
#[derive(Clone, Default)]
pub(crate) struct WriteGate {
    lock: Arc<Mutex<()>>,
    waiting: Arc<AtomicUsize>,
}

impl WriteGate {
    /// The gate, once the writers before this one let it go.
    pub(crate) async fn wait(&self) -> OwnedMutexGuard<()> {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        // Counted down however the wait ends (a caller that gives up drops it half way).
        let _counted = Counted(&self.waiting);
        self.lock.clone().lock_owned().await
    }

    /// Whether a writer waits for the gate now: the one holding it for work that can wait then
    /// commits what it did and lets it through.
    pub(crate) fn waited_for(&self) -> bool {
        self.waiting.load(Ordering::SeqCst) > 0
    }

    /// The lock itself, for a checkpoint that holds the writers back.
    pub(crate) fn lock(&self) -> &Mutex<()> {
        &self.lock
    }
}

/// One writer counted as waiting while it lives.
struct Counted<'a>(&'a AtomicUsize);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How often [`Store::begin_when_idle`] looks for the write gate free.
const IDLE_LOOK: Duration = Duration::from_millis(1);

impl Store {
    /// A write transaction: on SQLite it takes the write lock at once (`BEGIN IMMEDIATE`), so
    /// concurrent writers queue on the busy timeout instead of failing on lock upgrade.
    pub(crate) async fn begin(&self) -> Result<Tx, StoreError> {
        self.begin_committing(Commits::Durable).await
    }

    /// A write transaction whose loss in a crash of the database is harmless (a lease, a rate
    /// limit's arrival times: [`Commits::Unhurried`]). On PostgreSQL its commit waits for no
    /// flush; on SQLite it is the pipeline's writer like any (which flushes each commit).
    pub(crate) async fn begin_losable(&self) -> Result<Tx, StoreError> {
        self.begin_committing(Commits::Unhurried).await
    }

    /// A write transaction of the pipeline's once the write gate is had (on SQLite on the file's
    /// writer), its commit as `commits` says.
    async fn begin_committing(&self, commits: Commits) -> Result<Tx, StoreError> {
        let gate = gate_turn(self.write_gate.as_ref()).await;
        self.begin_on(Beginning::new(self.pool(), self.writer.as_ref(), gate), commits).await
    }

    /// Whether a writer waits for SQLite's write gate now (never on PostgreSQL, whose writers
    /// do not wait for one another's transactions, only for the rows they both write).
    pub(crate) fn writers_wait(&self) -> bool {
        self.write_gate.as_ref().is_some_and(WriteGate::waited_for)
    }

    /// A write transaction `on` where it says, its commit as `commits` says.
    async fn begin_on(&self, on: Beginning<'_>, commits: Commits) -> Result<Tx, StoreError> {
        let pass = self.breaker.pass();
        if pass == breaker::Pass::Refused {
            return Err(StoreError::Unavailable("the database was unreachable a moment ago".into()));
        }
        let _probing = self.breaker.probe_guard(&pass);
        // Whatever stops a transaction from even starting (refused, down, shutting down) means
        // the database is unavailable to us: the caller should retry, never get a 500.
        match on.open(self.backend, commits).await {
            Ok(open) => {
                self.breaker.succeeded();
                Ok(Tx::new(open, self.health.clone(), self.handoffs.any_open().then(|| self.handoffs.clone())))
            }
            Err(e) => {
                self.breaker.failed();
                Err(StoreError::Unavailable(format!("cannot start a transaction: {e}")))
            }
        }
    }

    /// A write transaction for work that can wait (a purge's), begun as [`idle_gate`] says, whose
    /// commit does not wait for the disk: what it did is done again if a power loss takes it back
    /// (on SQLite its own connection, `sqlite::UNHURRIED`, which also keeps the old rows it reads
    /// out of the pipeline's caches; on PostgreSQL `synchronous_commit` off for it alone).
    pub(crate) async fn begin_when_idle(&self, patience: Duration) -> Result<Tx, StoreError> {
        let gate = idle_gate(self.write_gate.as_ref(), patience).await;
        self.begin_on(Beginning::Pool(self.unhurried_pool(), gate), Commits::Unhurried).await
    }
}

/// Where a write transaction begins, its caller holding SQLite's write gate (`None` on
/// PostgreSQL).
pub(crate) enum Beginning<'a> {
    /// On a connection of the pool.
    Pool(&'a sqlx::AnyPool, Option<OwnedMutexGuard<()>>),
    /// On SQLite's writer of the file.
    Held(&'a Held, OwnedMutexGuard<()>),
}

impl<'a> Beginning<'a> {
    /// On the file's `writer` where there is one (SQLite, whose writers hold the `gate`), else on
    /// a connection of `pool`.
    pub(crate) fn new(pool: &'a sqlx::AnyPool, writer: Option<&'a Held>, gate: Option<OwnedMutexGuard<()>>) -> Self {
        match (writer, gate) {
            (Some(writer), Some(gate)) => Self::Held(writer, gate),
            (_, gate) => Self::Pool(pool, gate),
        }
    }

    /// The transaction begun, its commit as `commits` says.
    pub(crate) async fn open(self, backend: BackendKind, commits: Commits) -> Result<Open, StoreError> {
        let statement = begin_statement(backend, commits);
        match self {
            Self::Pool(pool, gate) => Ok(Open::Pooled { tx: pool.begin_with(statement).await?, gate }),
            Self::Held(writer, gate) => Ok(Open::Held(writer.begin(statement, gate).await?)),
        }
    }
}

/// The gate, once it is this writer's turn (first come, first served); `None` where there is no
/// gate (PostgreSQL).
pub(crate) async fn gate_turn(gate: Option<&WriteGate>) -> Option<OwnedMutexGuard<()>> {
    Some(gate?.wait().await)
}

/// SQLite's write `gate` (`None` on PostgreSQL) for work that can wait. Where a writer waits for
/// the one before it, such work takes the gate only at a moment no other writer holds it or waits
/// for it (a waiter is handed the gate as it is let go), so that it never queues ahead of the
/// pipeline's commits; after `patience` without one it waits its turn like any.
pub(crate) async fn idle_gate(gate: Option<&WriteGate>, patience: Duration) -> Option<OwnedMutexGuard<()>> {
    let gate = gate?;
    let looking = Instant::now();
    loop {
        if let Ok(held) = gate.lock.clone().try_lock_owned() {
            return Some(held);
        }
        if looking.elapsed() >= patience {
            return Some(gate.wait().await);
        }
        tokio::time::sleep(IDLE_LOOK).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_gate_knows_whether_a_writer_waits_for_it_now() {
        let gate = WriteGate::default();
        let held = gate.wait().await;
        assert!(!gate.waited_for(), "its holder does not wait");
        let waiter = tokio::spawn({
            let gate = gate.clone();
            async move { drop(gate.wait().await) }
        });
        while !gate.waited_for() {
            tokio::task::yield_now().await;
        }
        drop(held);
        waiter.await.expect("the waiter had the gate");
        assert!(!gate.waited_for(), "it had it and let it go");
        let held = gate.wait().await;
        let gave_up = tokio::time::timeout(Duration::from_millis(10), gate.wait()).await;
        assert!(gave_up.is_err(), "the gate is held");
        assert!(!gate.waited_for(), "a writer that gave up waits no more");
        drop(held);
    }

    #[tokio::test]
    async fn work_that_can_wait_begins_only_once_no_writer_holds_or_waits_for_the_gate() {
        let (_folder, store) = Store::scratch().await;
        let first = store.begin().await.expect("a writer");
        let (purging, later) = (store.clone(), store.clone());
        let purge = tokio::spawn(async move { purging.begin_when_idle(Duration::from_secs(600)).await });
        // One turn of this test's single-threaded runtime: the purge has looked at the gate, found
        // it held, and waits (its look is the only state it has; no time is waited on).
        tokio::task::yield_now().await;
        assert!(!purge.is_finished(), "a writer holds the gate");
        // A pipeline's commit that comes after the purge began to wait still goes first.
        let later = tokio::spawn(async move { later.begin().await.map(|tx| tx.commit()) });
        tokio::task::yield_now().await;
        first.commit().await.expect("committed");
        // Bounded only so that a purge that queued ahead fails here instead of hanging the suite.
        let committing = tokio::time::timeout(Duration::from_secs(60), later).await;
        let committing = committing.expect("the later writer was not held behind the purge").expect("a task");
        assert!(!purge.is_finished(), "the writer that waited is ahead of it");
        committing.expect("the later writer began").await.expect("committed");
        let idle = purge.await.expect("a task").expect("begun at an idle moment");
        idle.commit().await.expect("committed");
    }

    #[tokio::test]
    async fn work_that_can_wait_commits_without_a_flush_of_its_own_and_the_pipeline_durably() {
        let (_folder, store) = Store::scratch().await;
        let synchronous = |mut tx: Tx| async move {
            let level: i64 = sqlx::query_scalar("PRAGMA synchronous").fetch_one(&mut *tx).await.expect("a level");
            tx.commit().await.expect("committed");
            level
        };
        for _ in 0..3 {
            assert_eq!(synchronous(store.begin().await.expect("a writer")).await, 2, "FULL");
            let purge = store.begin_when_idle(Duration::from_secs(1)).await.expect("a writer");
            assert_eq!(synchronous(purge).await, 1, "NORMAL, on a connection of its own");
        }
    }

    /// `CHATGATE_TEST_POSTGRES_URL`: on PostgreSQL a losable write's commit waits for no flush,
    /// for it alone (the connection's next transaction flushes again).
    #[tokio::test]
    async fn a_losable_write_waits_for_no_flush_on_postgresql_and_for_itself_alone() {
        let Ok(url) = std::env::var("CHATGATE_TEST_POSTGRES_URL") else { return };
        let database_url = crate::config::DatabaseUrl::new(url);
        // One connection, so that each transaction below runs on the one before's.
        let config = crate::config::StorageConfig {
            database_url,
            max_connections: Some(1),
            ..crate::config::StorageConfig::default()
        };
        let store = Store::connect(&config).await.expect("a store");
        let flushing = |mut tx: Tx| async move {
            let setting: String = sqlx::query_scalar("SHOW synchronous_commit").fetch_one(&mut *tx).await.expect("it");
            tx.commit().await.expect("committed");
            setting
        };
        for _ in 0..2 {
            assert_eq!(flushing(store.begin().await.expect("a writer")).await, "on");
            assert_eq!(flushing(store.begin_losable().await.expect("a writer")).await, "off");
            let purge = store.begin_when_idle(Duration::from_secs(1)).await.expect("a writer");
            assert_eq!(flushing(purge).await, "off");
            assert_eq!(flushing(store.begin_inbox().await.expect("a writer")).await, "on");
            let mark = store.inbox_db.begin_losable(store.health.clone()).await.expect("a writer");
            assert_eq!(flushing(mark).await, "off");
        }
    }
}
