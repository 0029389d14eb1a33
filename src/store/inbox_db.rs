//! Where the inbox lives. A webhook's answer waits for its inbox rows only, so their commit must
//! never queue behind admission's larger transactions:
//!
//! - SQLite has one writer per database file: the inbox is a file of its own beside the main one
//!   (`data/chatgate.db` → `data/chatgate-inbox.db`), with its own writer, its own WAL and its own
//!   migrations (`migrations/sqlite-inbox`). Nothing joins the two: admission reads a row from
//!   the inbox, commits the admission in the main file, then marks the row; a crash in between
//!   is harmless, the message is found recorded (a redelivery).
//! - PostgreSQL: the same database (the table is in the main migrations), through a few
//!   connections of the inbox's own, so that an answer never waits for one of admission's.

use std::sync::Arc;

use sqlx::AnyPool;

use crate::config::{BackendKind, StorageConfig};
use crate::store::breaker::Breaker;
use crate::store::commits::Commits;
use crate::store::held::{Held, Lent};
use crate::store::tx::{self, WriteGate};
use crate::store::{StoreError, Tx, health, sqlite};

/// The inbox's connections on PostgreSQL: its group-commit writer, admission's claims and marks,
/// the backlog's count and the lease's heartbeat.
const POSTGRES_CONNECTIONS: u32 = 4;
/// SQLite: one connection for every write, and one beside it (WAL) for reads and checkpoints.
const SQLITE_CONNECTIONS: u32 = 1;
/// SQLite's connections: durable, with SQLite's default page cache (the inbox's rows are written
/// once and read back soon, by their primary key).
const SQLITE: sqlite::Tuning = sqlite::Tuning { cache_kib: 2_000, commits: Commits::Durable };

#[derive(Clone)]
pub(crate) struct InboxDb {
    /// Every connection on PostgreSQL; SQLite's readers.
    pool: AnyPool,
    /// SQLite only: the file's writer. SQLite drops a connection's page cache when another
    /// connection has committed since its last transaction: with the writes spread over a pool's
    /// connections in turn, every group commit read its pages again from the file
    /// (docs/BENCHMARKS.md, 2026-11-27, third session). The gate lets one write at a time anyway.
    writer: Option<Held>,
    backend: BackendKind,
    /// SQLite only: the inbox file's writers queue here (as [`Tx`] explains for the main file).
    gate: Option<WriteGate>,
    /// Once a write could not reach the database, the next ones are refused at once (the
    /// webhooks answered 503 without waiting) while a watcher finds out when it is back.
    breaker: Arc<Breaker>,
    /// The longest one write may take, whatever the database does (`storage.acquire_timeout_ms`):
    /// past it the write is given up, and counts as the database out of reach.
    write_timeout: std::time::Duration,
}

/// How long the inbox waits for one of its connections, or for a new one to the database, before
/// a write fails (and the breaker opens): a webhook's answer waits for it, and with the
/// database down every connection attempt is retried until this.
const ACQUIRE_TIMEOUT_MOST: std::time::Duration = std::time::Duration::from_millis(1_000);

impl InboxDb {
    pub(crate) async fn open(config: &StorageConfig, backend: BackendKind) -> Result<Self, StoreError> {
        let acquire_timeout = std::time::Duration::from_millis(config.acquire_timeout_ms).min(ACQUIRE_TIMEOUT_MOST);
        let options = crate::store::pool::options().acquire_timeout(acquire_timeout);
        let (pool, writer, gate) = match backend {
            BackendKind::Sqlite => {
                let url = inbox_url(config.database_url.expose())?;
                let writer = Held::open(sqlite::Opener::new(&url, config, SQLITE)?).await?;
                let pool = sqlite::open(&url, config, options.max_connections(SQLITE_CONNECTIONS), SQLITE).await?;
                (pool, Some(writer), Some(WriteGate::default()))
            }
            BackendKind::Postgres => {
                let url = config.database_url.expose();
                let options = options.max_connections(POSTGRES_CONNECTIONS).min_connections(POSTGRES_CONNECTIONS);
                let pool = options.connect(url).await.map_err(|e| {
                    StoreError::Unavailable(format!("cannot open {}: {e}", config.database_url.redacted()))
                })?;
                // On this runtime (the server's), not on the one admission claims from.
                crate::store::pool::every_connection(&pool, POSTGRES_CONNECTIONS).await?;
                (pool, None, None)
            }
        };
        let write_timeout = std::time::Duration::from_millis(config.acquire_timeout_ms.max(1_000));
        Ok(Self { pool, writer, backend, gate, breaker: Arc::default(), write_timeout })
    }

