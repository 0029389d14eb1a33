//! A write transaction, and what it writes last.

use std::sync::Arc;

use sqlx::{Any, AnyConnection, Transaction};
use tokio::sync::OwnedMutexGuard;

use crate::store::{Store, StoreError, breaker, figures, health};

/// A write transaction. On SQLite it also holds the process's write gate: SQLite has one writer at
/// a time, and queueing writers here (first come, first served) is far steadier than letting them
/// poll the database lock through the busy timeout, which still covers other processes.
pub(crate) struct Tx {
    tx: Transaction<'static, Any>,
    _gate: Option<OwnedMutexGuard<()>>,
    health: Arc<health::WriteHealth>,
    /// The figures this transaction moves, written as its last statement (`figures::Moves`).
    pub(crate) figures: figures::Moves,
}

impl Tx {
    /// `tx`, holding `gate` (SQLite's write gate) until it ends.
    pub(crate) fn new(
        tx: Transaction<'static, Any>,
        gate: Option<OwnedMutexGuard<()>>,
        health: Arc<health::WriteHealth>,
    ) -> Self {
        Self { tx, _gate: gate, health, figures: figures::Moves::default() }
    }

    /// Commits; a commit the database cannot write (a full disk) makes readiness fail.
    pub(crate) async fn commit(mut self) -> Result<(), StoreError> {
        std::mem::take(&mut self.figures).record(&mut self.tx).await?;
        let committed = self.tx.commit().await.map_err(StoreError::from);
        if let Err(error) = &committed {
            self.health.observe_failure(error);
        }
        committed
    }

    pub(crate) async fn rollback(self) -> Result<(), StoreError> {
        Ok(self.tx.rollback().await?)
    }
}

impl std::ops::Deref for Tx {
    type Target = AnyConnection;
    fn deref(&self) -> &AnyConnection {
        &self.tx
    }
}

impl std::ops::DerefMut for Tx {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        &mut self.tx
    }
}

impl Store {
    /// A write transaction: on SQLite it takes the write lock at once (`BEGIN IMMEDIATE`), so
    /// concurrent writers queue on the busy timeout instead of failing on lock upgrade.
    pub(crate) async fn begin(&self) -> Result<Tx, StoreError> {
        let gate = match &self.write_gate {
            Some(gate) => Some(gate.clone().lock_owned().await),
            None => None,
        };
        self.begin_holding(gate).await
    }

    /// A write transaction once the caller holds SQLite's write gate (`None` on PostgreSQL).
    pub(super) async fn begin_holding(&self, gate: Option<OwnedMutexGuard<()>>) -> Result<Tx, StoreError> {
        let pass = self.breaker.pass();
        if pass == breaker::Pass::Refused {
            return Err(StoreError::Unavailable("the database was unreachable a moment ago".into()));
        }
        let _probing = self.breaker.probe_guard(&pass);
        // Whatever stops a transaction from even starting (refused, down, shutting down) means
        // the database is unavailable to us: the caller should retry, never get a 500.
        match self.pool.begin_with(self.dialect().begin_write()).await {
            Ok(tx) => {
                self.breaker.succeeded();
                Ok(Tx::new(tx, gate, self.health.clone()))
            }
            Err(e) => {
                self.breaker.failed();
                Err(StoreError::Unavailable(format!("cannot start a transaction: {e}")))
            }
        }
    }
}
