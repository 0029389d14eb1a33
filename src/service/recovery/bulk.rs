//! Bulk recovery: retry or cancel every command that needs attention, narrowed by a filter,
//! up to a limit. Each command goes through [`recover`] exactly as a single request would (the
//! same gates, its own recovery command and evidence); the answer says what was done and what
//! was refused, and why. The set is the chat's `failures` list ([`needs_attention`]).

use serde::Serialize;
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{Operator, RecoveryError, recover};
use crate::domain::command::TenantId;
use crate::domain::lifecycle::State;
use crate::domain::lifecycle::recovery::RecoveryAction;
use crate::service::engine::Engine;
use crate::service::intake::Ingress;
use crate::service::security::Policy;
use crate::store::{StoreError, StoredCommand};

/// How long a started or authorized command may sit still before it counts as stuck.
pub const STUCK_AFTER: time::Duration = time::Duration::minutes(5);

/// The most commands one bulk request acts on.
pub const MAX_BULK: usize = 200;

/// The tenant's failed commands (timed out ones included) and the stuck ones, newest first: what
/// the chat's `failures` lists and the console's "Needs attention" page shows.
pub async fn needs_attention(
    engine: &Engine,
    tenant: &TenantId,
    now: OffsetDateTime,
    limit: i64,
) -> Result<Vec<StoredCommand>, StoreError> {
    engine.store().commands().failures(tenant, now - STUCK_AFTER, limit).await
}

/// Which of the commands needing attention a bulk request acts on.
#[derive(Debug, Clone, Default)]
pub struct BulkFilter {
    pub state: Option<State>,
    /// (entity, action): a command of the registry.
    pub intent: Option<(String, String)>,
    pub actor: Option<String>,
    pub since: Option<OffsetDateTime>,
    pub until: Option<OffsetDateTime>,
}

impl BulkFilter {
    pub fn admits(&self, command: &StoredCommand) -> bool {
        let e = &command.envelope;
        self.state.is_none_or(|s| command.lifecycle.state == s)
            && self
                .intent
                .as_ref()
                .is_none_or(|(entity, action)| e.intent.entity.as_str() == entity && e.intent.action.as_str() == action)
            && self.actor.as_deref().is_none_or(|a| e.actor_id.as_str() == a)
            && self.since.is_none_or(|t| e.received_at >= t)
            && self.until.is_none_or(|t| e.received_at < t)
    }
}

/// A bulk request: the action, which commands, and at most how many.
#[derive(Debug, Clone)]
pub struct BulkRequest {
    pub action: RecoveryAction,
    pub filter: BulkFilter,
    pub limit: usize,
}

/// One command acted on.
#[derive(Debug, Clone, Serialize, serde::Deserialize, ToSchema)]
pub struct BulkDone {
    pub command_id: Uuid,
    pub recovery_command_id: Uuid,
    /// The recovery command's state.
    pub state: State,
}

/// One command refused, with the reason a single request would have been given.
#[derive(Debug, Clone, Serialize, serde::Deserialize, ToSchema)]
pub struct BulkRefused {
    pub command_id: Uuid,
    /// `recovery_not_allowed`, `recovery_conflict`, `step_up_required` or `try_again`.
    pub code: String,
    pub detail: String,
}

/// What a bulk request did.
#[derive(Debug, Clone, Serialize, serde::Deserialize, ToSchema)]
pub struct BulkSummary {
    pub action: RecoveryAction,
    /// How many commands the filter selected (at most the limit).
    pub selected: usize,
    pub done: Vec<BulkDone>,
    pub refused: Vec<BulkRefused>,
}

/// Acts on up to `request.limit` commands needing attention that its filter admits. A failure of the
/// store on one command is reported for that command ("try_again"); the others go on.
pub async fn recover_many(
    ingress: &Ingress,
    engine: &Engine,
    policy: &Policy,
    operator: &Operator<'_>,
    request: &BulkRequest,
    now: OffsetDateTime,
) -> Result<BulkSummary, StoreError> {
    let BulkRequest { action, filter, limit } = request;
    let action = *action;
    let candidates = needs_attention(engine, operator.tenant, now, 1_000).await?;
    let selected: Vec<Uuid> = candidates
        .iter()
        .filter(|c| filter.admits(c))
        .take((*limit).clamp(1, MAX_BULK))
        .map(|c| c.envelope.command_id)
        .collect();
    let mut summary = BulkSummary { action, selected: selected.len(), done: vec![], refused: vec![] };
    for command_id in selected {
        match recover(ingress, engine, policy, operator, command_id, action, now).await {
            Ok(done) => summary.done.push(BulkDone {
                command_id,
                recovery_command_id: done.recovery_command_id,
                state: done.state,
            }),
            Err(error) => summary.refused.push(refusal(command_id, &error)),
        }
    }
    Ok(summary)
}

fn refusal(command_id: Uuid, error: &RecoveryError) -> BulkRefused {
    let code = match error {
        RecoveryError::NotAllowed { .. } | RecoveryError::NotFound => "recovery_not_allowed",
        RecoveryError::Conflict(_) => "recovery_conflict",
        RecoveryError::StepUpRequired(_) => "step_up_required",
        RecoveryError::Engine(e) => {
            tracing::warn!(error = %e, %command_id, "a bulk recovery could not act on one command");
            "try_again"
        }
    };
    BulkRefused { command_id, code: code.to_owned(), detail: error.to_string() }
}
