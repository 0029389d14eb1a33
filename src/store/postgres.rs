//! PostgreSQL: several gateway instances share one database; workers claim rows with
//! `FOR UPDATE SKIP LOCKED` so that no row is worked on twice at once.

use sqlx::AnyPool;
use sqlx::any::AnyPoolOptions;

use super::{Dialect, StoreError};
use crate::config::StorageConfig;

pub(super) struct PostgresDialect;

impl Dialect for PostgresDialect {
    fn begin_write(&self) -> &'static str {
        "BEGIN"
    }

    fn claim_outbox_sql(&self) -> &'static str {
        "UPDATE outbox SET locked_until = $1, attempts = attempts + 1, updated_at = $2
         WHERE id IN (SELECT id FROM outbox
                      WHERE status = 'pending' AND next_attempt_at <= $2
                        AND (locked_until IS NULL OR locked_until <= $2)
                      ORDER BY next_attempt_at, id LIMIT $3
                      FOR UPDATE SKIP LOCKED)
         RETURNING id, tenant_id, command_id, kind, destination, payload, attempts"
    }
}

pub(super) async fn open(config: &StorageConfig, options: AnyPoolOptions) -> Result<AnyPool, StoreError> {
    options
        .connect(config.database_url.expose())
        .await
        .map_err(|e| StoreError::Unavailable(format!("cannot open {}: {e}", config.database_url.redacted())))
}
