//! Reading typed values back out of `AnyRow`s, and the time representation both backends share.

use std::str::FromStr;

use sqlx::Row;
use sqlx::any::AnyRow;
use time::OffsetDateTime;
use uuid::Uuid;

use super::StoreError;

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

/// `($1, $2), ($3, $4)` for `rows` rows of `columns` values: the VALUES list of a multi-row
/// insert, built from numbered placeholders only (every value is bound).
pub(crate) fn values_placeholders(rows: usize, columns: usize) -> String {
    let row = |r: usize| {
        let marks: Vec<String> = (1..=columns).map(|c| format!("${}", r * columns + c)).collect();
        format!("({})", marks.join(", "))
    };
    (0..rows).map(row).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn placeholders_number_every_value_once() {
        assert_eq!(super::values_placeholders(2, 3), "($1, $2, $3), ($4, $5, $6)");
        assert_eq!(super::values_placeholders(1, 1), "($1)");
    }
}
