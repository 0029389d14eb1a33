//! SQLite: a file under `data/` by default, WAL, busy timeout, foreign keys on.

use std::path::Path;

use sqlx::any::AnyPoolOptions;
use sqlx::{AnyConnection, AnyPool, AssertSqlSafe, Connection, Executor};

use crate::config::StorageConfig;
use crate::store::commits::Commits;
use crate::store::outbox::claim_outbox_sql;
use crate::store::{Dialect, StoreError};

pub(super) struct SqliteDialect;

impl Dialect for SqliteDialect {
    // SQLite has one writer at a time and the claim runs inside `BEGIN IMMEDIATE`, so no row
    // locking clause is needed (or accepted).
    fn claim_outbox_sql(&self) -> &'static str {
        claim_outbox_sql!("")
    }

    fn texts_of_list(&self) -> &'static str {
        "SELECT value FROM json_each($1)"
    }
}

/// How a pool's connections commit, and the page cache each keeps.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tuning {
    /// KiB.
    pub cache_kib: u32,
    pub commits: Commits,
}

/// The main file's writer (`held::Held`): every write transaction of the pipeline's runs on this
/// one connection, so no other connection's commit throws its page cache away.
pub(super) const MAIN: Tuning = Tuning { cache_kib: 16_384, commits: Commits::Durable };

/// The main file's readers. SQLite throws a connection's page cache away when another has
/// committed since its last transaction, which the writer does many times a second under load:
/// a reader's large cache would be filled and thrown away again.
pub(super) const READS: Tuning = Tuning { cache_kib: 2_048, commits: Commits::Durable };

/// The main file's connection for work that can wait (`Store::begin_when_idle`, the checkpoints):
/// its commits unhurried, its cache small, so that the old rows a purge deletes never fill the
/// pipeline's. (A checkpoint still flushes the WAL before it and the file after it.)
pub(super) const UNHURRIED: Tuning = Tuning { cache_kib: 2_048, commits: Commits::Unhurried };

/// How every connection to one file is opened: its URL, and the settings [`Opener::settle`]
/// gives it as it opens (a pool's connections and a file's writer, `held::Held`, alike).
#[derive(Debug, Clone)]
pub(super) struct Opener {
    url: String,
    redacted: String,
    busy_timeout: u64,
    synchronous: &'static str,
    cache_kib: u32,
    memory_limit: i64,
}

impl Opener {
    /// Connections to the file `url` names (its folder created, the file too when missing),
    /// as `tuning` says.
    pub(super) fn new(url: &str, config: &StorageConfig, tuning: Tuning) -> Result<Self, StoreError> {
        let Tuning { cache_kib, commits } = tuning;
        let synchronous = match commits {
            Commits::Durable => "PRAGMA synchronous = FULL",
            Commits::Unhurried => "PRAGMA synchronous = NORMAL",
        };
        Ok(Self {
            redacted: crate::config::DatabaseUrl::new(url).redacted(),
            url: prepare_url(url)?,
            busy_timeout: config.sqlite_busy_timeout_ms,
            synchronous,
            cache_kib,
            memory_limit: i64::try_from(config.sqlite_memory_mib.saturating_mul(1 << 20)).unwrap_or(i64::MAX),
        })
    }

    /// One connection of its own, outside any pool.
    pub(super) async fn open(&self) -> Result<AnyConnection, StoreError> {
        let unavailable = |e: sqlx::Error| StoreError::Unavailable(format!("cannot open {}: {e}", self.redacted));
        let mut conn = AnyConnection::connect(&self.url).await.map_err(unavailable)?;
        self.settle(&mut conn).await.map_err(unavailable)?;
        Ok(conn)
    }

    /// A new connection's settings.
    async fn settle(&self, conn: &mut AnyConnection) -> Result<(), sqlx::Error> {
        // busy_timeout first, so that switching to WAL waits for a lock instead of failing.
        conn.execute(AssertSqlSafe(format!("PRAGMA busy_timeout = {}", self.busy_timeout))).await?;
        conn.execute("PRAGMA journal_mode = WAL").await?;
        // No checkpoint inside a commit (SQLite's default runs one every 1,000 pages, in the
        // committing connection, while it holds the one write lock): `Store::checkpoint` runs
        // them beside the writers (`workers::checkpoint`), and closing the last connection runs
        // one too.
        conn.execute("PRAGMA wal_autocheckpoint = 0").await?;
        // A WAL that a burst grew keeps its size on disk once it starts again from its first
        // frame; past 64 MB it is cut back then (the soak run: it stayed at 1.2 GB).
        conn.execute("PRAGMA journal_size_limit = 67108864").await?;
        conn.execute(self.synchronous).await?;
        conn.execute("PRAGMA foreign_keys = ON").await?;
        // The default 2 MB cache makes inserts into the random-keyed indexes (idempotency keys
        // are SHA-256) read from the OS page by page once the file outgrows it.
        conn.execute(AssertSqlSafe(format!("PRAGMA cache_size = -{}", self.cache_kib))).await?;
        // The process's budget, over every connection to every file: past it SQLite recycles
        // its caches' pages instead of taking more memory (the OS keeps the file's pages
        // anyway); it is the same for all, so each connection may set it.
        conn.execute(AssertSqlSafe(format!("PRAGMA soft_heap_limit = {}", self.memory_limit))).await?;
        Ok(())
    }
}

