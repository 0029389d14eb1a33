//! An identity resolver's answers and the lookups under way, shared by every instance: answers by
//! address (with when they expire), and one lookup per address whose messages are parked in the
//! inbox (`store::inbox::parked`), each leased by one instance at a time.

use time::OffsetDateTime;

use crate::domain::command::{ActorId, TenantId};
use crate::domain::directory::Resolved;
use crate::store::decoded::{decode_all, decoded};
use crate::store::rows::{from_ms, int, opt_text, to_ms};
use crate::store::{Adopted, Identities, ParkedSender, StoreError};

/// What the resolver said about an address, and until when it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredAnswer {
    /// `None`: "unknown".
    pub person: Option<Resolved>,
    pub expires_at: OffsetDateTime,
}

/// A sender to ask the resolver about, for a message parked in the inbox.
#[derive(Debug, Clone)]
pub struct NewLookup<'a> {
    pub tenant: &'a TenantId,
    pub channel: &'a str,
    pub provider_message_id: &'a str,
    pub address: &'a str,
    pub profile_name: Option<&'a str>,
    pub asked_at: OffsetDateTime,
}

decoded! {
    /// A lookup this instance holds the lease of.
    #[derive(Debug, Clone, PartialEq)]
    pub struct ClaimedLookup {
        pub tenant: String,
        pub address: String,
        pub channel: String,
        pub profile_name: Option<String>,
        pub first_asked_at: OffsetDateTime,
        pub attempts: i64,
    }
}

