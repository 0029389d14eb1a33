//! A SQLite file's writer: the one connection its write transactions run on, held beside its
//! write gate, outside sqlx's pool.
//!
//! Through the pool, each transaction took whichever connection was idle and gave it back to a
//! ping (sqlx tests every connection given back: a message to the connection's thread and back,
//! in a task spawned for it), and the writes went round the pool's connections, each throwing
//! its page cache away whenever another had committed. Held here, the writer is taken and given
//! back under the gate with nothing in between, and its cache stays warm (docs/BENCHMARKS.md,
//! 2026-12-02).

use std::sync::{Arc, Mutex, PoisonError};

use sqlx::AnyConnection;
use tokio::sync::OwnedMutexGuard;

use crate::store::StoreError;
use crate::store::sqlite::Opener;

/// The writer of one file, while no transaction has it; cheap to clone.
#[derive(Clone)]
pub(crate) struct Held {
    slot: Arc<Mutex<Slot>>,
    opener: Opener,
}

/// Where a file's writer is.
enum Slot {
    /// Kept for the next transaction.
    Kept(AnyConnection),
    /// None kept: a transaction has it, or one failed to end and the connection was closed then
    /// (the next writer opens a fresh one).
    Empty,
    /// The store closed: no writer is given out again, as a closed pool gives out none.
    Closed,
}

impl Held {
    /// The file's writer, opened now (on this runtime, as a pool's connections are).
    pub(super) async fn open(opener: Opener) -> Result<Self, StoreError> {
        let conn = opener.open().await?;
        Ok(Self { slot: Arc::new(Mutex::new(Slot::Kept(conn))), opener })
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The writer, for whoever holds the file's write gate: the one kept, or a fresh one; given
    /// back as the loan drops.
    pub(super) async fn lend(&self) -> Result<Lent, StoreError> {
        let kept = std::mem::replace(&mut *self.slot(), Slot::Empty);
        let conn = match kept {
            Slot::Kept(conn) => conn,
            Slot::Empty => self.opener.open().await?,
            Slot::Closed => {
                *self.slot() = Slot::Closed;
                return Err(StoreError::Unavailable("the database is closed".into()));
            }
        };
        Ok(Lent { conn: Some(conn), held: self.clone() })
    }

    /// The writer back, with no transaction open on it (closed as it drops once the store is).
    fn give_back(&self, conn: AnyConnection) {
        let mut slot = self.slot();
        if !matches!(*slot, Slot::Closed) {
            *slot = Slot::Kept(conn);
        }
    }

    /// Closes the writer (the store closing): none is given out again.
    pub(super) async fn close(&self) {
        let kept = std::mem::replace(&mut *self.slot(), Slot::Closed);
        if let Slot::Kept(conn) = kept {
            let _ = sqlx::Connection::close(conn).await;
        }
    }

    /// A write transaction on the writer, begun by `statement` (`commits::begin_statement`), for the
    /// holder of the file's write `gate`, which it keeps until the transaction ends. A writer
    /// that cannot begin one is closed.
    pub(super) async fn begin(&self, statement: &'static str, gate: OwnedMutexGuard<()>) -> Result<HeldTx, StoreError> {
        let mut lent = self.lend().await?;
        if let Err(error) = sqlx::query(statement).execute(&mut *lent).await {
            // Closed as it drops, not given back.
            drop(lent.recall());
            return Err(error.into());
        }
        Ok(HeldTx { lent, gate: Some(gate) })
    }
}

/// A file's writer lent out: given back as it drops, unless taken out of the loan to be closed
/// (dropped) or given back by hand.
pub(crate) struct Lent {
    /// `Some` until given back.
    conn: Option<AnyConnection>,
    held: Held,
}

impl Lent {
    /// The writer, out of the loan: nothing gives it back now but [`Held::give_back`].
    fn recall(&mut self) -> Option<AnyConnection> {
        self.conn.take()
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.held.give_back(conn);
        }
    }
}

impl std::ops::Deref for Lent {
    type Target = AnyConnection;
    fn deref(&self) -> &AnyConnection {
        self.conn.as_ref().expect("a loan holds its writer until it is given back")
    }
}

impl std::ops::DerefMut for Lent {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        self.conn.as_mut().expect("a loan holds its writer until it is given back")
    }
}

/// A transaction on a file's writer. Ended by [`HeldTx::commit`] or [`HeldTx::rollback`]; one
/// dropped open is rolled back before the gate is let go, as sqlx's own transactions are.
pub(crate) struct HeldTx {
    /// The writer; recalled from the loan as the transaction ends.
    lent: Lent,
    gate: Option<OwnedMutexGuard<()>>,
}

impl HeldTx {
    pub(super) async fn commit(mut self) -> Result<(), StoreError> {
        self.end("COMMIT").await
    }

    pub(super) async fn rollback(mut self) -> Result<(), StoreError> {
        self.end("ROLLBACK").await
    }

    /// Ends the transaction with `statement`, the writer given back once it did. A writer whose
    /// transaction did not end as asked (SQLite rolls a transaction back by itself after some
    /// failures, a full disk's among them, and the ROLLBACK then fails) is closed instead: what
    /// it held is rolled back as it closes, and the next writer opens a fresh one.
    async fn end(&mut self, statement: &'static str) -> Result<(), StoreError> {
        let Some(mut conn) = self.lent.recall() else { return Ok(()) };
        sqlx::query(statement).execute(&mut conn).await?;
        self.lent.held.give_back(conn);
        Ok(())
    }
}

