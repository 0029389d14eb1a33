//! The operator API's `Idempotency-Key` records.

use time::OffsetDateTime;

use crate::store::ApiKeys;
use crate::store::StoreError;
use crate::store::rows::{opt_int, opt_text, text, to_ms};

/// What a request with an idempotency key may do.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyClaim {
    /// First use: run it, then `finish_api_key`.
    Fresh,
    /// The same request was answered: this is its answer.
    Replay { status: u16, response: String },
    /// The same request is still running.
    InProgress,
    /// The key was used for a different request.
    Mismatch,
}

impl ApiKeys<'_> {
    pub async fn claim(
        self,
        tenant: &str,
        key: &str,
        request_hash: &str,
        now: OffsetDateTime,
    ) -> Result<KeyClaim, StoreError> {
        let mut tx = self.store.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO api_idempotency (tenant_id, key, request_hash, created_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (tenant_id, key) DO NOTHING",
        )
        .bind(tenant)
        .bind(key)
        .bind(request_hash)
        .bind(to_ms(now))
        .execute(&mut *tx)
        .await?;
        if inserted.rows_affected() == 1 {
            tx.commit().await?;
            return Ok(KeyClaim::Fresh);
        }
        let row =
            sqlx::query("SELECT request_hash, status, response FROM api_idempotency WHERE tenant_id = $1 AND key = $2")
                .bind(tenant)
                .bind(key)
                .fetch_one(&mut *tx)
                .await?;
        tx.commit().await?;
        if text(&row, "request_hash")? != request_hash {
            return Ok(KeyClaim::Mismatch);
        }
        match (opt_int(&row, "status")?, opt_text(&row, "response")?) {
            (Some(status), Some(response)) => {
                Ok(KeyClaim::Replay { status: u16::try_from(status).unwrap_or(500), response })
            }
            _ => Ok(KeyClaim::InProgress),
        }
    }

    /// Stores the answer of a fresh request; a failure of ours (5xx) forgets the key instead, so
    /// that the retry the caller should make is not refused.
    pub async fn finish(self, tenant: &str, key: &str, status: u16, response: &str) -> Result<(), StoreError> {
        let mut tx = self.store.begin().await?;
        if status >= 500 {
            sqlx::query("DELETE FROM api_idempotency WHERE tenant_id = $1 AND key = $2")
                .bind(tenant)
                .bind(key)
                .execute(&mut *tx)
                .await?;
        } else {
            sqlx::query("UPDATE api_idempotency SET status = $3, response = $4 WHERE tenant_id = $1 AND key = $2")
                .bind(tenant)
                .bind(key)
                .bind(i64::from(status))
                .bind(response)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await
    }
}
