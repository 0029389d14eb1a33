//! Locks as operators see and release them (issue #47): which resource each command under way
//! holds, since when, and an operator's release — a written reason, evidence in the tenant's chain
//! bound to the command that held it, a metric. A release frees the resource only: the command
//! that held it goes on (cancel it to stop it).

use serde::Serialize;
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::domain::command::{ShortRef, TenantId};
use crate::domain::evidence::decision::Decision;
use crate::domain::evidence::{EvidenceDraft, TraceBindings};
use crate::domain::instants::rfc3339;
use crate::domain::lifecycle::EvidenceKind;
use crate::domain::locks::Resource;
use crate::service::engine::Engine;
use crate::store::{HeldLock, StoreError};

/// The fewest characters a release's reason has: a sentence, not a word.
pub const SHORTEST_REASON: usize = 10;

/// One lock.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LockView {
    /// `{entity}:{target}` (`order:1234`).
    pub resource: String,
    pub entity: String,
    pub target: String,
    /// The command that holds it, and its reference as replies show it.
    pub command_id: Uuid,
    #[serde(rename = "ref")]
    pub short_ref: String,
    /// The holder's state (`confirmation_required`, `authz_pending`, `started`, ...).
    pub state: String,
    /// The holder's command (`refund`).
    pub command: String,
    /// Since when (RFC 3339).
    pub taken_at: String,
}

/// What an operator's release came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Released {
    /// Released, with the evidence of it.
    Done { command_id: Uuid, evidence_id: Uuid },
    /// Nothing holds the resource (its command ended, or another release came first).
    NotHeld,
    /// The reason is shorter than [`SHORTEST_REASON`].
    ReasonTooShort,
}

/// The tenant's locks, oldest first, each with its holder.
pub async fn held(engine: &Engine, tenant: &TenantId, limit: i64) -> Result<Vec<LockView>, StoreError> {
    let locks = engine.store().locks().held(tenant, limit).await?;
    let mut views = Vec::with_capacity(locks.len());
    for lock in locks {
        let holder = engine.reads().command(tenant, lock.command_id).await?;
        views.push(view(&lock, holder.as_ref()));
    }
    Ok(views)
}

fn view(lock: &HeldLock, holder: Option<&crate::store::StoredCommand>) -> LockView {
    LockView {
        resource: lock.resource.to_string(),
        entity: lock.resource.entity().to_owned(),
        target: lock.resource.target().to_owned(),
        command_id: lock.command_id,
        short_ref: ShortRef::of(lock.command_id).to_string(),
        state: holder.map_or_else(String::new, |c| c.lifecycle.state.as_str().to_owned()),
        command: holder.map_or_else(String::new, |c| c.asked_name().to_owned()),
        taken_at: rfc3339(lock.taken_at),
    }
}

/// An operator (as their token names them) releases `resource`, for `reason`.
pub async fn release(
    engine: &Engine,
    tenant: &TenantId,
    (resource, operator, reason): (&Resource, &str, &str),
    now: OffsetDateTime,
) -> Result<Released, StoreError> {
    let reason = reason.trim();
    if reason.chars().count() < SHORTEST_REASON {
        return Ok(Released::ReasonTooShort);
    }
    let locks = engine.store().locks();
    let Some(held) = locks.holder(tenant, resource).await? else {
        return Ok(Released::NotHeld);
    };
    let operator = engine.pseudonym(operator);
    let decision = Decision::LockReleased {
        resource: resource.to_string(),
        operator: operator.clone(),
        reason: reason.to_owned(),
    };
    let trace = TraceBindings { actor: Some(operator), ..TraceBindings::default() };
    let mut draft = EvidenceDraft::new(EvidenceKind::LockReleased, held.command_id, trace);
    draft.stage = engine.reads().command(tenant, held.command_id).await?.map(|c| c.lifecycle.state);
    draft.decision = Some(decision.into());
    let Some(evidence_id) = locks.release(tenant, &held, &draft, now).await? else {
        return Ok(Released::NotHeld);
    };
    metrics::counter!("chatgate_lock_releases_total").increment(1);
    Ok(Released::Done { command_id: held.command_id, evidence_id })
}
