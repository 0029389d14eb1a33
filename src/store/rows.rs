//! Reading typed values back out of `AnyRow`s, and the time representation both backends share.

use std::fmt::Write as _;
use std::str::FromStr;

use sqlx::Row;
use sqlx::any::AnyRow;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::store::StoreError;
use crate::store::texts;

/// Times are stored as epoch milliseconds: the one temporal type both backends read through `Any`.
pub(crate) fn to_ms(at: OffsetDateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

pub(crate) fn from_ms(ms: i64) -> Result<OffsetDateTime, StoreError> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map_err(|e| StoreError::Corrupt(format!("timestamp {ms}: {e}")))
}

pub(crate) fn text(row: &AnyRow, column: &str) -> Result<String, StoreError> {
    row.try_get::<String, _>(column).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))
}

pub(crate) fn opt_text(row: &AnyRow, column: &str) -> Result<Option<String>, StoreError> {
    row.try_get::<Option<String>, _>(column).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))
}

pub(crate) fn int(row: &AnyRow, column: &str) -> Result<i64, StoreError> {
    row.try_get::<i64, _>(column).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))
}

pub(crate) fn opt_int(row: &AnyRow, column: &str) -> Result<Option<i64>, StoreError> {
    row.try_get::<Option<i64>, _>(column).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))
}

/// A text column parsed into a domain type (`State`, `TenantId`, `Uuid`, ...).
pub(crate) fn parsed<T>(row: &AnyRow, column: &str) -> Result<T, StoreError>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    let raw = text(row, column)?;
    raw.parse().map_err(|e| StoreError::Corrupt(format!("{column} `{raw}`: {e}")))
}

pub(crate) fn opt_parsed<T>(row: &AnyRow, column: &str) -> Result<Option<T>, StoreError>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    match opt_text(row, column)? {
        Some(raw) => raw.parse().map(Some).map_err(|e| StoreError::Corrupt(format!("{column} `{raw}`: {e}"))),
        None => Ok(None),
    }
}

pub(crate) fn json<T: serde::de::DeserializeOwned>(row: &AnyRow, column: &str) -> Result<T, StoreError> {
    let raw = text(row, column)?;
    serde_json::from_str(&raw).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))
}

pub(crate) fn uuid(row: &AnyRow, column: &str) -> Result<Uuid, StoreError> {
    parsed(row, column)
}

/// How a statement's values are marked: numbered (`$1`, which PostgreSQL needs) or positional
/// (`?`, which SQLite binds without searching its list of parameter names for each one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Marks {
    Numbered,
    Positional,
}

impl Marks {
    /// Whether a batch's multi-row statements are written for one of a few sizes
    /// ([`texts::statement_rows`]) and kept prepared: on PostgreSQL (numbered marks), where each
    /// batch size was a text of its own, parsed and planned by the server at each use. On SQLite a
    /// statement is written for its rows, and only a single row's is kept: padded statements kept
    /// prepared cost its two connections' programs the memory that took the gateway's peak RSS
    /// past 64 MB, for no CPU seen beyond the machine's swings (docs/BENCHMARKS.md, 2026-11-30
    /// seventh session).
    fn batches_sized(self) -> bool {
        self == Self::Numbered
    }

    /// The cheaper marks for the connection's database.
    pub(crate) fn for_connection(conn: &sqlx::AnyConnection) -> Self {
        if conn.backend_name().eq_ignore_ascii_case("sqlite") { Self::Positional } else { Self::Numbered }
    }

    pub(crate) fn mark(self, n: usize) -> String {
        let mut mark = String::new();
        self.write(&mut mark, n);
        mark
    }

    /// Appends the `n`th mark to `sql` (no string of its own: a batch's statement has hundreds).
    fn write(self, sql: &mut String, n: usize) {
        match self {
            // Writing into a `String` cannot fail.
            Self::Numbered => {
                let _ = write!(sql, "${n}");
            }
            Self::Positional => sql.push('?'),
        }
    }

    /// Appends `(mark, mark, ...)`: the marks `first..first + count`.
    fn write_list(self, sql: &mut String, first: usize, count: usize) {
        sql.push('(');
        for n in first..first + count {
            if n > first {
                sql.push_str(", ");
            }
            self.write(sql, n);
        }
        sql.push(')');
    }
}

/// Appends `($1, $2), ($3, $4)` for `rows` rows of `columns` values to `sql`: the VALUES list of
/// a multi-row insert, built from placeholders only (every value is bound), written into the
/// statement itself.
fn write_values(sql: &mut String, rows: usize, columns: usize, marks: Marks) {
    for row in 0..rows {
        if row > 0 {
            sql.push_str(", ");
        }
        marks.write_list(sql, row * columns + 1, columns);
    }
}

