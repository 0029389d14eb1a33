//! A recovery action or agent move asked in the chat is checked before the person is asked to
//! confirm it: a reference that names nothing they may see, a target whose state does not allow
//! the action, a high-risk command the chat cannot prove for, an unknown agent or one the move
//! does not apply to is refused at once, with what is allowed, rather than after a confirmation
//! that could never lead anywhere. The checks are `recovery::admissible` and
//! `agents::admissible`, which run again when the action executes (things may move meanwhile).

use serde_json::Value;

use crate::service::ooc::GATEWAY;
use crate::service::ooc::Operation;

use crate::service::ooc::Refusal;

use crate::service::ooc::SEE_ALL;

use crate::service::ooc::actions;

use crate::domain::command::Args;
use crate::domain::command::ShortRef;
use crate::domain::command::TenantId;
use crate::domain::directory::Actor;
use crate::domain::lifecycle::recovery::RecoveryAction;
use crate::service::agents;
use crate::service::database::Database;
use crate::service::intake::{Refused, ToCheck};
use crate::service::ooc::resolve;
use crate::service::recovery::admissible;
use crate::service::security::Policy;
use crate::service::security::authz;
use crate::service::security::authz::AuthzDecision;
use crate::store::{Store, StoreError};

/// The chat operations' check before a confirmation, handed to intake (`intake::Precheck`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Precheck;

#[async_trait::async_trait]
impl crate::service::intake::Precheck for Precheck {
    /// `None` when `spec` may go on to its confirmation (anything that is not a recovery action or
    /// an agent move passes; someone without its scope is left to authorization, which reveals
    /// nothing about the target).
    async fn refused(
        &self,
        database: &Database,
        policy: &Policy,
        ToCheck { tenant, actor, spec, args }: ToCheck<'_>,
    ) -> Result<Option<Refused>, StoreError> {
        let store = database.store();
        if spec.executor != GATEWAY || matches!(authz::decide(spec, &actor.scopes, false), AuthzDecision::Deny { .. }) {
            return Ok(None);
        }
        let checked = match Operation::of(&spec.entity, &spec.action) {
            Some(Operation::Recover(action)) => {
                recovery(store, policy, tenant, actor, action, spec.step_up, args).await
            }
            Some(Operation::Agent(event)) => {
                let name = args.get("agent").and_then(Value::as_str).unwrap_or_default();
                agents::admissible(database, &policy.agents, name, event)
                    .await
                    .map(drop)
                    .map_err(|error| actions::agent_refusal(error, name))
            }
            _ => return Ok(None),
        };
        match checked {
            Ok(()) => Ok(None),
            Err(Refusal::Refused { code, detail }) => {
                Ok(Some(Refused { code, detail: crate::service::ooc::with_code(code, detail) }))
            }
            Err(Refusal::Store(error)) => Err(error),
        }
    }
}

/// A recovery action: the reference resolves to a command the asker may see, whose state allows
/// the action, with a proof coming when what it runs is risky.
async fn recovery(
    store: &Store,
    policy: &Policy,
    tenant: &TenantId,
    actor: &Actor,
    action: RecoveryAction,
    proving: bool,
    args: &Args,
) -> Result<(), Refusal> {
    let reference = args.get("ref").and_then(Value::as_str).unwrap_or_default();
    let sees_all = actor.scopes.contains(SEE_ALL);
    let target = resolve(store, tenant, actor.id.as_str(), sees_all, reference).await?;
    admissible(store, policy, &target, action, proving)
        .await
        .map(drop)
        .map_err(|error| actions::refusal(error, &ShortRef::of(target.envelope.command_id)))
}
