//! A recovery action asked in the chat is checked before the person is asked to confirm it: a
//! reference that names nothing they may see, a target whose state does not allow the action, or
//! a high-risk command the chat cannot prove for is refused at once, with what is allowed, rather
//! than after a confirmation that could never lead anywhere. The check is `recovery::admissible`,
//! which runs again when the action executes (the target may move meanwhile).

use serde_json::Value;

use super::{GATEWAY, Refusal, SEE_ALL, actions, resolve};
use crate::command::registry::CommandSpec;
use crate::command::{Args, ShortRef, TenantId};
use crate::directory::Actor;
use crate::lifecycle::recovery::RecoveryAction;
use crate::recovery::admissible;
use crate::security::Policy;
use crate::security::authz::{self, AuthzDecision};
use crate::store::{Store, StoreError};

/// Why a command is refused before its confirmation: its reason code and what the person hears
/// (the `error` of the `failed` reply).
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub code: &'static str,
    pub detail: Value,
}

/// `None` when `spec` may go on to its confirmation (anything that is not a recovery action
/// passes; someone without its scope is left to authorization, which reveals nothing about the
/// target).
pub async fn precheck(
    store: &Store,
    policy: &Policy,
    tenant: &TenantId,
    actor: &Actor,
    spec: &CommandSpec,
    args: &Args,
) -> Result<Option<Refused>, StoreError> {
    if spec.executor != GATEWAY {
        return Ok(None);
    }
    let Ok(action) = spec.action.parse::<RecoveryAction>() else { return Ok(None) };
    if matches!(authz::decide(spec, &actor.scopes, false), AuthzDecision::Deny { .. }) {
        return Ok(None);
    }
    let reference = args.get("ref").and_then(Value::as_str).unwrap_or_default();
    let sees_all = actor.scopes.contains(SEE_ALL);
    let checked = match resolve(store, tenant, actor.id.as_str(), sees_all, reference).await {
        Ok(target) => admissible(store, policy, &target, action, spec.step_up)
            .await
            .map(drop)
            .map_err(|error| actions::refusal(error, &ShortRef::of(target.envelope.command_id))),
        Err(refusal) => Err(refusal),
    };
    match checked {
        Ok(()) => Ok(None),
        Err(Refusal::Refused { code, detail }) => Ok(Some(Refused { code, detail: super::with_code(code, detail) })),
        Err(Refusal::Store(error)) => Err(error),
    }
}
