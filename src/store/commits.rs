//! When a write transaction's commit is on disk, and the statement that begins one.

use crate::config::BackendKind;

/// When a commit is on disk.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Commits {
    /// Before it returns (SQLite `synchronous = FULL`, PostgreSQL's default): a power loss
    /// cannot take back what was acknowledged. Group commit makes it one flush per batch.
    Durable,
    /// With the next durable commit or flush (SQLite `synchronous = NORMAL` in WAL mode,
    /// PostgreSQL `synchronous_commit = off`): a crash may take back the last of them, never leave
    /// the database inconsistent. For writes whose loss is harmless — work that is done again (a
    /// purge's deletes), a lease (the row is claimed again, as when the lease ends), a rate
    /// limit's arrival times, an inbox row's admitted mark (it reads as a redelivery) —, which
    /// then wait for no flush of their own.
    Unhurried,
}

/// The statement that opens a write transaction on `backend`, its commit as `commits` says. On
/// SQLite a connection's own `synchronous` decides (`sqlite::Tuning`), and `BEGIN IMMEDIATE`
/// takes the write lock at once; on PostgreSQL the setting is the transaction's alone, sent in
/// `BEGIN`'s own round trip (sqlx sends it by the simple protocol, which takes both statements).
pub(crate) fn begin_statement(backend: BackendKind, commits: Commits) -> &'static str {
    match (backend, commits) {
        (BackendKind::Sqlite, _) => "BEGIN IMMEDIATE",
        (BackendKind::Postgres, Commits::Durable) => "BEGIN",
        (BackendKind::Postgres, Commits::Unhurried) => "BEGIN; SET LOCAL synchronous_commit = off",
    }
}
