//! The database figures `/metrics` shows, read at most once a second however often it is
//! scraped: concurrent scrapes wait for the one read under way and share it, so a scraper (or
//! anyone who can reach `/metrics`) cannot turn scrapes into load on the database.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use time::OffsetDateTime;
use tokio::sync::Mutex;

use crate::service::database::Database;
use crate::store::Snapshot;

/// How long a read of the figures is shown before the next scrape reads again.
const FRESH: Duration = Duration::from_secs(1);
/// Deliveries closed within this are in the figures (and the completeness figures are of them).
pub const WINDOW: Duration = Duration::from_secs(3_600);
/// A started command nothing was heard about for this long is orphaned.
const ORPHAN_AFTER: Duration = Duration::from_secs(300);

#[derive(Debug, Default)]
pub struct Figures {
    latest: Mutex<Option<(Instant, Result<Snapshot, String>)>>,
    reads: AtomicU64,
}

impl Figures {
    /// The figures, read now or at most `FRESH` ago; why not, when the database did not answer.
    pub async fn get(&self, database: &Database) -> Result<Snapshot, String> {
        let store = database.store();
        let mut latest = self.latest.lock().await;
        if let Some((at, figures)) = latest.as_ref()
            && at.elapsed() < FRESH
        {
            return figures.clone();
        }
        self.reads.fetch_add(1, Ordering::Relaxed);
        let read = store.snapshot(OffsetDateTime::now_utc(), WINDOW, ORPHAN_AFTER).await.map_err(|e| e.to_string());
        *latest = Some((Instant::now(), read.clone()));
        read
    }

    /// How many times the database was read for them.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }
}
