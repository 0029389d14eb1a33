//! Rows written by name: each column beside its value (`row!`), so that an insert's column list
//! and its bound values come from one list, and a column added is one line.

use sqlx::any::AnyRow;

use crate::store::StoreError;
use crate::store::rows::{Param, insert_rows};

/// One row: its columns, in order, and a value for each.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    pub(crate) columns: &'static [&'static str],
    pub(crate) values: Vec<Param>,
}

/// `row!["command_id" => id.to_string(), "version" => version, ...]`: a [`Row`].
macro_rules! row {
    ($($column:literal => $value:expr),+ $(,)?) => {
        $crate::store::named::Row {
            columns: &[$($column),+],
            values: vec![$($crate::store::rows::Param::from($value)),+],
        }
    };
}
pub(crate) use row;

/// `INSERT INTO {table} ({columns})` for rows that all name the same columns, and their values.
fn statement(table: &str, rows: Vec<Row>) -> Result<(String, usize, Vec<Vec<Param>>), StoreError> {
    let columns = rows.first().map_or(&[][..], |row| row.columns);
    if rows.iter().any(|row| row.columns != columns) {
        return Err(StoreError::Corrupt(format!("rows for {table} name different columns")));
    }
    let head = format!("INSERT INTO {table} ({})", columns.join(", "));
    Ok((head, columns.len(), rows.into_iter().map(|row| row.values).collect()))
}

/// Writes `rows` into `table` in as few statements as the bound values allow (`insert_rows`),
/// returning what `tail` (`RETURNING ...`) gives back.
pub(crate) async fn insert(
    conn: &mut sqlx::AnyConnection,
    table: &str,
    rows: Vec<Row>,
    tail: &str,
) -> Result<Vec<AnyRow>, StoreError> {
    if rows.is_empty() {
        return Ok(vec![]);
    }
    let (head, columns, rows) = statement(table, rows)?;
    insert_rows(conn, &head, columns, rows, tail).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_column_list_and_the_values_come_from_one_list() {
        let rows = vec![row!["id" => "a", "n" => 1_i64], row!["id" => "b", "n" => Some(2_i64)]];
        let (head, columns, values) = statement("things", rows).expect("one shape");
        assert_eq!((head.as_str(), columns), ("INSERT INTO things (id, n)", 2));
        assert_eq!(values[1], [Param::from("b"), Param::from(2_i64)]);
        let mixed = vec![row!["id" => "a"], row!["id" => "b", "n" => 1_i64]];
        assert!(statement("things", mixed).is_err(), "rows of one statement name the same columns");
    }
}
