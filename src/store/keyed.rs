//! A batch's rows found by one key column: the lookups (`KeyLookup`, within a tenant or another
//! column's value) and the statements that touch such rows, one per chunk of keys, each in the
//! form the backend's planner answers from the key's index.

use sqlx::any::AnyRow;

use crate::store::rows::{Marks, PARAMS_PER_STATEMENT, placeholder_list};
use crate::store::texts::{self, padded};

/// A batch's rows read by one key column: `{select} WHERE {column} IN (...)`, one `IN` list per
/// chunk, so that the column's index answers each. Each is a named constant that the store's
/// [`KEY_LOOKUPS`](crate::store::KEY_LOOKUPS) lists, and a test reads their plans: a lookup
/// that SQLite answered from another index would read rows in proportion to the table's
/// history instead of to the batch.
pub struct KeyLookup {
    /// The statement without its WHERE.
    pub select: &'static str,
    /// The key column, which an index must lead with.
    pub column: &'static str,
}

impl KeyLookup {
    /// The rows whose key is one of `values`.
    pub(crate) async fn fetch(
        &self,
        conn: &mut sqlx::AnyConnection,
        values: &[String],
    ) -> Result<Vec<AnyRow>, crate::store::StoreError> {
        fetch_in(conn, self.select, None, self.column, values).await
    }

    /// The statement SQLite runs for `keys` keys (a test reads its plan).
    pub fn sqlite_statement(&self, keys: usize) -> String {
        each_key(self.select, None, self.column, (0, keys), Marks::Positional)
    }

    /// The statement PostgreSQL runs for `keys` keys (a test reads its plan).
    pub fn postgres_statement(&self, keys: usize) -> String {
        each_key(self.select, None, self.column, (0, keys), Marks::Numbered)
    }
}

/// [`KeyLookup::fetch`] within one tenant: `{select} WHERE tenant_id = $1 AND {column} IN (...)`,
/// which an index on `(tenant_id, {column})` answers.
pub(crate) async fn fetch_tenant_in(
    conn: &mut sqlx::AnyConnection,
    select: &str,
    tenant: &str,
    column: &str,
    values: &[String],
) -> Result<Vec<AnyRow>, crate::store::StoreError> {
    fetch_in(conn, select, Some(("tenant_id", tenant)), column, values).await
}

/// The rows of `select` (those whose `within` column holds its value too, when given) whose
/// `column` is one of `values`, one statement per chunk of them.
pub(crate) async fn fetch_in<V: AsRef<str>>(
    conn: &mut sqlx::AnyConnection,
    select: &str,
    within: Option<(&str, &str)>,
    column: &str,
    values: &[V],
) -> Result<Vec<AnyRow>, crate::store::StoreError> {
    let marks = Marks::for_connection(conn);
    let condition = within.map(|(within, _)| equals_first(within, marks));
    let mut rows = vec![];
    for chunk in values.chunks(PARAMS_PER_STATEMENT) {
        let keys = (usize::from(within.is_some()), texts::padded_len(chunk.len()));
        let query = sqlx::query(sqlx::AssertSqlSafe(each_key(select, condition.as_deref(), column, keys, marks)));
        let query = within.into_iter().fold(query, |query, (_, value)| query.bind(value));
        rows.extend(padded(chunk).fold(query, |query, value| query.bind(value.as_ref())).fetch_all(&mut *conn).await?);
    }
    Ok(rows)
}

/// `{column} = $1`: the condition a keyed statement's first value is bound to.
fn equals_first(column: &str, marks: Marks) -> String {
    format!("{column} = {}", marks.mark(1))
}

/// `select`'s rows (those meeting `condition` too, when given) whose `column` is one of `count`
/// keys, their marks after the first `offset`. On SQLite an `IN` list, which its planner answers
/// from the key's index. On PostgreSQL each key joined to `select` (`LATERAL`, fenced by `OFFSET 0`
/// so that the planner does not flatten it back into a join it may hash): without statistics (a
/// young table, a server with autovacuum off) its planner takes each key of an `IN` list for
/// 0.5% of the table and reads the whole table for a batch's 32 keys, a read that grows with the
/// table's history. A key given twice (a padded list) is looked up once; a lookup whose key no
/// index leads with reads the table once per key (the erasure's, one person's few ids).
pub(crate) fn each_key(
    select: &str,
    condition: Option<&str>,
    column: &str,
    (offset, count): (usize, usize),
    marks: Marks,
) -> String {
    if marks == Marks::Positional {
        return where_in(select, condition, column, (offset, count), marks);
    }
    let list = placeholder_list(offset, count, marks);
    let marks = list.trim_start_matches('(').trim_end_matches(')');
    let condition = condition.map(|condition| format!("{condition} AND ")).unwrap_or_default();
    format!(
        "SELECT l.* FROM (SELECT DISTINCT key FROM unnest(ARRAY[{marks}]) AS keys (key)) AS k \
         CROSS JOIN LATERAL ({select} WHERE {condition}{column} = k.key OFFSET 0) AS l"
    )
}

/// `{statement} WHERE tenant_id = $1 AND {column} IN (...)` run for every value (a `DELETE`, an
/// `UPDATE`): how many rows it touched.
pub(crate) async fn execute_tenant_in(
    conn: &mut sqlx::AnyConnection,
    statement: &str,
    tenant: &str,
    column: &str,
    values: &[String],
) -> Result<u64, crate::store::StoreError> {
    let marks = Marks::for_connection(conn);
    let mut touched = 0;
    for chunk in values.chunks(PARAMS_PER_STATEMENT) {
        touched += keyed_in(statement, Some(tenant), column, chunk, marks).execute(&mut *conn).await?.rows_affected();
    }
    Ok(touched)
}

fn keyed_in<'q>(
    statement: &str,
    tenant: Option<&'q str>,
    column: &str,
    chunk: &'q [String],
    marks: Marks,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    let condition = tenant.map(|_| equals_first("tenant_id", marks));
    let keys = (usize::from(tenant.is_some()), texts::padded_len(chunk.len()));
    let query = sqlx::query(sqlx::AssertSqlSafe(where_in(statement, condition.as_deref(), column, keys, marks)));
    let query = match tenant {
        Some(tenant) => query.bind(tenant),
        None => query,
    };
    padded(chunk).fold(query, |query, value| query.bind(value.as_str()))
}

/// `{statement} WHERE [{condition} AND] {column} IN (...)` for `count` values, their marks after
/// the first `offset`.
fn where_in(
    statement: &str,
    condition: Option<&str>,
    column: &str,
    (offset, count): (usize, usize),
    marks: Marks,
) -> String {
    let list = placeholder_list(offset, count, marks);
    match condition {
        Some(condition) => format!("{statement} WHERE {condition} AND {column} IN {list}"),
        None => format!("{statement} WHERE {column} IN {list}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_key_lookup_names_its_tenant_first_when_it_has_one() {
        use super::Marks::*;
        assert_eq!(
            super::where_in("SELECT a FROM t", None, "k", (0, 2), Positional),
            "SELECT a FROM t WHERE k IN (?, ?)"
        );
        let sql = super::where_in("DELETE FROM t", Some("tenant_id = $1"), "k", (1, 2), Numbered);
        assert_eq!(sql, "DELETE FROM t WHERE tenant_id = $1 AND k IN ($2, $3)");
    }
}
