//! The identity lookups' bookkeeping, behind the ingress: which parked senders to ask a tenant's
//! resolver about now (each lookup leased by one instance at a time), when to ask again, and
//! letting a sender's parked messages go to admission once an answer came or the asking ended.
//! The asking itself is the worker's (`workers::identity`), over HTTP.

use time::OffsetDateTime;

use crate::domain::command::TenantId;
use crate::service::intake::Ingress;
use crate::store::{ClaimedLookup, Released, StoreError};

impl Ingress {
    /// Moves up to `limit` messages an older version kept for the resolver (`identity_waits`)
    /// into the inbox, parked; true once none is left there.
    pub async fn adopt_left_waiting(&self, now: OffsetDateTime, limit: i64) -> Result<bool, StoreError> {
        let identities = self.engine.store().identities();
        let left = identities.left_waiting(limit).await?;
        if left.is_empty() {
            return Ok(true);
        }
        self.engine.store().inbox().adopt(&left, self.inbox().lease(now)).await?;
        identities.forget_left_waiting(&left).await?;
        Ok(false)
    }

    /// Up to `limit` lookups to ask now, held by this instance until `until`; every parked
    /// sender has one first.
    pub async fn lookups_due(
        &self,
        now: OffsetDateTime,
        until: OffsetDateTime,
        limit: i64,
    ) -> Result<Vec<ClaimedLookup>, StoreError> {
        let identities = self.engine.store().identities();
        identities.repair(&self.engine.store().inbox().parked_senders().await?, now).await?;
        identities.claim(now, until, limit).await
    }

    /// The resolver did not answer about `lookup`: asked again at `next`.
    pub async fn ask_again(&self, lookup: &ClaimedLookup, next: OffsetDateTime, error: &str) -> Result<(), StoreError> {
        self.engine.store().identities().retry_later(&lookup.tenant, &lookup.address, next, error).await
    }

    /// Lets the sender's parked messages go to admission, which takes them in their places as
    /// `released` says; then the lookup ends, unless a message was parked meanwhile (the next
    /// pass asks again for it).
    pub async fn let_go(
        &self,
        (tenant, lookup): (&TenantId, &ClaimedLookup),
        released: Released,
    ) -> Result<(), StoreError> {
        let inbox = self.engine.store().inbox();
        let count = inbox.release(&lookup.tenant, &lookup.address, released).await?;
        tracing::debug!(%tenant, count, how = released.as_str(), "parked messages let go");
        self.inbox().wake();
        let still_parked = inbox.parked_from(tenant, &lookup.address).await?;
        self.engine.store().identities().finish(&lookup.tenant, &lookup.address, still_parked).await
    }
}
