//! PostgreSQL: several gateway instances share one database; workers claim rows with
//! `FOR UPDATE SKIP LOCKED` so that no row is worked on twice at once.

use std::time::Duration;

use sqlx::any::AnyPoolOptions;
use sqlx::{AnyConnection, AnyPool, Connection};

use crate::config::StorageConfig;
use crate::store::outbox::claim_outbox_sql;
use crate::store::{Dialect, StoreError};

pub(super) struct PostgresDialect;

impl Dialect for PostgresDialect {
    fn claim_outbox_sql(&self) -> &'static str {
        claim_outbox_sql!("FOR UPDATE SKIP LOCKED")
    }

    fn texts_of_list(&self) -> &'static str {
        "SELECT json_array_elements_text($1::json)"
    }
}

pub(super) async fn open(
    config: &StorageConfig,
    options: AnyPoolOptions,
    timeout: Duration,
) -> Result<AnyPool, StoreError> {
    let url = config.database_url.expose();
    let cannot_open = |e: &dyn std::fmt::Display| {
        StoreError::Unavailable(format!("cannot open {}: {e}", config.database_url.redacted()))
    };
    // One direct connection first: the pool would retry until its timeout and then report only
    // that it timed out, hiding the cause (refused, unknown database, bad password).
    match tokio::time::timeout(timeout, AnyConnection::connect(url)).await {
        Ok(Ok(probe)) => probe.close().await.map_err(|e| cannot_open(&e))?,
        Ok(Err(e)) => return Err(cannot_open(&e)),
        Err(_) => return Err(cannot_open(&format_args!("no answer within {timeout:?}"))),
    }
    options.connect(url).await.map_err(|e| cannot_open(&e))
}
