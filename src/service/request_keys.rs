//! The operator's `Idempotency-Key`s (the recoveries, the console's forms): a key claimed with
//! what makes its request that request, and the answer kept under it once the request ran. The
//! HTTP edge decides what a claim means for the caller (`http::idempotency`).

use sha2::Digest;
use time::OffsetDateTime;

use crate::service::database::{Database, StoreError};

pub use crate::store::KeyClaim;

/// Claims `key` of `tenant` for the request `fingerprint` stands for (hashed here).
pub async fn claim(
    database: &Database,
    tenant: &str,
    key: &str,
    fingerprint: &[u8],
    now: OffsetDateTime,
) -> Result<KeyClaim, StoreError> {
    let hash = hex::encode(sha2::Sha256::digest(fingerprint));
    database.store().api_keys().claim(tenant, key, &hash, now).await
}

/// Keeps the answer (`status`, `body`) the request under `key` gave, for its retries.
pub async fn finish(database: &Database, tenant: &str, key: &str, status: u16, body: &str) -> Result<(), StoreError> {
    database.store().api_keys().finish(tenant, key, status, body).await
}