/// Opens the SQLite database `url` names (the main one, or the inbox's beside it), its
/// connections as `tuning` says. Every connection of the pool is opened now and
/// kept: each is a thread of its own, which takes the scheduling priority of the thread that
/// starts it (`workers::Background`), so they are started here rather than by whichever task
/// first needs one.
pub(super) async fn open(
    url: &str,
    config: &StorageConfig,
    options: AnyPoolOptions,
    tuning: Tuning,
) -> Result<AnyPool, StoreError> {
    let opener = Opener::new(url, config, tuning)?;
    let size = options.get_max_connections();
    let settings = opener.clone();
    let pool = options
        .min_connections(size)
        // A local file does not drop a connection the way a network does; checking each one
        // before use would cost every transaction and every read an extra round trip to the
        // connection's thread.
        .test_before_acquire(false)
        .after_connect(move |conn, _meta| {
            let settings = settings.clone();
            Box::pin(async move { settings.settle(conn).await })
        })
        .connect(&opener.url)
        .await
        .map_err(|e| StoreError::Unavailable(format!("cannot open {}: {e}", opener.redacted)))?;
    crate::store::pool::every_connection(&pool, size).await?;
    Ok(pool)
}

/// WAL frames (pages) past which a checkpoint starts the WAL from its first frame again:
/// SQLite's own point for a checkpoint.
const WAL_RESTART_FRAMES: i64 = 1_000;

/// How long a restart waits for readers of the WAL's frames to finish (SQLite's busy handler),
/// the writers held back meanwhile; past it the WAL goes on growing until the next checkpoint.
const RESTART_WAIT_MS: i64 = 20;

/// Copies what the WAL holds into the database file without waiting for readers or writers
/// (`PASSIVE`); true when all of it is there (a reader still on an older snapshot holds back the
/// frames after it). SQLite writes the WAL from its start again only when a writer begins with
/// all of it copied and no reader on it, which a pipeline's steady writes and reads never let
/// happen: the WAL grew by every commit, to 420 MB in a 20,000-command flood (each commit's pages
/// written into blocks the file system had to find, each sync writing the file's new size). So
/// past [`WAL_RESTART_FRAMES`] the copy is made again with the writers held back at `gate`, in
/// `RESTART` mode: it copies the last frames and, once the readers of older frames are done
/// (waiting [`RESTART_WAIT_MS`] at most), starts the WAL from its first frame.
pub(super) async fn checkpoint(pool: &AnyPool, gate: &tokio::sync::Mutex<()>) -> Result<bool, StoreError> {
    let (log, copied) = copy_wal(pool, "PRAGMA wal_checkpoint(PASSIVE)").await?;
    if log < WAL_RESTART_FRAMES {
        return Ok(log == copied);
    }
    let _writers = gate.lock().await;
    // A task of its own, so that a caller that stops waiting (a dropped request) cannot leave
    // the connection with the restart's short wait.
    let restart = tokio::spawn(restart_wal(pool.clone()));
    let (log, copied) =
        restart.await.map_err(|e| StoreError::Unavailable(format!("the checkpoint stopped: {e}")))??;
    Ok(log == copied)
}

/// `RESTART`, waiting [`RESTART_WAIT_MS`] at most for the readers; the connection's own wait is
/// put back after it, or the connection is closed.
async fn restart_wal(pool: AnyPool) -> Result<(i64, i64), StoreError> {
    let mut conn = pool.acquire().await?;
    let waits: i64 = sqlx::query_scalar("PRAGMA busy_timeout").fetch_one(&mut *conn).await?;
    conn.execute(AssertSqlSafe(format!("PRAGMA busy_timeout = {RESTART_WAIT_MS}"))).await?;
    let restarted = copy_wal(&mut *conn, "PRAGMA wal_checkpoint(RESTART)").await;
    if let Err(error) = conn.execute(AssertSqlSafe(format!("PRAGMA busy_timeout = {waits}"))).await {
        conn.close_on_drop();
        return Err(error.into());
    }
    restarted
}

/// A checkpoint in `mode`'s statement: the WAL's frames, and how many of them are in the
/// database file now (both 0 once a restart started it again).
async fn copy_wal<'c, E>(on: E, mode: &'static str) -> Result<(i64, i64), StoreError>
where
    E: sqlx::Executor<'c, Database = sqlx::Any>,
{
    let row = sqlx::query(mode).fetch_one(on).await?;
    let column = |n: usize| sqlx::Row::try_get::<i64, _>(&row, n).map_err(|e| StoreError::Corrupt(e.to_string()));
    Ok((column(1)?, column(2)?))
}

/// The file and the query a sqlite: URL names (`sqlite://data/chatgate.db?mode=rwc`).
fn parts(url: &str) -> Result<(&str, &str), StoreError> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .ok_or_else(|| StoreError::Config(format!("`{url}` is not a sqlite: URL")))?;
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    if path.is_empty() {
        return Err(StoreError::Config(format!("`{url}` names no database file")));
    }
    Ok((path, query))
}

