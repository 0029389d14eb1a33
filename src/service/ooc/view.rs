//! What is shown about a command, to the operator API and to the chat alike (SMCL §X): where it
//! is, since when, how it ended and why, what may be done next. Personal data is masked. The
//! types are the API's response bodies too: their OpenAPI schemas are derived from them.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::domain::command::ShortRef;
use crate::domain::command::{CommandEnvelope, IdempotencyClass, Intent, Risk};
use crate::domain::delivery::{DeliveryOutcome, DeliveryState};
use crate::domain::evidence::mask;
use crate::domain::lifecycle::recovery::RecoveryAction;
use crate::domain::lifecycle::{CommandKind, ConfirmationGate, Event, State};
use crate::service::approvals::view::ApprovalView;
use crate::service::engine::Engine;
use crate::service::security::Policy;
use crate::store::{StoreError, StoredCommand, TransitionRecord};

pub use crate::domain::instants::rfc3339;

/// A command's status: where it is, how it ended and why, what may be done next.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CommandStatus {
    pub command_id: Uuid,
    /// The short reference replies show (`R7K2QX`).
    #[serde(rename = "ref")]
    pub short_ref: String,
    pub state: State,
    pub terminal: bool,
    /// The terminal state, once there is one.
    pub outcome: Option<State>,
    pub reason_code: Option<String>,
    /// What the executor said when it failed the command (a Bloodbank agent's `error_message`, an
    /// HTTP executor's `error.message`), beside its code (the single command's view only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason_message: Option<String>,
    #[schema(format = DateTime)]
    pub last_transition_at: String,
    #[schema(format = DateTime)]
    pub created_at: String,
    pub version: i64,
    pub confirmation: ConfirmationGate,
    /// What an operator may ask for now.
    pub recovery_actions: Vec<RecoveryAction>,
    /// The command a recovery command acts on.
    pub target_command_id: Option<Uuid>,
    pub envelope: EnvelopeView,
    pub links: CommandLinks,
    /// Each target's delivery (the single command's view only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deliveries: Option<Vec<DeliveryView>>,
    /// Every move, oldest first (the single command's view only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transitions: Option<Vec<TransitionView>>,
    /// The recovery commands that name this one (the single command's view only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery_commands: Option<Vec<Uuid>>,
    /// The approval it waits (or waited) for last, with what it still needs and who may give
    /// it (the single command's view only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalView>,
    /// What its executor said it would do, as its person confirmed it, with the digest the
    /// execution carries (the single command's view only, for a command that had a preview).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview: Option<crate::domain::preview::BoundPreview>,
}

/// The canonical command envelope (DESIGN §4), the actor and conversation masked.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EnvelopeView {
    pub command_id: Uuid,
    pub tenant_id: String,
    pub actor_id: String,
    pub channel: String,
    pub conversation_id: String,
    pub message_ids: Vec<String>,
    pub correlation_id: String,
    pub causation_id: Option<String>,
    pub intent: IntentView,
    #[schema(value_type = Object)]
    pub args: Value,
    pub command_kind: CommandKind,
    pub idempotency_class: IdempotencyClass,
    pub idempotency_key: String,
    pub fingerprint: String,
    pub risk: Risk,
    #[schema(format = DateTime)]
    pub received_at: String,
    #[schema(format = DateTime)]
    pub expires_at: Option<String>,
    pub target_command_id: Option<Uuid>,
}

/// What a command is about: `refund` (action) an `order` (entity) `1234` (target).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct IntentView {
    pub entity: String,
    pub action: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// Where to follow a command.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CommandLinks {
    #[serde(rename = "self")]
    pub this: String,
    pub evidence: String,
    pub recovery: String,
    pub trace: String,
}

/// One target's delivery of a command.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DeliveryView {
    pub target: String,
    pub state: DeliveryState,
    /// Once executed or closed.
    pub outcome: Option<DeliveryOutcome>,
    /// Why it closed without a result (`DELIVERY_TIMEOUT`, ...).
    pub failure_class: Option<String>,
    /// What the executor (or the gateway, for a timeout) said of its failure.
    pub error_message: Option<String>,
}

