//! Opening the store: the main database, the inbox's beside it, and the admission writer.

use std::sync::Arc;
use std::time::Duration;

use sqlx::AnyPool;
use tokio::runtime::Handle;

use crate::config::{BackendKind, StorageConfig};
use crate::store::tx::WriteGate;
use crate::store::{Parts, Store, StoreError, feed, inbox_db, pool, postgres, sqlite, writer};

impl Store {
    /// Opens the database the URL names (creating a SQLite file and its folder when missing)
    /// and checks that it answers; everything runs on the current runtime.
    pub async fn connect(config: &StorageConfig) -> Result<Self, StoreError> {
        Self::connect_on(config, &Handle::current()).await
    }

    /// As [`Store::connect`], with the main database's connections and the admission writer on
    /// `background` (the work behind the acknowledgement, scheduled after it) and the inbox's on
    /// the current runtime, beside the webhooks it answers.
    pub async fn connect_on(config: &StorageConfig, background: &Handle) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let backend = config.database_url.backend().map_err(StoreError::Config)?;
        let main = config.clone();
        let (pool, unhurried) = background
            .spawn(async move { open_main(&main, backend).await })
            .await
            .map_err(|e| StoreError::Unavailable(format!("cannot open the database: {e}")))??;
        let inbox_db = inbox_db::InboxDb::open(config, backend).await?;
        let parts = Parts {
            pool,
            unhurried,
            backend,
            write_gate: (backend == BackendKind::Sqlite).then(WriteGate::default),
            admissions: None,
            stats: Arc::default(),
            signals: Arc::default(),
            breaker: Arc::default(),
            feed: Arc::new(feed::MoveFeed::new(
                (backend == BackendKind::Postgres).then(|| config.database_url.expose().to_owned()),
            )),
            health: Arc::default(),
            inbox_db,
            handoffs: Arc::default(),
        };
        // The writer's own handle has no queue: it commits what it takes itself.
        let writer = Self { parts: Arc::new(parts.clone()) };
        let admissions = Some(writer::spawn(writer, config.max_waiting_admissions, background));
        Ok(Self { parts: Arc::new(Parts { admissions, ..parts }) })
    }
}

/// The main database's pool and, on SQLite, its connection for work that can wait.
async fn open_main(config: &StorageConfig, backend: BackendKind) -> Result<(AnyPool, Option<AnyPool>), StoreError> {
    let acquire_timeout = Duration::from_millis(config.acquire_timeout_ms);
    let size = config.pool_size(backend);
    let options = pool::options().max_connections(size).acquire_timeout(acquire_timeout);
    match backend {
        BackendKind::Sqlite => {
            let url = config.database_url.expose();
            let pool = sqlite::open(url, config, options.clone(), sqlite::MAIN).await?;
            let unhurried = sqlite::open(url, config, options.max_connections(1), sqlite::UNHURRIED).await?;
            Ok((pool, Some(unhurried)))
        }
        BackendKind::Postgres => {
            let pool = postgres::open(config, options.min_connections(size), acquire_timeout).await?;
            pool::every_connection(&pool, size).await?;
            Ok((pool, None))
        }
    }
}

#[cfg(test)]
impl Store {
    /// A store on a fresh SQLite file in a folder of its own, which it lives as long as.
    pub(crate) async fn scratch() -> (tempfile::TempDir, Self) {
        let folder = tempfile::tempdir().expect("a folder");
        let url = format!("sqlite://{}", folder.path().join("scratch.db").display());
        let config = StorageConfig { database_url: crate::config::DatabaseUrl::new(url), ..StorageConfig::default() };
        (folder, Store::connect(&config).await.expect("a store"))
    }
}