/// The file a sqlite: URL names; an error for a database in memory.
pub(super) fn file_of(url: &str) -> Result<std::path::PathBuf, StoreError> {
    match parts(url)? {
        (path, query) if in_memory(path, query) => {
            Err(StoreError::Config(format!("`{url}` is a database in memory, not a file")))
        }
        (path, _) => Ok(Path::new(path).to_path_buf()),
    }
}

fn in_memory(path: &str, query: &str) -> bool {
    path == ":memory:" || query.contains("mode=memory")
}

/// Creates the database's folder and asks SQLite to create the file (`mode=rwc`) when missing.
fn prepare_url(url: &str) -> Result<String, StoreError> {
    let (path, query) = parts(url)?;
    if !in_memory(path, query)
        && let Some(dir) = Path::new(path).parent().filter(|d| !d.as_os_str().is_empty())
    {
        std::fs::create_dir_all(dir)
            .map_err(|e| StoreError::Unavailable(format!("cannot create {}: {e}", dir.display())))?;
    }
    if query.split('&').any(|kv| kv.starts_with("mode=")) {
        return Ok(url.to_owned());
    }
    let separator = if query.is_empty() { "?" } else { "&" };
    Ok(format!("{url}{separator}mode=rwc"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// Under steady writes and readers always reading, the WAL starts again from its first frame
    /// at the checkpoints: it stays a few thousand frames long instead of taking every commit.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wal_starts_again_while_readers_read() {
        sqlx::any::install_default_drivers();
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("wal.db");
        let tuning = Tuning { cache_kib: 2048, commits: Commits::Unhurried };
        let options = AnyPoolOptions::new().max_connections(6);
        let url = format!("sqlite://{}", file.display());
        let pool = open(&url, &StorageConfig::default(), options, tuning).await.expect("open");
        pool.execute("CREATE TABLE pages (id INTEGER PRIMARY KEY, body BLOB NOT NULL)").await.expect("table");
        let stop = Arc::new(AtomicBool::new(false));
        // Readers one after another on snapshots a few milliseconds long, as the workers' are:
        // one of them is nearly always on the WAL.
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let (pool, stop) = (pool.clone(), stop.clone());
                tokio::spawn(async move {
                    let read = "SELECT COUNT(*), SUM(LENGTH(body)) FROM pages";
                    while !stop.load(Ordering::Relaxed) {
                        let mut snapshot = pool.begin().await.expect("begin");
                        sqlx::query(read).fetch_one(&mut *snapshot).await.expect("read");
                        tokio::time::sleep(std::time::Duration::from_millis(4)).await;
                        sqlx::query(read).fetch_one(&mut *snapshot).await.expect("read");
                        snapshot.commit().await.expect("end");
                    }
                })
            })
            .collect();
        let gate = tokio::sync::Mutex::new(());
        // 64 MB written, 16 pages a commit: the WAL would take all of it without restarts.
        for n in 0..1024 {
            let _writers = gate.lock().await;
            sqlx::query("INSERT INTO pages (body) VALUES (randomblob(65536))").execute(&pool).await.expect("write");
            drop(_writers);
            if n % 16 == 15 {
                checkpoint(&pool, &gate).await.expect("checkpoint");
            }
        }
        stop.store(true, Ordering::Relaxed);
        for reader in readers {
            reader.await.expect("reader");
        }
        let wal = std::fs::metadata(dir.path().join("wal.db-wal")).expect("wal").len();
        assert!(wal < 16 << 20, "the WAL grew to {wal} bytes");
    }

    /// Every connection holds the process to the configured budget (the pipeline's and the
    /// inbox's alike: they are opened here).
    #[tokio::test]
    async fn the_memory_sqlite_may_keep_is_the_configured_budget() {
        sqlx::any::install_default_drivers();
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("budget.db").display());
        let config = StorageConfig::default();
        let pool = open(&url, &config, AnyPoolOptions::new().max_connections(2), MAIN).await.expect("open");
        for _ in 0..2 {
            let mut conn = pool.acquire().await.expect("a connection");
            let limit: i64 = sqlx::query_scalar("PRAGMA soft_heap_limit").fetch_one(&mut *conn).await.expect("limit");
            assert_eq!(limit, 8 << 20, "the default budget, 8 MiB");
        }
    }

    #[test]
    fn urls_gain_create_mode_and_keep_explicit_modes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("nested/deeper/db.sqlite");
        let url = format!("sqlite://{}", file.display());
        assert_eq!(prepare_url(&url).expect("valid"), format!("{url}?mode=rwc"));
        assert!(file.parent().is_some_and(|p| p.is_dir()), "folder created");
        assert_eq!(prepare_url("sqlite::memory:?mode=ro").expect("valid"), "sqlite::memory:?mode=ro");
        assert!(prepare_url("sqlite://").is_err());
        assert!(prepare_url("postgres://x").is_err());
    }
}
