//! The built-in recovery actions and agent moves. Each is a mutating command (confirmed, with
//! step-up where the registry says, authorized by scope) whose execution is the very call the
//! operator API makes: `recovery::recover` and `agents::change`.

use serde_json::json;
use time::OffsetDateTime;

use crate::domain::agent::AgentEvent;
use crate::domain::command::ShortRef;
use crate::domain::lifecycle::recovery::RecoveryAction;
use crate::service::agents::AgentChangeError;
use crate::service::engine::EngineError;
use crate::service::ooc::{AgentLine, Answer, Asker, Gateway, Refusal, arg, refused};
use crate::service::recovery::{Operator, RecoveryError, StepUp, recover as run};

/// The operator id recorded for what a person does from the chat.
fn operator_id(asker: &Asker<'_>) -> String {
    format!("chat|{}", asker.actor)
}

/// `retry`, `cancel`, `reprocess`, `compensate <ref>`.
pub(super) async fn recover(
    gateway: &Gateway,
    asker: &Asker<'_>,
    action: RecoveryAction,
    now: OffsetDateTime,
) -> Answer {
    let target = gateway.resolve(asker, arg(asker.command, "ref").unwrap_or_default()).await?;
    // A chat command the registry sends through step-up was proved before it was authorized.
    let proved = gateway.policy.spec_of(asker.command).await?.is_some_and(|spec| spec.step_up);
    let id = operator_id(asker);
    let operator = Operator {
        tenant: asker.tenant,
        id: &id,
        subject: asker.actor,
        reason: "asked in the chat",
        step_up: if proved { StepUp::Proved } else { StepUp::None },
    };
    let target_ref = ShortRef::of(target.envelope.command_id);
    let outcome =
        run(&gateway.ingress, &gateway.engine, &gateway.policy, &operator, target.envelope.command_id, action, now);
    match outcome.await {
        Ok(done) => Ok(json!({
            "action": action,
            "target_ref": target_ref,
            "target_state": done.target_state,
            "recovery_ref": ShortRef::of(done.recovery_command_id),
            "state": done.state,
        })),
        Err(error) => Err(refusal(error, &target_ref)),
    }
}

/// What the person hears when a recovery action on `target_ref` is refused, whether before the
/// confirmation or when it runs.
pub(super) fn refusal(error: RecoveryError, target_ref: &ShortRef) -> Refusal {
    match error {
        RecoveryError::NotFound => refused("unknown_reference", json!({"ref": target_ref})),
        RecoveryError::NotAllowed { state, allowed, .. } => {
            refused("not_allowed", json!({"ref": target_ref, "state": state, "allowed": allowed}))
        }
        RecoveryError::Conflict(message) => refused("conflict", json!({"message": message})),
        RecoveryError::StepUpRequired(message) => refused("step_up_required", json!({"message": message})),
        RecoveryError::Engine(EngineError::Store(error)) => Refusal::Store(error),
        RecoveryError::Engine(error) => refused("internal", json!({"message": error.to_string()})),
    }
}

/// `pause`, `resume <agent>`.
pub(super) async fn agent(gateway: &Gateway, asker: &Asker<'_>, event: AgentEvent, now: OffsetDateTime) -> Answer {
    let name = arg(asker.command, "agent").unwrap_or_default();
    let database = gateway.engine.database();
    match crate::service::agents::change(database, &gateway.policy.agents, name, event, &operator_id(asker), now).await
    {
        Ok(agent) => Ok(AgentLine { agent: name, state: agent.state }.value()),
        Err(error) => Err(agent_refusal(error, name)),
    }
}

/// What the person hears when moving agent `name` is refused, before the confirmation or when
/// it runs.
pub(super) fn agent_refusal(error: AgentChangeError, name: &str) -> Refusal {
    match error {
        AgentChangeError::Unknown(_) => refused("unknown_agent", json!({"agent": name})),
        AgentChangeError::NotAllowed { state, reason } => {
            refused("not_allowed", json!({"agent": name, "state": state, "message": reason, "allowed": []}))
        }
        AgentChangeError::Concurrent => refused("conflict", json!({"message": "the agent changed meanwhile"})),
        AgentChangeError::Store(error) => Refusal::Store(error),
    }
}
