//! The store's one error type. It says whether the caller should retry: the HTTP edge maps
//! `Unavailable` to 503 and everything else to a non-retryable answer.

use uuid::Uuid;

use crate::domain::lifecycle::State;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached, is locked or timed out: retry later.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// The database answers but cannot write: a full disk, an I/O error, a read-only database.
    /// Retry later; readiness fails while the gateway's own writes meet this (`store::health`).
    #[error("the database cannot write: {0}")]
    CannotWrite(String),
    /// The database refused a value the caller gave (PostgreSQL takes no NUL character in text):
    /// the caller's input, never a reason to retry; nothing was stored.
    #[error("the database refused a value: {0}")]
    InvalidValue(String),
    /// Two transactions crossed (a PostgreSQL deadlock or serialization failure) and this one was
    /// rolled back: doing it again is safe and will most likely pass.
    #[error("concurrent transactions crossed: {0}")]
    Contention(String),
    /// The command moved on since it was read; re-read it and decide again.
    #[error("command {command_id} changed concurrently: expected version {expected}, it is at {actual} ({state})")]
    StaleVersion { command_id: Uuid, expected: i64, actual: i64, state: State },
    #[error("command {0} not found")]
    CommandNotFound(Uuid),
    /// A stored value that does not parse back: a corrupted row or a newer schema.
    #[error("stored data is not readable: {0}")]
    Corrupt(String),
    #[error("{0}")]
    Config(String),
    #[error("migration failed: {0}")]
    Migrate(String),
    #[error("database error: {0}")]
    Database(sqlx::Error),
}

impl StoreError {
    /// Whether doing the same again later may pass: the database was away, full, crossed by
    /// another transaction, or moved on. A refused value or a corrupt row fails the same way
    /// every time.
    pub fn is_retryable(&self) -> bool {
        !matches!(
            self,
            Self::InvalidValue(_) | Self::Corrupt(_) | Self::Config(_) | Self::Migrate(_) | Self::CommandNotFound(_)
        )
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        use sqlx::Error as E;
        match &error {
            E::Io(_) | E::Tls(_) | E::PoolTimedOut | E::PoolClosed | E::WorkerCrashed | E::Protocol(_) => {
                Self::Unavailable(error.to_string())
            }
            E::Database(db) if matches!(db.code().as_deref(), Some("40001" | "40P01")) => {
                Self::Contention(error.to_string())
            }
            E::Database(db) if cannot_write(db.code().as_deref()) => Self::CannotWrite(error.to_string()),
            // character_not_in_repertoire: a NUL in text.
            E::Database(db) if db.code().as_deref() == Some("22021") => Self::InvalidValue(error.to_string()),
            E::Database(db) if is_transient(db.code().as_deref()) => Self::Unavailable(error.to_string()),
            _ => Self::Database(error),
        }
    }
}

/// SQLite busy/locked, PostgreSQL shutdown, too many connections and connection loss: conditions
/// that pass, so the caller should retry.
fn is_transient(code: Option<&str>) -> bool {
    matches!(code, Some("5" | "6" | "261" | "517" | "57P01" | "57P02" | "57P03" | "53300"))
        || code.is_some_and(|c| c.starts_with("08"))
}

/// A full disk, an I/O error or a read-only database, on either backend: PostgreSQL's
/// `disk_full`, `io_error` and `read_only_sql_transaction`, SQLite's FULL, IOERR and READONLY.
fn cannot_write(code: Option<&str>) -> bool {
    matches!(code, Some("53100" | "58030" | "25006"))
        || code
            .and_then(|c| c.parse::<i32>().ok())
            .is_some_and(|c| matches!(c & 0xff, SQLITE_READONLY | SQLITE_IOERR | SQLITE_FULL))
}

/// SQLite's primary result codes (the extended ones carry them in their low byte).
const SQLITE_READONLY: i32 = 8;
const SQLITE_IOERR: i32 = 10;
const SQLITE_FULL: i32 = 13;
