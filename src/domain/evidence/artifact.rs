//! Evidence artifacts (EAS): what one lifecycle step, decision or refusal left behind.

use serde::Serialize;
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::CommandEnvelope;
use crate::domain::evidence::redact::Pseudonymizer;
use crate::domain::lifecycle::Event;
use crate::domain::lifecycle::EvidenceKind;
use crate::domain::lifecycle::State;

/// Where an artifact sits in the conversation and the causal graph (SMCL §IX). Personal data is
/// already pseudonymized here: nothing in clear ever reaches an artifact.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TraceBindings {
    /// Keyed hash of the conversation id (it usually embeds a phone number).
    pub conversation: Option<String>,
    /// Keyed hash of the acting principal.
    pub actor: Option<String>,
    /// Provider message ids: opaque, not personal, and needed to join traces.
    pub message_ids: Vec<String>,
    pub correlation_id: Option<String>,
    pub causation_id: Option<String>,
}

impl TraceBindings {
    pub fn for_envelope(envelope: &CommandEnvelope, pseudonymizer: &Pseudonymizer) -> Self {
        Self {
            conversation: Some(pseudonymizer.pseudonym(envelope.conversation_id.as_str())),
            actor: Some(pseudonymizer.pseudonym(envelope.actor_id.as_str())),
            message_ids: envelope.message_ids.iter().map(|m| m.as_str().to_owned()).collect(),
            correlation_id: Some(envelope.correlation_id.as_str().to_owned()),
            causation_id: envelope.causation_id.as_ref().map(|c| c.as_str().to_owned()),
        }
    }
}

/// An artifact before the store gives it a place in its tenant's chain.
#[derive(Debug, Clone, PartialEq)]
pub struct EvidenceDraft {
    pub kind: EvidenceKind,
    pub command_id: Option<Uuid>,
    /// `lifecycle.stage`: the state the command is in after the step (unchanged for refusals).
    pub stage: Option<State>,
    /// The move that produced it, when it was a move (or an attempted one).
    pub from: Option<State>,
    pub event: Option<Event>,
    pub trace: TraceBindings,
    /// The security or dedupe decision, when there was one.
    pub decision: Option<Value>,
    pub reason_code: Option<String>,
}

impl EvidenceDraft {
    pub fn new(kind: EvidenceKind, command_id: Uuid, trace: TraceBindings) -> Self {
        Self {
            kind,
            command_id: Some(command_id),
            stage: None,
            from: None,
            event: None,
            trace,
            decision: None,
            reason_code: None,
        }
    }

    /// An artifact about the tenant itself, of no command (a directory change, a purge).
    pub fn of_tenant(kind: EvidenceKind, decision: Value) -> Self {
        Self {
            kind,
            command_id: None,
            stage: None,
            from: None,
            event: None,
            trace: TraceBindings::default(),
            decision: Some(decision),
            reason_code: None,
        }
    }

    pub fn stage(mut self, stage: State) -> Self {
        self.stage = Some(stage);
        self
    }

    pub fn moved(mut self, from: State, event: Event) -> Self {
        self.from = Some(from);
        self.event = Some(event);
        self
    }

    pub fn decision(mut self, decision: Value) -> Self {
        self.decision = Some(decision);
        self
    }

    pub fn reason(mut self, reason_code: impl Into<String>) -> Self {
        self.reason_code = Some(reason_code.into());
        self
    }

    /// The artifact's full content at a position in a chain: the text that is hashed and kept.
    pub fn body(&self, artifact_id: Uuid, chain_id: &str, seq: i64, prev_hash: &str, at: OffsetDateTime) -> Value {
        let recorded_at = at
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_else(|_| at.unix_timestamp().to_string());
        json!({
            "artifact_id": artifact_id,
            "chain_id": chain_id,
            "seq": seq,
            "prev_hash": prev_hash,
            "kind": self.kind,
            "recorded_at": recorded_at,
            "lifecycle": {
                "command_id": self.command_id,
                "stage": self.stage,
                "from": self.from,
                "event": self.event,
            },
            "trace": self.trace,
            "decision": self.decision,
            "reason_code": self.reason_code,
        })
    }
}