impl DeliveryView {
    fn of(delivery: crate::store::Delivery) -> Self {
        let said = delivery.detail.as_ref().and_then(|detail| detail.get("message")).and_then(|m| m.as_str());
        Self {
            target: delivery.target,
            state: delivery.state,
            outcome: delivery.outcome,
            failure_class: delivery.failure_class,
            error_message: said.filter(|m| !m.is_empty()).map(str::to_owned),
        }
    }
}

/// One move of a command.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TransitionView {
    pub version: i64,
    pub from: State,
    pub to: State,
    pub event: Event,
    pub reason_code: Option<String>,
    #[schema(format = DateTime)]
    pub at: String,
}

impl From<TransitionRecord> for TransitionView {
    fn from(t: TransitionRecord) -> Self {
        Self {
            version: t.version,
            from: t.from,
            to: t.to,
            event: t.event,
            reason_code: t.reason_code,
            at: rfc3339(t.at),
        }
    }
}

impl EnvelopeView {
    fn of(e: &CommandEnvelope) -> Self {
        let Intent { entity, action, target } = e.intent.clone();
        Self {
            command_id: e.command_id,
            tenant_id: e.tenant_id.to_string(),
            actor_id: mask(e.actor_id.as_str()),
            channel: e.channel.to_string(),
            conversation_id: mask(e.conversation_id.as_str()),
            message_ids: e.message_ids.iter().map(ToString::to_string).collect(),
            correlation_id: e.correlation_id.to_string(),
            causation_id: e.causation_id.as_ref().map(ToString::to_string),
            intent: IntentView { entity, action, target },
            args: Value::Object(e.args.clone()),
            command_kind: e.command_kind,
            idempotency_class: e.idempotency_class,
            idempotency_key: e.idempotency_key.as_str().to_owned(),
            fingerprint: e.fingerprint.as_str().to_owned(),
            risk: e.risk,
            received_at: rfc3339(e.received_at),
            expires_at: e.expires_at.map(rfc3339),
            target_command_id: e.target_command_id,
        }
    }
}

/// The status of `command`; `full` adds its deliveries, transitions and recoveries.
pub async fn status(
    engine: &Engine,
    policy: &Policy,
    command: &StoredCommand,
    full: bool,
) -> Result<CommandStatus, StoreError> {
    let store = engine.store();
    let (recovery_actions, _) = crate::service::recovery::allowed_actions(store, policy, command).await?;
    let id = command.envelope.command_id;
    let state = command.lifecycle.state;
    let mut status = CommandStatus {
        command_id: id,
        short_ref: ShortRef::of(id).to_string(),
        state,
        terminal: state.is_terminal(),
        outcome: state.is_terminal().then_some(state),
        reason_code: command.reason_code.clone(),
        reason_message: None,
        last_transition_at: rfc3339(command.updated_at),
        created_at: rfc3339(command.created_at),
        version: command.version,
        confirmation: command.lifecycle.confirmation,
        recovery_actions,
        target_command_id: command.envelope.target_command_id,
        envelope: EnvelopeView::of(&command.envelope),
        links: CommandLinks {
            this: format!("/v1/commands/{id}"),
            evidence: format!("/v1/commands/{id}/evidence"),
            recovery: format!("/v1/commands/{id}/recovery"),
            trace: format!("/v1/traces/{}", command.envelope.correlation_id),
        },
        deliveries: None,
        transitions: None,
        recovery_commands: None,
        approval: None,
        preview: None,
    };
    if full {
        let deliveries: Vec<DeliveryView> =
            store.deliveries().of_command(id).await?.into_iter().map(DeliveryView::of).collect();
        if state == State::Failed {
            let failed = deliveries.iter().filter(|d| d.outcome == Some(DeliveryOutcome::Failed));
            status.reason_message = failed.filter_map(|d| d.error_message.clone()).next();
        }
        status.deliveries = Some(deliveries);
        let transitions = store.commands().transitions(id).await?;
        status.transitions = Some(transitions.into_iter().map(TransitionView::from).collect());
        status.recovery_commands = Some(store.commands().recoveries_of(id).await?);
        status.approval = crate::service::approvals::view::of_command(engine, &command.envelope.tenant_id, id).await?;
        status.preview = store.previews_of(&[id]).await?.remove(&id);
    }
    Ok(status)
}