    /// The inbox file's own migrations (SQLite); PostgreSQL's inbox is in the main ones.
    pub(crate) async fn migrate(&self) -> Result<(), StoreError> {
        if self.backend == BackendKind::Sqlite {
            let mut migrator = sqlx::migrate!("migrations/sqlite-inbox");
            migrator.set_ignore_missing(true);
            migrator.run(&self.pool).await.map_err(|e| StoreError::Migrate(format!("the inbox: {e}")))?;
        }
        Ok(())
    }

    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// A write transaction on the inbox; whatever keeps it from starting means the database is
    /// unavailable (the provider retries).
    pub(crate) async fn begin(&self, health: Arc<health::WriteHealth>) -> Result<Tx, StoreError> {
        self.begin_committing(health, Commits::Durable).await
    }

    /// A write transaction on the inbox whose loss in a crash is harmless (an admitted mark:
    /// [`Commits::Unhurried`]): on PostgreSQL its commit waits for no flush; on SQLite it is the
    /// inbox's writer like any (the connection beside it, unhurried, was measured and not kept:
    /// docs/BENCHMARKS.md, 2026-12-01).
    pub(crate) async fn begin_losable(&self, health: Arc<health::WriteHealth>) -> Result<Tx, StoreError> {
        self.begin_committing(health, Commits::Unhurried).await
    }

    /// A write transaction on the inbox once its gate is had, its commit as `commits` says.
    async fn begin_committing(&self, health: Arc<health::WriteHealth>, commits: Commits) -> Result<Tx, StoreError> {
        self.refuse_while_failing()?;
        let gate = tx::gate_turn(self.gate.as_ref()).await;
        self.begin_holding(gate, health, commits).await
    }

    /// A write transaction on the inbox for work that can wait (a clean-up's): see
    /// [`tx::idle_gate`]; its commit unhurried on PostgreSQL, as the main database's are.
    pub(crate) async fn begin_when_idle(
        &self,
        health: Arc<health::WriteHealth>,
        patience: std::time::Duration,
    ) -> Result<Tx, StoreError> {
        self.refuse_while_failing()?;
        let gate = tx::idle_gate(self.gate.as_ref(), patience).await;
        self.begin_holding(gate, health, Commits::Unhurried).await
    }

    /// A write transaction once the caller holds the inbox file's gate (`None` on PostgreSQL),
    /// its commit as `commits` says.
    async fn begin_holding(
        &self,
        gate: Option<tokio::sync::OwnedMutexGuard<()>>,
        health: Arc<health::WriteHealth>,
        commits: Commits,
    ) -> Result<Tx, StoreError> {
        match tx::Beginning::new(&self.pool, self.writer.as_ref(), gate).open(self.backend, commits).await {
            Ok(open) => Ok(Tx::new(open, health, None)),
            Err(e) => Err(self.unreachable(format!("cannot start a transaction on the inbox: {e}"))),
        }
    }

    /// A connection to write one statement with, outside a transaction (SQLite: holding the
    /// inbox file's gate): a lone statement is its own transaction, with no `BEGIN` and `COMMIT`
    /// to wait for.
    pub(crate) async fn writer(&self) -> Result<Writer, StoreError> {
        self.refuse_while_failing()?;
        let gate = tx::gate_turn(self.gate.as_ref()).await;
        let conn = match &self.writer {
            Some(writer) => writer.lend().await.map(Lone::Held),
            None => self.pool.acquire().await.map(Lone::Pooled).map_err(StoreError::from),
        };
        let conn = conn.map_err(|e| self.unreachable(format!("cannot write to the inbox: {e}")))?;
        Ok(Writer { conn, _gate: gate })
    }

