//! An online backup of the SQLite files (`chatgate backup PATH`), taken while the gateway writes.
//!
//! Each file is copied by SQLite's `VACUUM INTO`: one read transaction, so the copy is the file as
//! one commit left it, and a reader in WAL mode holds no writer back. The two files are not one
//! transaction (nothing joins them: `inbox_db`), so the order makes the pair consistent: the inbox
//! first, then the main file. A message the copy of the inbox holds as waiting may be admitted in
//! the copy of the main file (admission finds it recorded after a restore, as after a crash), and
//! a message acknowledged after the inbox's copy was made was never promised by this backup; the
//! other order could keep a message marked admitted in the inbox and missing from the main file.
//!
//! The copies are written into `PATH.partial`, checked (`PRAGMA quick_check`), synced and only
//! then renamed to `PATH`: a `PATH` that exists is a whole backup. PostgreSQL has its own tools
//! (docs/OPERATING.md, "Backups").

use std::path::{Path, PathBuf};

use sqlx::{Connection, SqliteConnection};

use crate::config::{BackendKind, StorageConfig};
use crate::store::StoreError;
use crate::store::inbox_db::inbox_url;
use crate::store::sqlite::file_of;

/// One file of a backup: where it came from, where its copy is and how large the copy is.
#[derive(Debug, Clone)]
pub struct BackupFile {
    pub source: PathBuf,
    pub copy: PathBuf,
    pub bytes: u64,
}

/// Copies the database's files into the folder `into` (which must not exist yet): the inbox's
/// file, then the main one, each under its own name.
pub async fn backup_sqlite(config: &StorageConfig, into: &Path) -> Result<Vec<BackupFile>, StoreError> {
    let main_url = config.database_url.expose();
    if config.database_url.backend().map_err(StoreError::Config)? != BackendKind::Sqlite {
        return Err(StoreError::Config(
            "`chatgate backup` copies SQLite's files; back PostgreSQL up with its own tools \
             (pg_dump --format=custom, or pg_basebackup: docs/OPERATING.md, \"Backups\")"
                .into(),
        ));
    }
    if into.exists() {
        return Err(StoreError::Config(format!("{} exists; a backup goes into a new folder", into.display())));
    }
    let staging = staging_folder(into);
    if staging.exists() {
        // What a backup that did not finish left behind: never a whole backup, by its name.
        std::fs::remove_dir_all(&staging).map_err(|e| unavailable(&staging, &e))?;
    }
    std::fs::create_dir_all(&staging).map_err(|e| unavailable(&staging, &e))?;
    let mut files = Vec::with_capacity(2);
    for url in [inbox_url(main_url)?, main_url.to_owned()] {
        files.push(copy_file(&url, &staging, config.sqlite_busy_timeout_ms).await?);
    }
    std::fs::rename(&staging, into).map_err(|e| unavailable(into, &e))?;
    sync_folder(into.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")))?;
    for file in &mut files {
        file.copy = into.join(file.copy.file_name().unwrap_or_default());
    }
    Ok(files)
}

fn staging_folder(into: &Path) -> PathBuf {
    let mut name = into.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    into.with_file_name(name)
}

/// `VACUUM INTO` one file's copy in `folder`, then checks and syncs the copy.
async fn copy_file(url: &str, folder: &Path, busy_timeout_ms: u64) -> Result<BackupFile, StoreError> {
    let source = file_of(url)?;
    if !source.is_file() {
        return Err(StoreError::Config(format!("{} is not there: nothing to back up", source.display())));
    }
    let copy = folder.join(source.file_name().unwrap_or_default());
    let copy_text = copy.to_str().ok_or_else(|| StoreError::Config(format!("{} is not UTF-8", copy.display())))?;
    // `mode=rw`: the file is opened as it is, never created; the copy is all that is written.
    let mut conn = SqliteConnection::connect(&format!("sqlite://{}?mode=rw", source.display()))
        .await
        .map_err(|e| StoreError::Unavailable(format!("cannot open {}: {e}", source.display())))?;
    sqlx::query(sqlx::AssertSqlSafe(format!("PRAGMA busy_timeout = {busy_timeout_ms}"))).execute(&mut conn).await?;
    sqlx::query("VACUUM INTO ?1").bind(copy_text).execute(&mut conn).await?;
    conn.close().await?;
    check_copy(&copy).await?;
    let file = std::fs::File::open(&copy).map_err(|e| unavailable(&copy, &e))?;
    file.sync_all().map_err(|e| unavailable(&copy, &e))?;
    let bytes = file.metadata().map_err(|e| unavailable(&copy, &e))?.len();
    sync_folder(folder)?;
    Ok(BackupFile { source, copy, bytes })
}

/// SQLite's own check of the copy's pages and indexes.
async fn check_copy(copy: &Path) -> Result<(), StoreError> {
    let mut conn = SqliteConnection::connect(&format!("sqlite://{}?mode=ro", copy.display()))
        .await
        .map_err(|e| StoreError::Unavailable(format!("cannot open the copy {}: {e}", copy.display())))?;
    let verdict: String = sqlx::query_scalar("PRAGMA quick_check").fetch_one(&mut conn).await?;
    conn.close().await?;
    if verdict != "ok" {
        return Err(StoreError::Corrupt(format!("the copy {} does not check: {verdict}", copy.display())));
    }
    Ok(())
}

/// A rename or a new file is durable once its folder is synced.
fn sync_folder(folder: &Path) -> Result<(), StoreError> {
    std::fs::File::open(folder).and_then(|f| f.sync_all()).map_err(|e| unavailable(folder, &e))
}

fn unavailable(path: &Path, error: &std::io::Error) -> StoreError {
    StoreError::Unavailable(format!("{}: {error}", path.display()))
}
