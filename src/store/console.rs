//! The operator console's sessions and the figures its overview draws.

use time::OffsetDateTime;

use crate::domain::command::TenantId;
use crate::domain::lifecycle::{CommandKind, State};
use crate::store::decoded::{decode_all, decoded};
use crate::store::rows::{from_ms, int, parsed, text, to_ms};
use crate::store::{Console, StoreError};

/// A console session as stored: who signed in, what they may do, until when.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsoleSession {
    pub tenant_id: String,
    pub issuer: String,
    pub subject: String,
    /// Space-separated, as the token granted them.
    pub scopes: String,
    pub csrf_token: String,
    pub expires_at: OffsetDateTime,
}

/// How many of the tenant's commands received in one minute are in one state now.
#[derive(Debug, Clone, PartialEq)]
pub struct MinuteCount {
    /// Minutes since the epoch.
    pub minute: i64,
    pub state: State,
    pub count: i64,
}

decoded! {
    /// A command that ended: when it was received and when it ended, in epoch milliseconds.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct Finished {
        pub state: State,
        pub received_ms: i64,
        pub ended_ms: i64,
        /// A read asks no person anything on its way.
        pub command_kind: CommandKind,
    }
}

impl Console<'_> {
    /// Stores a new session under the hash of its id; sessions already over are removed on the way.
    pub async fn open(self, id_hash: &str, session: &ConsoleSession, now: OffsetDateTime) -> Result<(), StoreError> {
        let mut tx = self.store.begin().await?;
        sqlx::query("DELETE FROM console_sessions WHERE expires_at <= $1").bind(to_ms(now)).execute(&mut *tx).await?;
        sqlx::query(
            "INSERT INTO console_sessions
               (id_hash, tenant_id, issuer, subject, scopes, csrf_token, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(id_hash)
        .bind(&session.tenant_id)
        .bind(&session.issuer)
        .bind(&session.subject)
        .bind(&session.scopes)
        .bind(&session.csrf_token)
        .bind(to_ms(now))
        .bind(to_ms(session.expires_at))
        .execute(&mut *tx)
        .await?;
        tx.commit().await
    }

    /// The session with this id hash, if it has not ended.
    pub async fn find(self, id_hash: &str, now: OffsetDateTime) -> Result<Option<ConsoleSession>, StoreError> {
        let row = sqlx::query(
            "SELECT tenant_id, issuer, subject, scopes, csrf_token, expires_at FROM console_sessions
             WHERE id_hash = $1 AND expires_at > $2",
        )
        .bind(id_hash)
        .bind(to_ms(now))
        .fetch_optional(self.store.pool())
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(ConsoleSession {
            tenant_id: text(&row, "tenant_id")?,
            issuer: text(&row, "issuer")?,
            subject: text(&row, "subject")?,
            scopes: text(&row, "scopes")?,
            csrf_token: text(&row, "csrf_token")?,
            expires_at: from_ms(int(&row, "expires_at")?)?,
        }))
    }

    /// Ends the operator's sessions but the newest `keep` (their cookies open nothing from now on).
    pub async fn keep_newest(self, issuer: &str, subject: &str, keep: u32) -> Result<u64, StoreError> {
        let mut tx = self.store.begin().await?;
        let done = sqlx::query(
            "DELETE FROM console_sessions WHERE issuer = $1 AND subject = $2 AND id_hash NOT IN
               (SELECT id_hash FROM console_sessions WHERE issuer = $1 AND subject = $2
                ORDER BY created_at DESC, id_hash LIMIT $3)",
        )
        .bind(issuer)
        .bind(subject)
        .bind(i64::from(keep))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected())
    }

    /// Ends a session: its cookie opens nothing from now on.
    pub async fn end(self, id_hash: &str) -> Result<(), StoreError> {
        let mut tx = self.store.begin().await?;
        sqlx::query("DELETE FROM console_sessions WHERE id_hash = $1").bind(id_hash).execute(&mut *tx).await?;
        tx.commit().await
    }

    /// The tenant's commands received since `since`, counted by the minute they arrived and the
    /// state they are in now.
    pub async fn per_minute(self, tenant: &TenantId, since: OffsetDateTime) -> Result<Vec<MinuteCount>, StoreError> {
        let rows = sqlx::query(
            "SELECT received_at / 60000 AS minute, state, COUNT(*) AS n FROM commands
             WHERE tenant_id = $1 AND received_at >= $2 GROUP BY received_at / 60000, state",
        )
        .bind(tenant.as_str())
        .bind(to_ms(since))
        .fetch_all(self.store.pool())
        .await?;
        rows.iter()
            .map(|row| {
                Ok(MinuteCount { minute: int(row, "minute")?, state: parsed(row, "state")?, count: int(row, "n")? })
            })
            .collect()
    }

    /// Up to `limit` of the tenant's commands received since `since` that have ended, newest first.
    pub async fn finished(
        self,
        tenant: &TenantId,
        since: OffsetDateTime,
        limit: i64,
    ) -> Result<Vec<Finished>, StoreError> {
        let rows = sqlx::query(
            "SELECT state, received_at AS received_ms, updated_at AS ended_ms, command_kind FROM commands
             WHERE tenant_id = $1 AND received_at >= $2
               AND state IN ('executed', 'failed', 'rejected', 'canceled', 'compensated')
             ORDER BY command_id DESC LIMIT $3",
        )
        .bind(tenant.as_str())
        .bind(to_ms(since))
        .bind(limit)
        .fetch_all(self.store.pool())
        .await?;
        decode_all(&rows)
    }
}
