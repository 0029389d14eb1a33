//! Removing dedupe records whose window has passed (IDS §VIII.C).

use time::OffsetDateTime;

use crate::store::Dedupe;
use crate::store::StoreError;
use crate::store::rows::to_ms;

impl Dedupe<'_> {
    /// Deletes expired records of finished commands; a command still under way keeps its
    /// reservation past its window, so that a late duplicate can never run beside it.
    pub async fn purge_expired(self, now: OffsetDateTime) -> Result<u64, StoreError> {
        let done = sqlx::query("DELETE FROM dedupe_records WHERE ttl_expires_at <= $1 AND status <> 'in_progress'")
            .bind(to_ms(now))
            .execute(self.store.pool())
            .await?;
        Ok(done.rows_affected())
    }

    /// How many reservations exist for a tenant's key (0 or 1); for tests and diagnostics.
    pub async fn count(self, tenant_id: &str, idempotency_key: &str) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM dedupe_records WHERE tenant_id = $1 AND idempotency_key = $2")
            .bind(tenant_id)
            .bind(idempotency_key)
            .fetch_one(self.store.pool())
            .await?;
        crate::store::rows::int(&row, "n")
    }
}
