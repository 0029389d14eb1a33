//! Rate limits kept in the database, so that every instance on it counts against one budget
//! (GCRA: each key's theoretical arrival time). One statement per check, no transaction.
//! PostgreSQL only (SQLite is one instance and counts in memory).

use time::OffsetDateTime;

use crate::store::rows::{int, to_ms};
use crate::store::{RateLimits, StoreError};

impl RateLimits<'_> {
    /// Takes one from `key`'s budget (one every `interval_ms`, `burst` at once). `Err` holds how
    /// many milliseconds until one more would be allowed.
    pub async fn take(
        self,
        key: &str,
        interval_ms: i64,
        burst: i64,
        now: OffsetDateTime,
    ) -> Result<Result<(), i64>, StoreError> {
        let now = to_ms(now);
        // A connection that cannot be had means the database is unavailable (503), as for a
        // transaction that cannot start.
        let mut conn = self.store.connection().await?;
        let taken = sqlx::query(
            "INSERT INTO rate_limits (key, tat) VALUES ($1, $2 + $3)
             ON CONFLICT (key) DO UPDATE
               SET tat = (CASE WHEN rate_limits.tat > $2 THEN rate_limits.tat ELSE $2 END) + $3
               WHERE (CASE WHEN rate_limits.tat > $2 THEN rate_limits.tat ELSE $2 END) + $3 - $2 <= $3 * $4
             RETURNING tat",
        )
        .bind(key)
        .bind(now)
        .bind(interval_ms)
        .bind(burst)
        .fetch_optional(&mut *conn)
        .await?;
        if taken.is_some() {
            return Ok(Ok(()));
        }
        let row = sqlx::query("SELECT tat FROM rate_limits WHERE key = $1").bind(key).fetch_one(&mut *conn).await?;
        let tat = int(&row, "tat")?;
        Ok(Err((tat + interval_ms - now - interval_ms * burst).max(1)))
    }
}
