//! What is shown about a command, to the operator API and to the chat alike (SMCL §X): where it
//! is, since when, how it ended and why, what may be done next. Personal data is masked.

use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::domain::command::ShortRef;
use crate::domain::evidence::mask;
use crate::service::engine::Engine;
use crate::service::security::Policy;
use crate::store::{StoreError, StoredCommand};

pub fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

/// The status document of `command`; `full` adds its deliveries, transitions and recoveries.
pub async fn status(
    engine: &Engine,
    policy: &Policy,
    command: &StoredCommand,
    full: bool,
) -> Result<Value, StoreError> {
    let store = engine.store();
    let (recovery_actions, _) = crate::service::recovery::allowed_actions(store, policy, command).await?;
    let id = command.envelope.command_id;
    let state = command.lifecycle.state;
    let mut envelope = serde_json::to_value(&command.envelope).unwrap_or(Value::Null);
    envelope["actor_id"] = mask(command.envelope.actor_id.as_str()).into();
    envelope["conversation_id"] = mask(command.envelope.conversation_id.as_str()).into();
    let mut document = json!({
        "command_id": id,
        "ref": ShortRef::of(id),
        "state": state,
        "terminal": state.is_terminal(),
        "outcome": state.is_terminal().then_some(state),
        "reason_code": command.reason_code,
        "last_transition_at": rfc3339(command.updated_at),
        "created_at": rfc3339(command.created_at),
        "version": command.version,
        "confirmation": command.lifecycle.confirmation,
        "recovery_actions": recovery_actions,
        "target_command_id": command.envelope.target_command_id,
        "envelope": envelope,
        "links": {
            "self": format!("/v1/commands/{id}"),
            "evidence": format!("/v1/commands/{id}/evidence"),
            "recovery": format!("/v1/commands/{id}/recovery"),
            "trace": format!("/v1/traces/{}", command.envelope.correlation_id),
        },
    });
    if full {
        let deliveries: Vec<Value> = store
            .deliveries().of_command(id)
            .await?
            .iter()
            .map(|d| {
                json!({"target": d.target, "state": d.state, "outcome": d.outcome, "failure_class": d.failure_class})
            })
            .collect();
        document["deliveries"] = deliveries.into();
        document["transitions"] = serde_json::to_value(store.commands().transitions(id).await?).unwrap_or(Value::Null);
        document["recovery_commands"] =
            serde_json::to_value(store.commands().recoveries_of(id).await?).unwrap_or(Value::Null);
    }
    Ok(document)
}
