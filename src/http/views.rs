//! The JSON bodies the API answers with, as types: the handlers serialize them and the OpenAPI
//! document's schemas are derived from them, so a generated client reads what is sent. The
//! command status itself is `service::ooc::view::CommandStatus`, which the chat shares.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::domain::agent::AgentState;
use crate::domain::delivery::DeliveryState;
use crate::domain::lifecycle::State;
use crate::domain::lifecycle::recovery::RecoveryAction;
use crate::service::ooc::view::{CommandStatus, TransitionView};
use crate::service::reads::{ChainReport, TraceNode};

/// `GET /healthz`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok`.
    pub status: &'static str,
}

/// `GET /readyz`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Ready {
    /// `ready`.
    pub status: &'static str,
    /// `sqlite` or `postgres`.
    pub database: &'static str,
}

/// A page of commands, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct CommandPage {
    pub commands: Vec<CommandStatus>,
    /// Pass as `cursor` for the next page; `null` on the last one.
    pub next_cursor: Option<String>,
}

/// A command's evidence, in chain order.
#[derive(Debug, Serialize, ToSchema)]
pub struct EvidenceList {
    pub command_id: Uuid,
    pub artifacts: Vec<Artifact>,
}

/// One evidence artifact.
#[derive(Debug, Serialize, ToSchema)]
pub struct Artifact {
    pub artifact_id: Uuid,
    pub seq: i64,
    /// `command.accepted`, `execution.executed`, ...
    pub kind: String,
    /// The SHA-256 chain hash over the previous hash and this body.
    pub hash: String,
    #[schema(value_type = Object)]
    pub body: Value,
}

/// The tenant's evidence chain, checked end to end.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditVerdict {
    pub intact: bool,
    pub chains: Vec<ChainReport>,
}

/// What happened under one correlation id.
#[derive(Debug, Serialize, ToSchema)]
pub struct TraceGraph {
    pub correlation_id: String,
    pub nodes: Vec<TraceNode>,
    pub edges: Vec<TraceEdge>,
}

/// `from` caused `to`.
#[derive(Debug, Serialize, ToSchema)]
pub struct TraceEdge {
    pub from: String,
    pub to: String,
}

/// An agent (a dispatch target) and its state machine.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentView {
    pub agent: String,
    pub state: AgentState,
    pub version: i64,
    /// Where a resume returns.
    pub pre_pause_state: Option<AgentState>,
}

/// Every agent.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentList {
    pub agents: Vec<AgentView>,
}

/// An ACK, applied or recognised as a repeat.
#[derive(Debug, Serialize, ToSchema)]
pub struct AckApplied {
    pub command_id: Uuid,
    pub delivery_state: DeliveryState,
    /// The same ACK came before: nothing changed.
    pub duplicate: bool,
}

/// A recovery, started as a command of its own.
#[derive(Debug, Clone, Serialize, serde::Deserialize, ToSchema)]
pub struct RecoveryStarted {
    pub recovery_command_id: Uuid,
    pub action: RecoveryAction,
    /// The recovery command's state.
    pub state: State,
    pub target_command_id: Uuid,
    /// The target's state after the recovery's first step.
    pub target_state: State,
    pub links: RecoveryLinks,
}

/// Where to follow a recovery.
#[derive(Debug, Clone, Serialize, serde::Deserialize, ToSchema)]
pub struct RecoveryLinks {
    pub recovery_command: String,
}

/// A step-up, accepted: the command goes on.
#[derive(Debug, Serialize, ToSchema)]
pub struct SteppedUp {
    pub command_id: Uuid,
    pub state: State,
}

/// A Standard Webhooks delivery that was a chat message, handled.
#[derive(Debug, Serialize, ToSchema)]
pub struct MessageHandled {
    /// What the message came to (`accepted`, `command`, `help`, `duplicate`, ...).
    #[schema(value_type = String, example = "command")]
    pub outcome: crate::service::intake::MessageOutcome,
    pub command_id: Option<Uuid>,
}

/// The `data` of one `transition` event on `GET /v1/events`.
#[derive(Debug, Serialize, ToSchema)]
pub struct TransitionEvent {
    pub command_id: Uuid,
    pub transition: TransitionView,
}