impl Drop for HeldTx {
    fn drop(&mut self) {
        // Recalled first: without a runtime to roll it back on, the writer closes as it drops
        // (which rolls its transaction back), never given back open.
        let Some(mut conn) = self.lent.recall() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        // The gate goes with the rollback: no writer begins on the file before it is done.
        let (held, gate) = (self.lent.held.clone(), self.gate.take());
        runtime.spawn(async move {
            if sqlx::query("ROLLBACK").execute(&mut conn).await.is_ok() {
                held.give_back(conn);
            }
            drop(gate);
        });
    }
}

impl std::ops::Deref for HeldTx {
    type Target = AnyConnection;
    fn deref(&self) -> &AnyConnection {
        &self.lent
    }
}

impl std::ops::DerefMut for HeldTx {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        &mut self.lent
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::Held;
    use crate::config::StorageConfig;
    use crate::store::{Store, Tx, sqlite};

    /// Whether `tx` runs on the connection that created the temporary table `marker` (a
    /// temporary table is its connection's alone).
    async fn on_the_marked_connection(tx: &mut Tx) -> bool {
        let marked = "SELECT COUNT(*) FROM sqlite_temp_master WHERE name = 'marker'";
        sqlx::query_scalar::<_, i64>(marked).fetch_one(&mut **tx).await.expect("a count") == 1
    }

    /// A store whose writer is marked.
    async fn marked() -> (tempfile::TempDir, Store) {
        let (folder, store) = Store::scratch().await;
        let mut tx = store.begin().await.expect("a writer");
        sqlx::query("CREATE TEMP TABLE marker (x)").execute(&mut *tx).await.expect("marked");
        tx.commit().await.expect("committed");
        (folder, store)
    }

    #[tokio::test]
    async fn every_write_transaction_runs_on_the_one_writer_and_reads_beside_it() {
        let (_folder, store) = marked().await;
        for _ in 0..3 {
            let mut tx = store.begin().await.expect("a writer");
            assert!(on_the_marked_connection(&mut tx).await, "the writer kept");
            tx.commit().await.expect("committed");
            let mut tx = store.begin_losable().await.expect("a writer");
            assert!(on_the_marked_connection(&mut tx).await, "the writer kept");
            tx.rollback().await.expect("rolled back");
        }
        let marked = "SELECT COUNT(*) FROM sqlite_temp_master WHERE name = 'marker'";
        let read: i64 = sqlx::query_scalar(marked).fetch_one(store.pool()).await.expect("a count");
        assert_eq!(read, 0, "reads run on the readers");
    }

    #[tokio::test]
    async fn a_transaction_dropped_open_is_rolled_back_before_the_next_writer_begins() {
        let (_folder, store) = marked().await;
        let mut tx = store.begin().await.expect("a writer");
        sqlx::query("CREATE TABLE dropped (x)").execute(&mut *tx).await.expect("created");
        drop(tx);
        let mut tx = store.begin().await.expect("the next writer, once the rollback let the gate go");
        let dropped = "SELECT COUNT(*) FROM sqlite_master WHERE name = 'dropped'";
        let left: i64 = sqlx::query_scalar(dropped).fetch_one(&mut *tx).await.expect("a count");
        assert_eq!(left, 0, "rolled back");
        assert!(on_the_marked_connection(&mut tx).await, "and the writer kept");
        tx.commit().await.expect("committed");
    }

    #[tokio::test]
    async fn a_writer_whose_transaction_did_not_end_as_asked_is_replaced_by_a_fresh_one() {
        let (_folder, store) = marked().await;
        let mut tx = store.begin().await.expect("a writer");
        // As SQLite does by itself after some failures (a full disk's): the transaction is gone.
        sqlx::query("ROLLBACK").execute(&mut *tx).await.expect("ended underneath");
        assert!(tx.commit().await.is_err(), "nothing to commit");
        let mut tx = store.begin().await.expect("a fresh writer");
        assert!(!on_the_marked_connection(&mut tx).await, "a fresh connection");
        sqlx::query("CREATE TABLE written (x)").execute(&mut *tx).await.expect("written");
        tx.commit().await.expect("committed");
    }

    #[tokio::test]
    async fn a_writer_that_cannot_begin_a_transaction_is_closed_not_given_back() {
        sqlx::any::install_default_drivers();
        let folder = tempfile::tempdir().expect("a folder");
        let url = format!("sqlite://{}", folder.path().join("held.db").display());
        let tuning = sqlite::Tuning { cache_kib: 2_000, commits: crate::store::commits::Commits::Durable };
        let opener = sqlite::Opener::new(&url, &StorageConfig::default(), tuning).expect("an opener");
        let held = Held::open(opener).await.expect("a writer");
        let gate = || Arc::new(tokio::sync::Mutex::new(())).try_lock_owned().expect("a gate");
        let mut lent = held.lend().await.expect("lent");
        sqlx::query("CREATE TEMP TABLE marker (x)").execute(&mut *lent).await.expect("marked");
        // Given back inside a transaction, as no caller should: the next BEGIN on it fails.
        sqlx::query("BEGIN").execute(&mut *lent).await.expect("begun");
        drop(lent);
        assert!(held.begin("BEGIN IMMEDIATE", gate()).await.is_err(), "a transaction within a transaction");
        let mut tx = held.begin("BEGIN IMMEDIATE", gate()).await.expect("a fresh writer");
        let marked = "SELECT COUNT(*) FROM sqlite_temp_master WHERE name = 'marker'";
        let found: i64 = sqlx::query_scalar(marked).fetch_one(&mut *tx).await.expect("a count");
        assert_eq!(found, 0, "the one that failed was closed");
        tx.commit().await.expect("committed");
    }

    #[tokio::test]
    async fn a_closed_store_gives_its_writer_out_no_more() {
        let (_folder, store) = marked().await;
        store.close().await;
        assert!(store.begin().await.is_err(), "no fresh writer opened behind the close");
    }
}
