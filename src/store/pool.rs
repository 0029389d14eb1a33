//! What the store's pools share: their connections opened at start, on the runtime that will
//! use them.

use sqlx::AnyPool;

use crate::store::StoreError;

/// Opens `size` connections of `pool` now, on this runtime. A connection belongs to the runtime
/// that opens it: a PostgreSQL socket is driven by its reactor, a SQLite connection is a thread
/// with the priority of the thread that started it.
pub(super) async fn every_connection(pool: &AnyPool, size: u32) -> Result<(), StoreError> {
    let mut opened = Vec::with_capacity(size as usize);
    for _ in 0..size {
        let connection = pool.acquire().await;
        opened.push(connection.map_err(|e| StoreError::Unavailable(format!("cannot open a connection: {e}")))?);
    }
    Ok(())
}