/// [`write_values`]'s list on its own, for the tests.
#[cfg(test)]
fn values_placeholders(rows: usize, columns: usize, marks: Marks) -> String {
    let mut sql = String::new();
    write_values(&mut sql, rows, columns, marks);
    sql
}

/// One bound value of a row an insert writes (`named::row!`, `insert_rows`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Param {
    Text(Option<String>),
    Int(Option<i64>),
}

impl From<&str> for Param {
    fn from(value: &str) -> Self {
        Self::Text(Some(value.to_owned()))
    }
}

impl From<String> for Param {
    fn from(value: String) -> Self {
        Self::Text(Some(value))
    }
}

impl From<Option<String>> for Param {
    fn from(value: Option<String>) -> Self {
        Self::Text(value)
    }
}

impl From<Option<&str>> for Param {
    fn from(value: Option<&str>) -> Self {
        Self::Text(value.map(str::to_owned))
    }
}

impl From<i64> for Param {
    fn from(value: i64) -> Self {
        Self::Int(Some(value))
    }
}

impl From<Option<i64>> for Param {
    fn from(value: Option<i64>) -> Self {
        Self::Int(value)
    }
}

impl Param {
    /// A NULL of the same type: a padding row's value (PostgreSQL types a `VALUES` list's
    /// columns from what is bound, and a column's values must agree).
    fn null_like(&self) -> Self {
        match self {
            Self::Text(_) => Self::Text(None),
            Self::Int(_) => Self::Int(None),
        }
    }

    fn is_null(&self) -> bool {
        matches!(self, Self::Text(None) | Self::Int(None))
    }
}

/// Where a batch statement's rows go: into a table, or into the derived table `v` an
/// `UPDATE ... FROM (VALUES ...) AS v` matches rows against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Table,
    Matched,
}

/// `{head} VALUES (...), (...) {tail}` with every value bound: one statement, one round trip,
/// however many rows. Single-row and batch writes build their rows with the same functions.
/// With a `size` ([`texts::statement_rows`]) the statement is written for that many rows, the
/// rest padded with rows of NULLs, and kept prepared: a padding row matches nothing (every
/// `matching` compares `v.column1`), and an insert reads its rows through `WHERE v.column1 IS NOT
/// NULL` — so an insert whose rows do not all have a first value is written for its rows only.
/// Without one, a statement of one row is kept prepared and a batch's is not.
fn multi_insert_marked(
    (head, tail): (&str, &str),
    (columns, size): (usize, Option<usize>),
    mut rows: Vec<Vec<Param>>,
    into: Target,
    marks: Marks,
) -> sqlx::query::Query<'static, sqlx::Any, sqlx::any::AnyArguments> {
    // Only a statement written for a size looks at its rows' first values (not SQLite's).
    let paddable = |rows: &[Vec<Param>]| {
        into == Target::Matched || rows.iter().all(|row| row.first().is_some_and(|v| !v.is_null()))
    };
    let size = size.filter(|size| *size > 1 && paddable(&rows));
    let filtered = size.is_some() && into == Target::Table;
    if let Some(size) = size {
        let nulls: Vec<Param> = rows.first().map(|row| row.iter().map(Param::null_like).collect()).unwrap_or_default();
        rows.resize(size, nulls);
    }
    let mut sql = String::with_capacity(head.len() + tail.len() + rows.len() * columns * 6 + 64);
    sql.push_str(head);
    sql.push_str(if filtered { " SELECT * FROM (VALUES " } else { " VALUES " });
    write_values(&mut sql, rows.len(), columns, marks);
    sql.push_str(if filtered { ") AS v WHERE v.column1 IS NOT NULL " } else { " " });
    sql.push_str(tail);
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).persistent(size.is_some() || rows.len() == 1);
    for row in rows {
        debug_assert_eq!(row.len(), columns, "every row has every column");
        for param in row {
            query = match param {
                // Bound by value: sqlx encodes an `Option<String>` for `Any` by reference, which
                // copies the text (an evidence body, a payload) once more than a `String` does.
                Param::Text(Some(value)) => query.bind(value),
                Param::Text(None) => query.bind(None::<String>),
                Param::Int(value) => query.bind(value),
            };
        }
    }
    query
}

