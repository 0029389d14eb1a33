//! SQLite's checkpoints, beside the writers: a commit no longer copies the WAL into the database
//! file while it holds the one write lock (every 1,000 pages, SQLite's default), which took a
//! tenth of the database's time under load (docs/BENCHMARKS.md).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::service::database::{Database, StoreError};

pub(super) async fn run(database: Database, every: Duration, stopping: CancellationToken) {
    crate::workers::periodically(every, stopping, || async {
        match database.checkpoint().await {
            Ok(_) => {}
            // The store is not ready for as long (`/readyz`), which says it without a line a second.
            Err(error @ StoreError::CannotWrite(_)) => tracing::debug!(%error, "the checkpoint cannot write"),
            Err(error) => tracing::warn!(%error, "the checkpoint failed; the next one takes what it left"),
        }
    })
    .await;
}
