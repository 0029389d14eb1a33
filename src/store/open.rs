//! Opening the store (the main database, the inbox's beside it, and the admission writer), its
//! migrations, and closing it.

use std::sync::Arc;
use std::time::Duration;

use sqlx::AnyPool;
use tokio::runtime::Handle;

use crate::config::{BackendKind, StorageConfig};
use crate::store::held::Held;
use crate::store::tx::WriteGate;
use crate::store::{Parts, Store, StoreError, feed, inbox_db, pool, postgres, rows, sqlite, writer};

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
        let (pool, unhurried, writer) = background
            .spawn(async move { open_main(&main, backend).await })
            .await
            .map_err(|e| StoreError::Unavailable(format!("cannot open the database: {e}")))??;
        let inbox_db = inbox_db::InboxDb::open(config, backend).await?;
        let parts = Parts {
            pool,
            unhurried,
            writer,
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

/// The main database's pool, and on SQLite its connection for work that can wait and its writer.
type Main = (AnyPool, Option<AnyPool>, Option<Held>);

/// The main database's pool and, on SQLite, its connection for work that can wait and its
/// writer (the pool then its readers).
async fn open_main(config: &StorageConfig, backend: BackendKind) -> Result<Main, StoreError> {
    let acquire_timeout = Duration::from_millis(config.acquire_timeout_ms);
    let size = config.pool_size(backend);
    let options = pool::options().max_connections(size).acquire_timeout(acquire_timeout);
    match backend {
        BackendKind::Sqlite => {
            let url = config.database_url.expose();
            let writer = Held::open(sqlite::Opener::new(url, config, sqlite::MAIN)?).await?;
            let pool = sqlite::open(url, config, options.clone(), sqlite::READS).await?;
            let unhurried = sqlite::open(url, config, options.max_connections(1), sqlite::UNHURRIED).await?;
            Ok((pool, Some(unhurried), Some(writer)))
        }
        BackendKind::Postgres => {
            let pool = postgres::open(config, options.min_connections(size), acquire_timeout).await?;
            pool::every_connection(&pool, size).await?;
            Ok((pool, None, None))
        }
    }
}

impl Store {
    /// Applies the embedded migrations of this backend. Migrations a newer release applied are
    /// ignored, not refused: they are additive (`tests/it/migrations_rule.rs`), so this release
    /// runs on the database the next one migrated — during a rolling upgrade, and after a
    /// rollback (docs/OPERATING.md, "Upgrading").
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let mut migrator = match self.backend {
            BackendKind::Sqlite => sqlx::migrate!("migrations/sqlite"),
            BackendKind::Postgres => sqlx::migrate!("migrations/postgres"),
        };
        migrator.set_ignore_missing(true);
        migrator.run(&self.pool).await.map_err(|e| StoreError::Migrate(e.to_string()))?;
        self.inbox_db.migrate().await?;
        self.backfill_short_refs().await
    }

    /// Commands written before short references existed get theirs (a hash of the id, which
    /// SQL cannot compute), a batch at a time; a no-op once done.
    async fn backfill_short_refs(&self) -> Result<(), StoreError> {
        loop {
            let rows = sqlx::query("SELECT command_id FROM commands WHERE short_ref IS NULL LIMIT 500")
                .fetch_all(&self.pool)
                .await?;
            if rows.is_empty() {
                return Ok(());
            }
            let mut tx = self.begin().await?;
            for row in &rows {
                let id = rows::uuid(row, "command_id")?;
                sqlx::query("UPDATE commands SET short_ref = $1 WHERE command_id = $2")
                    .bind(crate::domain::command::ShortRef::of(id).as_str())
                    .bind(id.to_string())
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
        }
    }

    /// Closes every connection, the writers' first.
    pub async fn close(&self) {
        if let Some(unhurried) = &self.unhurried {
            unhurried.close().await;
        }
        if let Some(writer) = &self.writer {
            writer.close().await;
        }
        self.pool.close().await;
        self.inbox_db.close().await;
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