/// Bound values per statement: large enough that a batch is a handful of statements, well under
/// SQLite's and PostgreSQL's limits. (With numbered marks SQLite finds each parameter by a linear
/// search over the names, which made big statements quadratic; `insert_rows` uses positional
/// marks on SQLite for that reason.)
pub(crate) const PARAMS_PER_STATEMENT: usize = 1024;

/// Writes `rows` as multi-row inserts, in as few statements as [`PARAMS_PER_STATEMENT`] allows,
/// returning what their `tail` (`RETURNING ...`) gives back.
pub(crate) async fn insert_rows(
    conn: &mut sqlx::AnyConnection,
    head: &str,
    columns: usize,
    rows: Vec<Vec<Param>>,
    tail: &str,
) -> Result<Vec<AnyRow>, crate::store::StoreError> {
    let statements = multi_inserts(conn, (head, tail), columns, rows, Target::Table);
    fetch_each(conn, statements).await
}

/// Runs `statements` in order, returning the rows each gives back.
async fn fetch_each(
    conn: &mut sqlx::AnyConnection,
    statements: Vec<sqlx::query::Query<'static, sqlx::Any, sqlx::any::AnyArguments>>,
) -> Result<Vec<AnyRow>, crate::store::StoreError> {
    let mut returned = vec![];
    for statement in statements {
        returned.extend(statement.fetch_all(&mut *conn).await?);
    }
    Ok(returned)
}

/// `rows` as [`multi_insert_marked`] statements of at most [`PARAMS_PER_STATEMENT`] values each.
fn multi_inserts(
    conn: &sqlx::AnyConnection,
    (head, tail): (&str, &str),
    columns: usize,
    rows: Vec<Vec<Param>>,
    into: Target,
) -> Vec<sqlx::query::Query<'static, sqlx::Any, sqlx::any::AnyArguments>> {
    let per_statement = (PARAMS_PER_STATEMENT / columns).max(1);
    let marks = Marks::for_connection(conn);
    let mut rows = rows.into_iter().peekable();
    let mut statements = Vec::with_capacity(1);
    while rows.peek().is_some() {
        let chunk: Vec<Vec<Param>> = rows.by_ref().take(per_statement).collect();
        let size = marks.batches_sized().then(|| texts::statement_rows(chunk.len(), per_statement));
        statements.push(multi_insert_marked((head, tail), (columns, size), chunk, into, marks));
    }
    statements
}

/// `($1, $2, ...)` after `offset` values: a parenthesized list of `count` placeholders.
pub(crate) fn placeholder_list(offset: usize, count: usize, marks: Marks) -> String {
    let mut sql = String::with_capacity(count * 6 + 2);
    marks.write_list(&mut sql, offset + 1, count);
    sql
}

/// `UPDATE {table} SET {set} FROM (VALUES ...) AS v WHERE {matching}`: one statement moves many
/// rows, each to its own values (`v.column1`, `v.column2`, ... in both SQLite and PostgreSQL);
/// returns how many rows it moved, which `matching` (a version check, say) may make fewer. Counted
/// by the database (`rows_affected`), not by a row returned for each: on SQLite every row returned
/// is a message from its connection's thread and a row decoded. `matching` compares `v.column1`
/// (a padding row of NULLs matches nothing).
pub(crate) async fn update_rows(
    conn: &mut sqlx::AnyConnection,
    (table, set, matching): (&str, &str, &str),
    columns: usize,
    rows: Vec<Vec<Param>>,
) -> Result<usize, crate::store::StoreError> {
    let mut moved = 0;
    for statement in update_statements(conn, (table, set, matching), columns, rows, "") {
        moved += usize::try_from(statement.execute(&mut *conn).await?.rows_affected()).unwrap_or(usize::MAX);
    }
    Ok(moved)
}

/// [`update_rows`], returning what `returning` (`RETURNING ...`) gives back of each row moved.
pub(crate) async fn update_rows_returning(
    conn: &mut sqlx::AnyConnection,
    (table, set, matching): (&str, &str, &str),
    columns: usize,
    rows: Vec<Vec<Param>>,
    returning: &str,
) -> Result<Vec<AnyRow>, crate::store::StoreError> {
    let statements = update_statements(conn, (table, set, matching), columns, rows, returning);
    fetch_each(conn, statements).await
}

/// `UPDATE {table} SET {set} FROM (VALUES ...) AS v WHERE {matching} {returning}` for `rows`.
fn update_statements(
    conn: &sqlx::AnyConnection,
    (table, set, matching): (&str, &str, &str),
    columns: usize,
    rows: Vec<Vec<Param>>,
    returning: &str,
) -> Vec<sqlx::query::Query<'static, sqlx::Any, sqlx::any::AnyArguments>> {
    let head = format!("UPDATE {table} SET {set} FROM (");
    let tail = format!(") AS v WHERE {matching} {returning}");
    multi_inserts(conn, (&head, &tail), columns, rows, Target::Matched)
}