impl Identities<'_> {
    /// The latest answer about `address`, fresh or not.
    pub async fn answer(self, tenant: &TenantId, address: &str) -> Result<Option<StoredAnswer>, StoreError> {
        let row = sqlx::query(
            "SELECT actor_id, name, roles, locale, expires_at FROM identity_answers
             WHERE tenant_id = $1 AND address = $2",
        )
        .bind(tenant.as_str())
        .bind(address)
        .fetch_optional(&mut *self.store.reader().await?)
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(StoredAnswer { person: resolved(&row)?, expires_at: from_ms(int(&row, "expires_at")?)? }))
    }

    /// The person the latest answer naming `actor` gave (for their commands decided later).
    pub async fn person(self, tenant: &TenantId, actor: &str) -> Result<Option<Resolved>, StoreError> {
        let row = sqlx::query(
            "SELECT actor_id, name, roles, locale FROM identity_answers WHERE tenant_id = $1 AND actor_id = $2
             ORDER BY answered_at DESC LIMIT 1",
        )
        .bind(tenant.as_str())
        .bind(actor)
        .fetch_optional(&mut *self.store.reader().await?)
        .await?;
        row.map(|row| resolved(&row)).transpose().map(Option::flatten)
    }

    /// Asks the resolver about the sender of a message (once per address); `false`, asking
    /// nothing, when the message was handled already (a redelivery: the inbox takes a provider's
    /// late retry again once the first copy was admitted and forgotten).
    pub async fn ask_about(self, lookup: &NewLookup<'_>) -> Result<bool, StoreError> {
        let mut tx = self.store.begin().await?;
        let handled =
            sqlx::query("SELECT 1 AS one FROM inbound_messages WHERE channel = $1 AND provider_message_id = $2")
                .bind(lookup.channel)
                .bind(lookup.provider_message_id)
                .fetch_optional(&mut *tx)
                .await?;
        if handled.is_some() {
            tx.rollback().await?;
            return Ok(false);
        }
        sqlx::query(
            "INSERT INTO identity_lookups (tenant_id, address, channel, profile_name, first_asked_at, attempts,
               next_attempt_at, lease_until) VALUES ($1, $2, $3, $4, $5, 0, $5, 0)
             ON CONFLICT (tenant_id, address) DO NOTHING",
        )
        .bind(lookup.tenant.as_str())
        .bind(lookup.address)
        .bind(lookup.channel)
        .bind(lookup.profile_name)
        .bind(to_ms(lookup.asked_at))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Leases up to `limit` lookups that are due until `until`.
    pub async fn claim(
        self,
        now: OffsetDateTime,
        until: OffsetDateTime,
        limit: i64,
    ) -> Result<Vec<ClaimedLookup>, StoreError> {
        let mut tx = self.store.begin().await?;
        let rows = sqlx::query(
            "UPDATE identity_lookups SET lease_until = $1, attempts = attempts + 1
             WHERE lease_until <= $2 AND (tenant_id, address) IN (
               SELECT tenant_id, address FROM identity_lookups
               WHERE next_attempt_at <= $2 AND lease_until <= $2 ORDER BY next_attempt_at LIMIT $3)
             RETURNING tenant_id AS tenant, address, channel, profile_name, first_asked_at, attempts",
        )
        .bind(to_ms(until))
        .bind(to_ms(now))
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        decode_all(&rows)
    }

    /// Keeps the resolver's answer about `address` until `expires_at`.
    pub async fn answered(
        self,
        (tenant, address): (&TenantId, &str),
        person: Option<&Resolved>,
        (now, expires_at): (OffsetDateTime, OffsetDateTime),
    ) -> Result<(), StoreError> {
        let roles = person.map(|p| serde_json::to_string(&p.roles)).transpose();
        let roles = roles.map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let mut tx = self.store.begin().await?;
        sqlx::query(
            "INSERT INTO identity_answers (tenant_id, address, actor_id, name, roles, locale, answered_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (tenant_id, address) DO UPDATE SET actor_id = $3, name = $4, roles = $5, locale = $6,
               answered_at = $7, expires_at = $8",
        )
        .bind(tenant.as_str())
        .bind(address)
        .bind(person.map(|p| p.id.as_str()))
        .bind(person.map(|p| p.name.as_str()))
        .bind(roles)
        .bind(person.and_then(|p| p.locale.as_deref()))
        .bind(to_ms(now))
        .bind(to_ms(expires_at))
        .execute(&mut *tx)
        .await?;
        tx.commit().await
    }

    /// The lookup is asked again at `next`; the lease is let go.
    pub async fn retry_later(
        self,
        tenant: &str,
        address: &str,
        next: OffsetDateTime,
        error: &str,
    ) -> Result<(), StoreError> {
        let mut tx = self.store.begin().await?;
        sqlx::query(
            "UPDATE identity_lookups SET next_attempt_at = $3, lease_until = 0, last_error = $4
             WHERE tenant_id = $1 AND address = $2",
        )
        .bind(tenant)
        .bind(address)
        .bind(to_ms(next))
        .bind(error.chars().take(500).collect::<String>())
        .execute(&mut *tx)
        .await?;
        tx.commit().await
    }

    /// Ends the lookup; while messages from `address` are still parked (they came after the
    /// answer let the others go) it only lets the lease go, and the next pass asks again.
    pub async fn finish(self, tenant: &str, address: &str, still_parked: bool) -> Result<(), StoreError> {
        let sql = if still_parked {
            "UPDATE identity_lookups SET lease_until = 0 WHERE tenant_id = $1 AND address = $2"
        } else {
            "DELETE FROM identity_lookups WHERE tenant_id = $1 AND address = $2"
        };
        let mut tx = self.store.begin().await?;
        sqlx::query(sql).bind(tenant).bind(address).execute(&mut *tx).await?;
        tx.commit().await
    }

    /// A lookup for every sender with parked messages and none (a message parked while its
    /// lookup was being finished, or by an instance that died before asking): nothing parked is
    /// left behind. Returns how many were made.
    pub async fn repair(self, parked: &[ParkedSender], now: OffsetDateTime) -> Result<u64, StoreError> {
        if parked.is_empty() {
            return Ok(0);
        }
        let mut made = 0;
        let mut tx = self.store.begin().await?;
        for sender in parked {
            let inserted = sqlx::query(
                "INSERT INTO identity_lookups (tenant_id, address, channel, profile_name, first_asked_at, attempts,
                   next_attempt_at, lease_until) VALUES ($1, $2, $3, NULL, $4, 0, $5, 0)
                 ON CONFLICT (tenant_id, address) DO NOTHING",
            )
            .bind(&sender.tenant)
            .bind(&sender.address)
            .bind(&sender.channel)
            .bind(to_ms(sender.since))
            .bind(to_ms(now))
            .execute(&mut *tx)
            .await?;
            made += inserted.rows_affected();
        }
        tx.commit().await?;
        Ok(made)
    }

    /// Up to `limit` messages an older version kept for the resolver in `identity_waits`.
    pub async fn left_waiting(self, limit: i64) -> Result<Vec<Adopted>, StoreError> {
        let rows = sqlx::query(
            "SELECT channel, provider_message_id, tenant_id AS tenant, address, conversation_id, payload, received_at
             FROM identity_waits ORDER BY received_at LIMIT $1",
        )
        .bind(limit)
        .fetch_all(self.store.pool())
        .await?;
        decode_all(&rows)
    }

    /// Removes messages from `identity_waits` once the inbox holds them.
    pub async fn forget_left_waiting(self, moved: &[Adopted]) -> Result<(), StoreError> {
        let mut tx = self.store.begin().await?;
        for wait in moved {
            sqlx::query("DELETE FROM identity_waits WHERE channel = $1 AND provider_message_id = $2")
                .bind(&wait.channel)
                .bind(&wait.provider_message_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await
    }
}

fn resolved(row: &sqlx::any::AnyRow) -> Result<Option<Resolved>, StoreError> {
    let Some(id) = opt_text(row, "actor_id")? else { return Ok(None) };
    let id = ActorId::parse(&id).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let roles: Vec<String> = match opt_text(row, "roles")? {
        Some(raw) => serde_json::from_str(&raw).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        None => vec![],
    };
    Ok(Some(Resolved { id, name: opt_text(row, "name")?.unwrap_or_default(), roles, locale: opt_text(row, "locale")? }))
}
