//! Messages parked in the inbox for a tenant's identity resolver: admission read them and found
//! a sender only the resolver can name. A parked row keeps its place (its id) and is not claimed
//! until the resolver's answer lets it go; then it is admitted as any other, with that answer.
//! The lookups themselves (`identity_lookups`) are the main database's; on SQLite the inbox is
//! another file, so nothing here shares a transaction with them: a parked row without its lookup
//! is found by `parked_senders` and given one again (src/workers/identity.rs).

use time::OffsetDateTime;

use crate::domain::command::TenantId;
use crate::store::decoded::{decode_all, decoded};
use crate::store::rows::{Param, insert_rows, int, to_ms};
use crate::store::{Inbox, Lease, StoreError};

/// What let a parked message go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// The resolver answered: its answer (kept in `identity_answers`) says who wrote.
    Answered,
    /// The tenant's `give_up_after` passed without an answer: an unknown sender's.
    GivenUp,
}

impl Released {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Answered => "answered",
            Self::GivenUp => "given_up",
        }
    }

    pub fn parse(stored: &str) -> Result<Self, StoreError> {
        match stored {
            "answered" => Ok(Self::Answered),
            "given_up" => Ok(Self::GivenUp),
            other => Err(StoreError::Corrupt(format!("an inbox row released as `{other}`"))),
        }
    }
}

decoded! {
    /// A sender whose messages are parked, and since when the oldest of them waits.
    #[derive(Debug, Clone, PartialEq)]
    pub struct ParkedSender {
        pub tenant: String,
        pub address: String,
        pub channel: String,
        pub since: OffsetDateTime,
    }
}

decoded! {
    /// A message an older version kept for the resolver in a table of its own (`identity_waits`),
    /// moved into the inbox as parked.
    #[derive(Debug, Clone)]
    pub struct Adopted {
        pub channel: String,
        pub provider_message_id: String,
        pub conversation_id: String,
        /// What the provider sent: the inbox reads it again by its channel.
        pub payload: String,
        pub received_at: OffsetDateTime,
        pub tenant: String,
        pub address: String,
    }
}

impl Inbox<'_> {
    /// Parks a message admission read for the resolver's answer about `address`.
    pub async fn park(
        self,
        (channel, provider_message_id): (&str, &str),
        (tenant, address): (&TenantId, &str),
    ) -> Result<(), StoreError> {
        let mut tx = self.store.begin_inbox().await?;
        sqlx::query(
            "UPDATE inbox SET awaiting_tenant = $1, awaiting_address = $2
             WHERE channel = $3 AND provider_message_id = $4 AND admitted_at IS NULL",
        )
        .bind(tenant.as_str())
        .bind(address)
        .bind(channel)
        .bind(provider_message_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await
    }

    /// Whether messages from `address` are parked (a new one from them is parked behind them).
    pub async fn parked_from(self, tenant: &TenantId, address: &str) -> Result<bool, StoreError> {
        let row = sqlx::query(
            "SELECT 1 AS one FROM inbox WHERE awaiting_tenant = $1 AND awaiting_address = $2
             AND admitted_at IS NULL LIMIT 1",
        )
        .bind(tenant.as_str())
        .bind(address)
        .fetch_optional(self.store.inbox_pool())
        .await?;
        Ok(row.is_some())
    }

    /// Lets the messages parked for `address` go, in their places: admission takes them as
    /// `how` says and never parks them again. Returns how many.
    pub async fn release(self, tenant: &str, address: &str, how: Released) -> Result<u64, StoreError> {
        let mut tx = self.store.begin_inbox().await?;
        let released = sqlx::query(
            "UPDATE inbox SET awaiting_tenant = NULL, awaiting_address = NULL, released = $3
             WHERE awaiting_tenant = $1 AND awaiting_address = $2",
        )
        .bind(tenant)
        .bind(address)
        .bind(how.as_str())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(released.rows_affected())
    }

    /// How many messages are parked.
    pub async fn parked(self) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) AS parked FROM inbox WHERE awaiting_address IS NOT NULL")
            .fetch_one(self.store.inbox_pool())
            .await?;
        int(&row, "parked")
    }

    /// Every sender with parked messages.
    pub async fn parked_senders(self) -> Result<Vec<ParkedSender>, StoreError> {
        let rows = sqlx::query(
            "SELECT awaiting_tenant AS tenant, awaiting_address AS address, MIN(channel) AS channel,
             MIN(received_at) AS since FROM inbox
             WHERE awaiting_address IS NOT NULL GROUP BY awaiting_tenant, awaiting_address",
        )
        .fetch_all(self.store.inbox_pool())
        .await?;
        decode_all(&rows)
    }

    /// Removes the parked messages of `names` in `tenant` (an erasure).
    pub async fn forget_parked_of(self, tenant: &TenantId, names: &[String]) -> Result<(), StoreError> {
        let mut tx = self.store.begin_inbox().await?;
        for name in names {
            sqlx::query("DELETE FROM inbox WHERE awaiting_tenant = $1 AND awaiting_address = $2")
                .bind(tenant.as_str())
                .bind(name)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await
    }

    /// Stores `adopted` as parked, `lease.owner`'s; a message the inbox holds (admitted by the
    /// older version when it was put aside) is parked again in its row.
    pub async fn adopt(self, adopted: &[Adopted], lease: Lease<'_>) -> Result<(), StoreError> {
        if adopted.is_empty() {
            return Ok(());
        }
        let rows = adopted
            .iter()
            .map(|a| {
                vec![
                    Param::from(a.channel.as_str()),
                    a.provider_message_id.as_str().into(),
                    a.conversation_id.as_str().into(),
                    a.payload.as_str().into(),
                    to_ms(a.received_at).into(),
                    lease.owner.into(),
                    a.tenant.as_str().into(),
                    a.address.as_str().into(),
                ]
            })
            .collect();
        let head = "INSERT INTO inbox (channel, provider_message_id, conversation_id, payload, received_at, owner, \
                    awaiting_tenant, awaiting_address)";
        let tail = "ON CONFLICT (channel, provider_message_id) DO UPDATE SET admitted_at = NULL, \
                    awaiting_tenant = excluded.awaiting_tenant, awaiting_address = excluded.awaiting_address \
                    RETURNING id";
        let mut tx = self.store.begin_inbox().await?;
        insert_rows(&mut tx, head, 8, rows, tail).await?;
        tx.commit().await
    }
}
