//! Locks on what mutations change (issue #47): a row per tenant and resource, held by one command
//! from its admission until it ends. Taken in the admission's transaction ([`take_lock`], or a
//! group commit's one statement), released in the transaction that ends the command
//! ([`release_locks`], beside the dedupe record's settling, which every end goes through), or by
//! an operator, with the evidence of it. The store says who holds what; what the person hears is
//! the service's choice.

use sqlx::AnyConnection;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::TenantId;
use crate::domain::evidence::EvidenceDraft;
use crate::domain::locks::Resource;
use crate::store::evidence::append_all;
use crate::store::named::{self, Row, row};
use crate::store::rows::{Marks, from_ms, int, placeholder_list, text, to_ms, uuid};
use crate::store::texts::{padded, padded_len};
use crate::store::{Locks, StoreError, TransitionWrite};

pub(crate) const LOCKS: &str = "resource_locks";

/// Taken, or left to the command that holds it: the rows inserted come back.
pub(crate) const TAKE_TAIL: &str = "ON CONFLICT (tenant_id, resource) DO NOTHING RETURNING command_id";

/// A resource as it is held.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldLock {
    pub resource: Resource,
    pub command_id: Uuid,
    pub taken_at: OffsetDateTime,
}

pub(crate) fn lock_row(tenant: &str, resource: &Resource, command_id: Uuid, at: OffsetDateTime) -> Row {
    row![
        "tenant_id" => tenant,
        "resource" => resource.as_str(),
        "command_id" => command_id.to_string(),
        "taken_at" => to_ms(at),
    ]
}

/// Takes `resource` for `command_id`: `None` when it is its own now, else the command holding it.
pub(crate) async fn take_lock(
    conn: &mut AnyConnection,
    tenant: &str,
    resource: &Resource,
    command_id: Uuid,
    at: OffsetDateTime,
) -> Result<Option<Uuid>, StoreError> {
    let taken = named::insert(conn, LOCKS, vec![lock_row(tenant, resource, command_id, at)], TAKE_TAIL).await?;
    if !taken.is_empty() {
        return Ok(None);
    }
    let holder = sqlx::query("SELECT command_id FROM resource_locks WHERE tenant_id = $1 AND resource = $2")
        .bind(tenant)
        .bind(resource.as_str())
        .fetch_optional(&mut *conn)
        .await?;
    match holder {
        Some(row) => Ok(Some(uuid(&row, "command_id")?)),
        // Released between the two statements: the admission is tried again, whole.
        None => Err(StoreError::Contention(format!("the lock on {resource} changed hands meanwhile"))),
    }
}

impl TransitionWrite {
    /// The command whose lock this move releases: one that may hold one, ending. Every way a
    /// command that may hold a lock ends is a move (`apply_transition`, a step batch); a command
    /// its first moves end never took one.
    pub(crate) fn releases(&self) -> Option<Uuid> {
        (self.may_hold_lock && self.transition.to.is_terminal()).then_some(self.command_id)
    }
}

/// The outbox kind of a command waiting its turn for a resource (`lock = "wait"`); its
/// destination is the resource, and a release makes it due at once.
pub const LOCK_WAIT_KIND: &str = "lock_wait";

/// Releases whatever the commands that just ended held, and wakes the commands waiting for it.
pub(crate) async fn release_locks(conn: &mut AnyConnection, ended: &[Uuid]) -> Result<(), StoreError> {
    if ended.is_empty() {
        return Ok(());
    }
    let marks = placeholder_list(0, padded_len(ended.len()), Marks::for_connection(conn));
    let sql = format!("DELETE FROM resource_locks WHERE command_id IN {marks} RETURNING tenant_id, resource");
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for id in padded(ended) {
        query = query.bind(id.to_string());
    }
    for released in query.fetch_all(&mut *conn).await? {
        wake_waiters(conn, &text(&released, "tenant_id")?, &text(&released, "resource")?).await?;
    }
    Ok(())
}

/// Makes the commands waiting for `resource` due now: the oldest takes it.
async fn wake_waiters(conn: &mut AnyConnection, tenant: &str, resource: &str) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE outbox SET next_attempt_at = 0 WHERE kind = $1 AND status = 'pending' AND tenant_id = $2 \
         AND destination = $3",
    )
    .bind(LOCK_WAIT_KIND)
    .bind(tenant)
    .bind(resource)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

fn decode(row: &sqlx::any::AnyRow) -> Result<HeldLock, StoreError> {
    let resource = text(row, "resource")?;
    Ok(HeldLock {
        resource: Resource::parse(&resource).ok_or_else(|| StoreError::Corrupt(format!("lock on `{resource}`")))?,
        command_id: uuid(row, "command_id")?,
        taken_at: from_ms(int(row, "taken_at")?)?,
    })
}

impl Locks<'_> {
    /// The tenant's locks, oldest first.
    pub async fn held(self, tenant: &TenantId, limit: i64) -> Result<Vec<HeldLock>, StoreError> {
        let rows = sqlx::query(
            "SELECT resource, command_id, taken_at FROM resource_locks WHERE tenant_id = $1
             ORDER BY taken_at, resource LIMIT $2",
        )
        .bind(tenant.as_str())
        .bind(limit)
        .fetch_all(self.store.pool())
        .await?;
        rows.iter().map(decode).collect()
    }

    /// Who holds `resource`, if anyone.
    pub async fn holder(self, tenant: &TenantId, resource: &Resource) -> Result<Option<HeldLock>, StoreError> {
        let row = sqlx::query(
            "SELECT resource, command_id, taken_at FROM resource_locks WHERE tenant_id = $1 AND resource = $2",
        )
        .bind(tenant.as_str())
        .bind(resource.as_str())
        .fetch_optional(self.store.pool())
        .await?;
        row.as_ref().map(decode).transpose()
    }

    /// An operator's release of `held`, with its evidence in the tenant's chain (its id); `None`
    /// (nothing written) when the lock is no longer `held` (released, or taken by another command).
    pub async fn release(
        self,
        tenant: &TenantId,
        held: &HeldLock,
        evidence: &EvidenceDraft,
        at: OffsetDateTime,
    ) -> Result<Option<Uuid>, StoreError> {
        let mut tx = self.store.begin().await?;
        let done = sqlx::query("DELETE FROM resource_locks WHERE tenant_id = $1 AND resource = $2 AND command_id = $3")
            .bind(tenant.as_str())
            .bind(held.resource.as_str())
            .bind(held.command_id.to_string())
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(None);
        }
        wake_waiters(&mut tx, tenant.as_str(), held.resource.as_str()).await?;
        let ids = append_all(&mut tx, tenant.as_str(), std::slice::from_ref(evidence), at).await?;
        tx.commit().await?;
        Ok(ids.first().copied())
    }
}
