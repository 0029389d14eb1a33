//! An identity resolver's answers and the messages waiting for them, shared by every instance:
//! answers by address (with when they expire), the messages stored whole until the answer comes,
//! and the lookups under way, each leased by one instance at a time.

use serde_json::Value;
use time::OffsetDateTime;

use crate::domain::command::{ActorId, TenantId};
use crate::domain::directory::Resolved;
use crate::store::rows::{from_ms, int, json, opt_text, text, to_ms};
use crate::store::{Identities, StoreError};

/// What the resolver said about an address, and until when it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredAnswer {
    /// `None`: "unknown".
    pub person: Option<Resolved>,
    pub expires_at: OffsetDateTime,
}

/// A message to keep until the resolver answers about its sender.
#[derive(Debug, Clone)]
pub struct NewWait<'a> {
    pub tenant: &'a TenantId,
    pub channel: &'a str,
    pub provider_message_id: &'a str,
    pub address: &'a str,
    pub profile_name: Option<&'a str>,
    pub conversation_id: &'a str,
    pub payload: &'a Value,
    pub received_at: OffsetDateTime,
}

/// A message kept for the resolver, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Waiting {
    pub channel: String,
    pub provider_message_id: String,
    pub conversation_id: String,
    pub payload: Value,
}

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

    /// Whether messages from `address` wait for the resolver (a new one waits behind them).
    pub async fn waiting(self, tenant: &TenantId, address: &str) -> Result<bool, StoreError> {
        let row = sqlx::query("SELECT 1 AS one FROM identity_waits WHERE tenant_id = $1 AND address = $2 LIMIT 1")
            .bind(tenant.as_str())
            .bind(address)
            .fetch_optional(&mut *self.store.reader().await?)
            .await?;
        Ok(row.is_some())
    }

    /// Keeps a message for the resolver and asks about its sender (once per address); `false`
    /// when the message was kept already or handled already (a redelivery: the inbox takes a
    /// provider's late retry again once the first copy was admitted and forgotten).
    pub async fn wait(self, wait: &NewWait<'_>) -> Result<bool, StoreError> {
        let mut tx = self.store.begin().await?;
        let kept = sqlx::query(
            "INSERT INTO identity_waits (channel, provider_message_id, tenant_id, address, conversation_id, payload,
               received_at)
             SELECT $1, $2, $3, $4, $5, $6, $7 WHERE NOT EXISTS
               (SELECT 1 FROM inbound_messages WHERE channel = $1 AND provider_message_id = $2)
             ON CONFLICT (channel, provider_message_id) DO NOTHING",
        )
        .bind(wait.channel)
        .bind(wait.provider_message_id)
        .bind(wait.tenant.as_str())
        .bind(wait.address)
        .bind(wait.conversation_id)
        .bind(wait.payload.to_string())
        .bind(to_ms(wait.received_at))
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO identity_lookups (tenant_id, address, channel, profile_name, first_asked_at, attempts,
               next_attempt_at, lease_until) VALUES ($1, $2, $3, $4, $5, 0, $5, 0)
             ON CONFLICT (tenant_id, address) DO NOTHING",
        )
        .bind(wait.tenant.as_str())
        .bind(wait.address)
        .bind(wait.channel)
        .bind(wait.profile_name)
        .bind(to_ms(wait.received_at))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(kept.rows_affected() == 1)
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
             RETURNING tenant_id, address, channel, profile_name, first_asked_at, attempts",
        )
        .bind(to_ms(until))
        .bind(to_ms(now))
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        rows.iter()
            .map(|row| {
                Ok(ClaimedLookup {
                    tenant: text(row, "tenant_id")?,
                    address: text(row, "address")?,
                    channel: text(row, "channel")?,
                    profile_name: opt_text(row, "profile_name")?,
                    first_asked_at: from_ms(int(row, "first_asked_at")?)?,
                    attempts: int(row, "attempts")?,
                })
            })
            .collect()
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

    /// The messages from `address` that wait, oldest first.
    pub async fn waits(self, tenant: &str, address: &str, limit: i64) -> Result<Vec<Waiting>, StoreError> {
        let rows = sqlx::query(
            "SELECT channel, provider_message_id, conversation_id, payload FROM identity_waits
             WHERE tenant_id = $1 AND address = $2 ORDER BY received_at, provider_message_id LIMIT $3",
        )
        .bind(tenant)
        .bind(address)
        .bind(limit)
        .fetch_all(&mut *self.store.reader().await?)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(Waiting {
                    channel: text(row, "channel")?,
                    provider_message_id: text(row, "provider_message_id")?,
                    conversation_id: text(row, "conversation_id")?,
                    payload: json(row, "payload")?,
                })
            })
            .collect()
    }

    /// A waiting message was handled.
    pub async fn done_waiting(self, channel: &str, provider_message_id: &str) -> Result<(), StoreError> {
        let mut tx = self.store.begin().await?;
        sqlx::query("DELETE FROM identity_waits WHERE channel = $1 AND provider_message_id = $2")
            .bind(channel)
            .bind(provider_message_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    }

    /// Ends the lookup when no message waits any more; `false` when one came meanwhile.
    pub async fn finish(self, tenant: &str, address: &str) -> Result<bool, StoreError> {
        let mut tx = self.store.begin().await?;
        let done = sqlx::query(
            "DELETE FROM identity_lookups WHERE tenant_id = $1 AND address = $2
               AND NOT EXISTS (SELECT 1 FROM identity_waits w WHERE w.tenant_id = $1 AND w.address = $2)",
        )
        .bind(tenant)
        .bind(address)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            // Let the lease go: the next pass takes the message that came.
            sqlx::query("UPDATE identity_lookups SET lease_until = 0 WHERE tenant_id = $1 AND address = $2")
                .bind(tenant)
                .bind(address)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    /// A lookup for every address whose messages wait without one (a message kept while its
    /// lookup was being finished): nothing kept is left behind.
    pub async fn repair(self, now: OffsetDateTime) -> Result<u64, StoreError> {
        let mut tx = self.store.begin().await?;
        let made = sqlx::query(
            "INSERT INTO identity_lookups (tenant_id, address, channel, profile_name, first_asked_at, attempts,
               next_attempt_at, lease_until)
             SELECT tenant_id, address, MIN(channel), NULL, MIN(received_at), 0, $1, 0 FROM identity_waits w
             WHERE NOT EXISTS (SELECT 1 FROM identity_lookups l
                               WHERE l.tenant_id = w.tenant_id AND l.address = w.address)
             GROUP BY tenant_id, address
             ON CONFLICT (tenant_id, address) DO NOTHING",
        )
        .bind(to_ms(now))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(made.rows_affected())
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
