//! A write transaction, and what it writes last.

use std::sync::Arc;

use sqlx::{Any, AnyConnection, Transaction};
use tokio::sync::OwnedMutexGuard;

use crate::store::{StoreError, figures, health};

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