#[cfg(test)]
mod tests {
    use sqlx::Connection as _;

    use super::*;

    fn rows(ids: std::ops::Range<i64>, note: Option<&str>) -> Vec<Vec<Param>> {
        ids.map(|i| vec![Param::from(format!("r{i}")), Param::from(note), Param::from(i)]).collect()
    }

    async fn count(conn: &mut sqlx::AnyConnection, condition: &str) -> i64 {
        let sql = format!("SELECT COUNT(*) AS n FROM padded WHERE {condition}");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).fetch_one(conn).await.expect("a count");
        int(&row, "n").expect("a number")
    }

    /// A batch writes and moves its own rows, on SQLite (written for its rows) and, with
    /// `CHATGATE_TEST_POSTGRES_URL`, on PostgreSQL (written for more rows than it has, padded with
    /// NULLs, which its `VALUES` list takes only typed as the real rows' values).
    #[tokio::test]
    async fn a_padded_batch_writes_and_moves_its_rows_only() {
        sqlx::any::install_default_drivers();
        let urls = ["sqlite::memory:".to_owned()].into_iter().chain(std::env::var("CHATGATE_TEST_POSTGRES_URL").ok());
        for url in urls {
            let mut conn = sqlx::AnyConnection::connect(&url).await.expect("a database");
            let table = "CREATE TEMPORARY TABLE padded (id TEXT PRIMARY KEY, note TEXT, n BIGINT)";
            sqlx::query(table).execute(&mut conn).await.expect("a table");
            let head = "INSERT INTO padded (id, note, n)";
            // 3 rows (on PostgreSQL written as 4), 17 (as 64): every row stored, each returned once.
            for (ids, written) in [(0..3, 4), (3..20, 64)] {
                let batch = rows(ids.clone(), Some("a"));
                assert_eq!(texts::statement_rows(batch.len(), PARAMS_PER_STATEMENT / 3), written);
                let stored = insert_rows(&mut conn, head, 3, batch, "RETURNING id").await.expect("stored");
                assert_eq!(stored.len(), ids.clone().count(), "{url}");
            }
            // Rows without a first value are written as they are (not padded), not filtered out.
            let first_null = (20..22).map(|i| vec![Param::Text(None), Param::from(format!("r{i}")), Param::from(i)]);
            let stored = insert_rows(&mut conn, "INSERT INTO padded (note, id, n)", 3, first_null.collect(), "").await;
            assert!(stored.as_ref().err().is_none(), "{url}: {:?}", stored.err());
            assert_eq!(count(&mut conn, "id IS NOT NULL").await, 22, "{url}");
            assert_eq!(count(&mut conn, "id IS NULL OR n IS NULL").await, 0, "{url}: no padding row stored");
            // 5 rows moved (on PostgreSQL by a statement written for 16, the rest touching nothing).
            let moves: Vec<Vec<Param>> = (0..5).map(|i| vec![Param::from(format!("r{i}")), Param::from("b")]).collect();
            let moved = update_rows(&mut conn, ("padded", "note = v.column2", "padded.id = v.column1"), 2, moves).await;
            assert_eq!(moved.expect("moved"), 5, "{url}");
            let moves = vec![vec![Param::from("r7"), Param::from("c")], vec![Param::from("r8"), Param::from("c")]];
            let set = ("padded", "note = v.column2", "padded.id = v.column1");
            let returned = update_rows_returning(&mut conn, set, 2, moves, "RETURNING padded.id AS id").await;
            assert_eq!(returned.expect("moved").len(), 2, "{url}");
            assert_eq!(count(&mut conn, "note = 'b'").await, 5, "{url}");
            assert_eq!(count(&mut conn, "note = 'c'").await, 2, "{url}");
            assert_eq!(count(&mut conn, "note = 'a'").await, 13, "{url}");
        }
    }

    #[test]
    fn placeholders_number_every_value_once() {
        use super::Marks::*;
        assert_eq!(super::values_placeholders(2, 3, Numbered), "($1, $2, $3), ($4, $5, $6)");
        assert_eq!(super::values_placeholders(1, 1, Numbered), "($1)");
        assert_eq!(super::values_placeholders(2, 2, Positional), "(?, ?), (?, ?)");
        assert_eq!(super::placeholder_list(1, 2, Numbered), "($2, $3)");
    }
}
