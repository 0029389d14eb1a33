//! Rows read by name: a struct declared with `decoded!` reads each field from the column of the
//! same name (a query names a column otherwise with `AS`), so that what a row holds is written
//! once, in its type, and a column read is one field. `named.rs` is the same for writing.

use std::collections::BTreeSet;

use serde_json::Value;
use sqlx::any::AnyRow;
use sqlx::{Row as _, ValueRef as _};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::{ActorId, IdempotencyKey, TenantId};
use crate::domain::delivery::{DeliveryOutcome, DeliveryState};
use crate::domain::lifecycle::{CommandKind, State};
use crate::domain::outbound::OutboxMessage;
use crate::domain::registry::approvals::{ApprovalStatus, Vote};
use crate::store::StoreError;
use crate::store::rows::{from_ms, int, json, text};

/// A value read from one column of a row.
pub(crate) trait Column: Sized {
    fn read(row: &AnyRow, column: &str) -> Result<Self, StoreError>;
}

/// A type read from a whole row, each field from its column (declared with `decoded!`).
pub(crate) trait Decoded: Sized {
    fn decode(row: &AnyRow) -> Result<Self, StoreError>;
}

/// Every row of `rows`, decoded.
pub(crate) fn decode_all<T: Decoded>(rows: &[AnyRow]) -> Result<Vec<T>, StoreError> {
    rows.iter().map(T::decode).collect()
}

impl Column for String {
    fn read(row: &AnyRow, column: &str) -> Result<Self, StoreError> {
        text(row, column)
    }
}

impl Column for i64 {
    fn read(row: &AnyRow, column: &str) -> Result<Self, StoreError> {
        int(row, column)
    }
}

/// Times are epoch milliseconds (`rows::to_ms`).
impl Column for OffsetDateTime {
    fn read(row: &AnyRow, column: &str) -> Result<Self, StoreError> {
        from_ms(int(row, column)?)
    }
}

/// JSON is text.
impl Column for Value {
    fn read(row: &AnyRow, column: &str) -> Result<Self, StoreError> {
        json(row, column)
    }
}

/// Lists and sets of names are JSON arrays.
impl Column for Vec<String> {
    fn read(row: &AnyRow, column: &str) -> Result<Self, StoreError> {
        json(row, column)
    }
}

impl Column for BTreeSet<String> {
    fn read(row: &AnyRow, column: &str) -> Result<Self, StoreError> {
        json(row, column)
    }
}

/// NULL is `None`; anything else is read as `T`.
impl<T: Column> Column for Option<T> {
    fn read(row: &AnyRow, column: &str) -> Result<Self, StoreError> {
        let raw = row.try_get_raw(column).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))?;
        if raw.is_null() { Ok(None) } else { T::read(row, column).map(Some) }
    }
}

/// Ids are checked as they are read back, by the parse that checks them at the edge.
macro_rules! checked_ids {
    ($($ty:ty),+ $(,)?) => {$(
        impl Column for $ty {
            fn read(row: &AnyRow, column: &str) -> Result<Self, StoreError> {
                let raw = text(row, column)?;
                <$ty>::parse(&raw).map_err(|e| StoreError::Corrupt(format!("{column} `{raw}`: {e}")))
            }
        }
    )+};
}
checked_ids!(TenantId, ActorId);

/// A key is stored as it was derived; reading it back does not derive it again.
impl Column for IdempotencyKey {
    fn read(row: &AnyRow, column: &str) -> Result<Self, StoreError> {
        Ok(IdempotencyKey::from_stored(text(row, column)?))
    }
}

/// An outgoing message is stored as its typed payload's JSON.
impl Column for OutboxMessage {
    fn read(row: &AnyRow, column: &str) -> Result<Self, StoreError> {
        OutboxMessage::from_payload(&json(row, column)?).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))
    }
}

/// Types stored as their name (`FromStr` reads them back); a store module declares its own.
macro_rules! stored_by_name {
    ($($ty:ty),+ $(,)?) => {$(
        impl $crate::store::decoded::Column for $ty {
            fn read(row: &sqlx::any::AnyRow, column: &str) -> Result<Self, $crate::store::StoreError> {
                $crate::store::rows::parsed(row, column)
            }
        }
    )+};
}
pub(crate) use stored_by_name;
stored_by_name!(Uuid, State, CommandKind, DeliveryState, DeliveryOutcome, ApprovalStatus, Vote);

/// `decoded! { #[derive(..)] pub struct Name { pub field: Type, .. } }`: the struct, and its
/// [`Decoded`] reading each field from the column of its name. `decoded!(impl Name { field, .. })`:
/// the same for a struct declared where the store is not known (the domain's).
macro_rules! decoded {
    (impl $name:path { $($field:ident),+ $(,)? }) => {
        impl $crate::store::decoded::Decoded for $name {
            fn decode(row: &sqlx::any::AnyRow) -> Result<Self, $crate::store::StoreError> {
                Ok(Self { $($field: $crate::store::decoded::Column::read(row, stringify!($field))?),+ })
            }
        }
    };
    ($(#[$meta:meta])* $vis:vis struct $name:ident {
        $($(#[$field_meta:meta])* $field_vis:vis $field:ident : $ty:ty),+ $(,)?
    }) => {
        $(#[$meta])* $vis struct $name { $($(#[$field_meta])* $field_vis $field: $ty),+ }
        $crate::store::decoded::decoded!(impl $name { $($field),+ });
    };
}
pub(crate) use decoded;

#[cfg(test)]
mod tests {
    use sqlx::Connection as _;

    use super::*;

    decoded! {
        #[derive(Debug, PartialEq)]
        struct Sample {
            name: String,
            count: i64,
            state: State,
            at: OffsetDateTime,
            maybe: Option<i64>,
            tags: Vec<String>,
        }
    }

    #[tokio::test]
    async fn each_field_is_read_from_the_column_of_its_name() {
        sqlx::any::install_default_drivers();
        let mut conn = sqlx::AnyConnection::connect("sqlite::memory:").await.expect("an in-memory database");
        let row = sqlx::query(
            "SELECT 7 AS count, 'executed' AS state, 'x' AS name, 1000 AS at, NULL AS maybe, '[\"a\"]' AS tags",
        )
        .fetch_one(&mut conn)
        .await
        .expect("a row");
        let read = Sample::decode(&row).expect("every column read");
        let at = OffsetDateTime::from_unix_timestamp(1).expect("a time");
        let tags = vec!["a".to_owned()];
        assert_eq!(read, Sample { name: "x".into(), count: 7, state: State::Executed, at, maybe: None, tags });
        let unknown = sqlx::query("SELECT 'x' AS name, 7 AS count, 'nowhere' AS state, 1000 AS at, 1 AS maybe")
            .fetch_one(&mut conn)
            .await
            .expect("a row");
        let refused = Sample::decode(&unknown).expect_err("a state that is none of the machine's");
        assert!(refused.to_string().contains("state"), "the column is named: {refused}");
    }
}
