//! The database as the layers above the service hold it: opened, migrated, asked whether it can
//! write, checkpointed and tidied, closed. Its repositories stay behind the service (the handle's
//! `Store` is visible in `service` only), so that every read and write above goes through one of
//! the service's façades: `reads` for the API and the console, the engine's moves, the dispatch
//! and the sending paths, the inbox's admission pass.

use time::OffsetDateTime;

use crate::config::{BackendKind, RetentionConfig, StorageConfig};
use crate::store::{RetentionPace, Store};

pub use crate::store::{BackupFile, StoreError};

/// An online, consistent copy of a SQLite database's two files into the new folder `into`, taken
/// while a gateway may be writing them (`chatgate backup`; `store::backup` says how).
pub async fn backup(config: &StorageConfig, into: &std::path::Path) -> Result<Vec<BackupFile>, StoreError> {
    crate::store::backup_sqlite(config, into).await
}

/// The one handle on the database above the service (cheap to clone).
#[derive(Clone, Debug)]
pub struct Database(Store);

impl From<Store> for Database {
    fn from(store: Store) -> Self {
        Self(store)
    }
}

impl Database {
    pub async fn connect(config: &StorageConfig) -> Result<Self, StoreError> {
        Store::connect(config).await.map(Self)
    }

    /// Its blocking work (SQLite's writers, checkpoints) on `background`.
    pub async fn connect_on(config: &StorageConfig, background: &tokio::runtime::Handle) -> Result<Self, StoreError> {
        Store::connect_on(config, background).await.map(Self)
    }

    /// The repositories, for the service's own modules.
    pub(in crate::service) fn store(&self) -> &Store {
        &self.0
    }

    pub async fn migrate(&self) -> Result<(), StoreError> {
        self.0.migrate().await
    }

    pub async fn close(&self) {
        self.0.close().await;
    }

    pub fn backend(&self) -> BackendKind {
        self.0.backend()
    }

    pub fn backend_name(&self) -> &'static str {
        self.0.backend_name()
    }

    /// Whether it can write what the gateway acknowledges (readiness).
    pub async fn can_write(&self) -> Result<(), StoreError> {
        self.0.can_write().await
    }

    /// SQLite's write-ahead logs copied into their files; true when all of them are.
    pub async fn checkpoint(&self) -> Result<bool, StoreError> {
        self.0.checkpoint().await
    }

    /// What is kept for a while only: duplicate markers whose window passed by `now`, step-up
    /// tokens that expired before `an_hour_ago`, inbox rows admitted before it and per-minute
    /// figures older than two minutes before it. Each part is tried whatever the others did, in
    /// transactions paced as `[retention]` paces the purge's (`store::tidy`).
    pub async fn tidy(&self, now: OffsetDateTime, an_hour_ago: OffsetDateTime, pacing: &RetentionConfig) -> Tidied {
        let figures_before = an_hour_ago - std::time::Duration::from_secs(120);
        let pace = &mut RetentionPace::of(pacing);
        Tidied {
            duplicate_markers: self.0.dedupe().purge_expired(now, pace).await,
            tokens: self.0.tokens().purge_consumed(an_hour_ago, pace).await.map(|_| ()),
            inbox_rows: self.0.inbox().forget_admitted(an_hour_ago, pace).await.map(|_| ()),
            figures: self.0.forget_figures(figures_before, pace).await.map(|_| ()),
            conversations: self.0.forget_conversations(now, pace).await.map(|_| ()),
            link_codes: self.0.link_codes().forget_kept(now, pace).await.map(|_| ()),
        }
    }
}

/// What one tidying did, part by part.
#[derive(Debug)]
pub struct Tidied {
    /// How many expired duplicate markers went.
    pub duplicate_markers: Result<u64, StoreError>,
    pub tokens: Result<(), StoreError>,
    pub inbox_rows: Result<(), StoreError>,
    pub figures: Result<(), StoreError>,
    /// The conversations that ended quietly (a command written in turns left alone).
    pub conversations: Result<(), StoreError>,
    /// Link codes past keeping: expired unused, or used and past the window to undo their link.
    pub link_codes: Result<(), StoreError>,
}