    /// `write`, given up past the write timeout (a database that hangs is out of reach too).
    pub(crate) async fn bounded<T>(
        &self,
        write: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.write_timeout, write).await {
            Ok(written) => written,
            Err(_) => {
                Err(self.unreachable(format!("the inbox's database did not answer within {:?}", self.write_timeout)))
            }
        }
    }

    /// `Unavailable` at once while the database is known to be out of reach.
    fn refuse_while_failing(&self) -> Result<(), StoreError> {
        match self.breaker.is_failing() {
            true => Err(StoreError::Unavailable("the inbox's database was out of reach a moment ago".into())),
            false => Ok(()),
        }
    }

    /// The database could not be reached (`what`): later writes are refused at once, and a watcher
    /// lets them through again once a connection can be had.
    fn unreachable(&self, what: String) -> StoreError {
        self.breaker.failed();
        let pool = self.pool.clone();
        self.breaker.watch(move || {
            let pool = pool.clone();
            async move {
                match pool.acquire().await {
                    Ok(mut conn) => sqlx::Executor::execute(&mut *conn, "SELECT 1").await.is_ok(),
                    Err(_) => false,
                }
            }
        });
        StoreError::Unavailable(what)
    }

    /// SQLite: see `sqlite::checkpoint`.
    pub(crate) async fn checkpoint(&self) -> Result<bool, StoreError> {
        match &self.gate {
            Some(gate) => sqlite::checkpoint(&self.pool, gate.lock()).await,
            None => Ok(true),
        }
    }

    pub(crate) async fn close(&self) {
        if let Some(writer) = &self.writer {
            writer.close().await;
        }
        self.pool.close().await;
    }
}

/// See [`InboxDb::writer`].
pub(crate) struct Writer {
    conn: Lone,
    // After `conn`: the writer is given back before the gate is let go.
    _gate: Option<tokio::sync::OwnedMutexGuard<()>>,
}

/// A lone statement's connection: one of PostgreSQL's pool, or SQLite's writer of the file, given
/// back as it drops.
enum Lone {
    Pooled(sqlx::pool::PoolConnection<sqlx::Any>),
    Held(Lent),
}

impl std::ops::Deref for Writer {
    type Target = sqlx::AnyConnection;
    fn deref(&self) -> &sqlx::AnyConnection {
        match &self.conn {
            Lone::Pooled(conn) => conn,
            Lone::Held(conn) => conn,
        }
    }
}

impl std::ops::DerefMut for Writer {
    fn deref_mut(&mut self) -> &mut sqlx::AnyConnection {
        match &mut self.conn {
            Lone::Pooled(conn) => conn,
            Lone::Held(conn) => conn,
        }
    }
}

/// The inbox file beside the SQLite database `url` names: its name with `-inbox` before the
/// extension, the same query (`sqlite://data/chatgate.db` → `sqlite://data/chatgate-inbox.db`).
pub fn inbox_url(url: &str) -> Result<String, StoreError> {
    let (scheme, rest) = ["sqlite://", "sqlite:"]
        .iter()
        .find_map(|scheme| url.strip_prefix(scheme).map(|rest| (*scheme, rest)))
        .ok_or_else(|| StoreError::Config(format!("`{url}` is not a sqlite: URL")))?;
    let (path, query) = rest.split_once('?').map_or((rest, None), |(path, query)| (path, Some(query)));
    if path.is_empty() || path == ":memory:" {
        return Ok(url.to_owned());
    }
    let (folder, file) = path.rsplit_once('/').map_or(("", path), |(folder, file)| (folder, file));
    let file = match file.rsplit_once('.') {
        Some((stem, extension)) if !stem.is_empty() => format!("{stem}-inbox.{extension}"),
        _ => format!("{file}-inbox"),
    };
    let path = if folder.is_empty() && !path.starts_with('/') { file } else { format!("{folder}/{file}") };
    Ok(match query {
        Some(query) => format!("{scheme}{path}?{query}"),
        None => format!("{scheme}{path}"),
    })
}

#[cfg(test)]
mod tests {
    use super::inbox_url;

    #[test]
    fn the_inbox_file_sits_beside_the_database() {
        let url = |u: &str| inbox_url(u).expect("a sqlite URL");
        assert_eq!(url("sqlite://data/chatgate.db"), "sqlite://data/chatgate-inbox.db");
        assert_eq!(url("sqlite:///var/lib/cg/main.sqlite?mode=rwc"), "sqlite:///var/lib/cg/main-inbox.sqlite?mode=rwc");
        assert_eq!(url("sqlite:chatgate"), "sqlite:chatgate-inbox");
        assert_eq!(url("sqlite:/x.y/db"), "sqlite:/x.y/db-inbox");
        assert_eq!(url("sqlite::memory:"), "sqlite::memory:");
        assert!(inbox_url("postgres://x").is_err());
    }
}
