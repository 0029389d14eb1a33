//! What the executors' layer writes and reads about handing commands over, one door for all of
//! it: the outbox's dispatch and notice rows claimed under a lease and settled, the steps an
//! executor's answer or acknowledgement moves (with their evidence, in batches where they can
//! be), and the deliveries that wait for an acknowledgement.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::TenantId;
use crate::service::database::{Database, StoreError};
use crate::store::Store;

pub use crate::store::{ClaimedMessage, Delivery, DeliveryLogEntry, Handoff, OutboxSettle, StepOutcome, StepWrite};

/// The executors' door (`Database::handover`).
#[derive(Clone, Copy, Debug)]
pub struct Handover<'a>(&'a Store);

impl Database {
    pub fn handover(&self) -> Handover<'_> {
        Handover(self.store())
    }
}

impl Handover<'_> {
    /// Up to `limit` due rows of `kind`, leased for `lease`, in the order they were written.
    pub async fn claim(
        &self,
        kind: &str,
        limit: i64,
        lease: Duration,
        now: OffsetDateTime,
    ) -> Result<Vec<ClaimedMessage>, StoreError> {
        self.0.outbox().claim(kind, limit, lease, now).await
    }

    /// Up to `limit` dispatch rows to work on, leased for `lease`: first those this process's
    /// commits handed over already leased (`Handoff`), then, when none was handed or the table
    /// was last looked at `every` ago, due rows claimed from it (other instances' rows, retries,
    /// rows whose lease ended).
    pub async fn dispatches_due(
        &self,
        limit: i64,
        (lease, every): (Duration, Duration),
        now: OffsetDateTime,
    ) -> Result<Vec<ClaimedMessage>, StoreError> {
        let kind = crate::service::dispatch::DISPATCH_KIND;
        Ok(self.0.take_due(kind, limit, (lease, every), now).await?.0)
    }

    /// Opens the handoff of dispatch rows to this process's dispatcher, which leases for `lease`.
    pub fn open_handoff(&self, lease: Duration) -> Option<Arc<Handoff>> {
        self.0.open_handoff(crate::service::dispatch::DISPATCH_KIND, lease)
    }

    /// Lets go of the leases of handed rows a stopping dispatcher did not take.
    pub async fn release_handed(&self, ids: &[Uuid]) -> Result<(), StoreError> {
        self.0.release_handed(ids).await
    }

    /// What became of claimed rows (sent, to be tried again, given up), in one transaction.
    pub async fn settle(&self, settle: &OutboxSettle, now: OffsetDateTime) -> Result<(), StoreError> {
        self.0.outbox().settle_claimed(settle, now).await
    }

    /// Notified when a row of `kind` is written on this instance.
    pub fn signal(&self, kind: &str) -> Arc<tokio::sync::Notify> {
        self.0.outbox_signal(kind)
    }

    /// The first row of `kind` written for `command_id` to `destination` (the dispatch row a
    /// hook caller is told of).
    pub async fn first_row(&self, command_id: Uuid, kind: &str, destination: &str) -> Result<Option<Uuid>, StoreError> {
        self.0.outbox().first_of(command_id, kind, destination).await
    }

    /// Each step with its evidence, together where they can be: one outcome per step, in order.
    pub async fn commit_steps(&self, steps: &[&StepWrite]) -> Vec<Result<StepOutcome, StoreError>> {
        self.0.commands().commit_steps(steps).await
    }

    pub async fn commit_step(&self, step: &StepWrite) -> Result<StepOutcome, StoreError> {
        self.0.commands().commit_step(step).await
    }

    /// The executors each of `command_ids` was dispatched to.
    pub async fn targets_of(&self, command_ids: &[Uuid]) -> Result<HashMap<Uuid, Vec<String>>, StoreError> {
        self.0.deliveries().dispatch_targets_of(command_ids).await
    }

    /// Acknowledgements that moved nothing (duplicates, refused out-of-order ones), kept in the
    /// delivery's log.
    pub async fn log_events(
        &self,
        delivery: Uuid,
        log: &[DeliveryLogEntry],
        at: OffsetDateTime,
    ) -> Result<(), StoreError> {
        self.0.deliveries().log_events(delivery, log, at).await
    }

    /// Deliveries whose acknowledgement is overdue at `now`, at most `limit`.
    pub async fn overdue(&self, now: OffsetDateTime, limit: i64) -> Result<Vec<Delivery>, StoreError> {
        self.0.deliveries().overdue(now, limit).await
    }

    /// Started commands past their time to live that no executor was handed (their agent was
    /// paused, say), oldest first, at most `limit`.
    pub async fn expired_undispatched(
        &self,
        now: OffsetDateTime,
        limit: i64,
    ) -> Result<Vec<(TenantId, Uuid)>, StoreError> {
        self.0.deliveries().expired_undispatched(now, limit).await
    }
}
