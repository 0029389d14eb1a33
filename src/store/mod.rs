//! Storage: one `Store` over sqlx, with SQLite (the embedded default) and PostgreSQL behind it.
//!
//! Both backends run the same SQL through sqlx's `Any` driver: the schemas are kept identical
//! (`migrations/sqlite`, `migrations/postgres`), times are epoch milliseconds and JSON is text,
//! so that every query is written once and the conformance suite proves it on both. What truly
//! differs (opening a database, transaction start, row claiming) lives in `sqlite.rs` and
//! `postgres.rs` behind [`Dialect`]. The store persists what the engine decided; it never
//! decides a transition.

mod admission;
mod commands;
mod dedupe;
mod error;
mod evidence;
mod inbound;
mod outbox;
mod postgres;
mod rows;
mod sqlite;

use std::time::Duration;

use sqlx::any::AnyPoolOptions;
use sqlx::{Any, AnyPool, Transaction};

pub use crate::config::BackendKind;
use crate::config::StorageConfig;
pub use admission::{AdmissionWrite, Admitted, DuplicateOf};
pub use commands::{StoredCommand, TransitionRecord, TransitionWrite};
pub use error::StoreError;
pub use evidence::{AuditReport, ChainReport, StoredArtifact};
pub use inbound::{InboundOutcome, NewInbound};
pub use outbox::{ClaimedMessage, NewOutboxMessage};

pub(crate) type Tx = Transaction<'static, Any>;

/// What the two SQL dialects do differently.
pub(crate) trait Dialect: Send + Sync {
    /// The statement that opens a write transaction.
    fn begin_write(&self) -> &'static str;
    /// Claims due outbox rows without two workers taking the same one.
    fn claim_outbox_sql(&self) -> &'static str;
}

#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    backend: BackendKind,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("backend", &self.backend).finish_non_exhaustive()
    }
}

impl Store {
    /// Opens the database the URL names (creating a SQLite file and its folder when missing)
    /// and checks that it answers.
    pub async fn connect(config: &StorageConfig) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let backend = config.database_url.backend().map_err(StoreError::Config)?;
        let acquire_timeout = Duration::from_millis(config.acquire_timeout_ms);
        let options = AnyPoolOptions::new().max_connections(config.max_connections).acquire_timeout(acquire_timeout);
        let pool = match backend {
            BackendKind::Sqlite => sqlite::open(config, options).await?,
            BackendKind::Postgres => postgres::open(config, options, acquire_timeout).await?,
        };
        Ok(Self { pool, backend })
    }

    /// Applies the embedded migrations of this backend.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let migrator = match self.backend {
            BackendKind::Sqlite => sqlx::migrate!("migrations/sqlite"),
            BackendKind::Postgres => sqlx::migrate!("migrations/postgres"),
        };
        migrator.run(&self.pool).await.map_err(|e| StoreError::Migrate(e.to_string()))
    }

    /// Answers when the database does (`/readyz`).
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    pub async fn close(&self) {
        self.pool.close().await;
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

    /// A write transaction: on SQLite it takes the write lock at once (`BEGIN IMMEDIATE`), so
    /// concurrent writers queue on the busy timeout instead of failing on lock upgrade.
    pub(crate) async fn begin(&self) -> Result<Tx, StoreError> {
        Ok(self.pool.begin_with(self.dialect().begin_write()).await?)
    }

    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }
}
