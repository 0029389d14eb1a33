//! The evidence each kind of step writes: one place, so every door records the same thing.

use std::sync::Arc;

use serde_json::{Value, json};
use uuid::Uuid;

use crate::domain::command::CommandEnvelope;
use crate::domain::evidence::EvidenceDraft;
use crate::domain::evidence::TraceBindings;
use crate::domain::evidence::decision::{AuthzVerdict, ConfirmationStep, Decision, Dedupe, ReadAs};
use crate::domain::lifecycle::Event;
use crate::domain::lifecycle::EvidenceKind;
use crate::domain::lifecycle::InvalidTransition;
use crate::domain::lifecycle::Transition;
use crate::domain::registry::Reading;
use crate::store::StoredCommand;

/// The artifacts of a move: one per kind SMCL §IX names for the new state, each carrying the
/// stage, the move, the trace bindings and the decision.
pub fn transition_evidence(
    transition: &Transition,
    command_id: Uuid,
    trace: &Arc<TraceBindings>,
    decision: Option<Value>,
    reason_code: Option<String>,
) -> Vec<EvidenceDraft> {
    let (mut decision, mut reason_code) = (merge(implied_decision(transition.event), decision), reason_code);
    let kinds = transition.evidence_kinds();
    let mut drafts = Vec::with_capacity(kinds.len());
    for (i, &kind) in kinds.iter().enumerate() {
        let mut draft = EvidenceDraft::new(kind, command_id, trace.clone())
            .stage(transition.to)
            .moved(transition.from, transition.event);
        // The last artifact takes the decision itself: a decision is a tree of JSON maps, and a
        // copy of it for every artifact was among the largest sources of a command's allocations.
        (draft.decision, draft.reason_code) = if i + 1 == kinds.len() {
            (decision.take(), reason_code.take())
        } else {
            (decision.clone(), reason_code.clone())
        };
        drafts.push(draft);
    }
    drafts
}

/// The decision a security event always records, whatever else the caller adds.
fn implied_decision(event: Event) -> Option<Value> {
    match event {
        Event::Allow => Some(Decision::Authz { authz: AuthzVerdict::Allow, reason: None }.into()),
        Event::Deny => Some(Decision::Authz { authz: AuthzVerdict::Deny, reason: None }.into()),
        Event::Confirm => Some(Decision::Confirmation { confirmation: ConfirmationStep::Satisfied }.into()),
        // §VI.C: an auto-confirmed mutation must be auditable as such.
        Event::AutoConfirm => Some(Decision::Confirmation { confirmation: ConfirmationStep::AutoConfirmed }.into()),
        _ => None,
    }
}

fn merge(base: Option<Value>, extra: Option<Value>) -> Option<Value> {
    match (base, extra) {
        (Some(Value::Object(mut base)), Some(Value::Object(extra))) => {
            // The implied fields win: a caller cannot record an "allow" as something else.
            for (key, value) in extra {
                base.entry(key).or_insert(value);
            }
            Some(Value::Object(base))
        }
        (Some(base), _) => Some(base),
        (None, extra) => extra,
    }
}

/// IDS §XII: the accepted command records that its key was seen for the first time; and, for a
/// message, how its text was read (the rule and the pattern, never the text itself).
pub(super) fn first_seen(envelope: &CommandEnvelope, reading: Option<&Reading>) -> Value {
    let dedupe = if envelope.idempotency_class.reserves_key() { Dedupe::FirstSeen } else { Dedupe::NotReserved };
    Decision::FirstSeen {
        dedupe,
        idempotency_key: envelope.idempotency_key.clone(),
        idempotency_class: envelope.idempotency_class,
        fingerprint: envelope.fingerprint.clone(),
        registry_version: envelope.registry_version.clone(),
        read_as: reading.map(|r| ReadAs { rule: r.rule, pattern: r.pattern.clone(), typos: r.typos }),
    }
    .into()
}

/// SMCL §VI.B: a refused move is recorded with what was attempted and why.
pub(super) fn invalid_attempt(
    command: &StoredCommand,
    event: Event,
    error: &InvalidTransition,
    trace: Arc<TraceBindings>,
) -> EvidenceDraft {
    EvidenceDraft::new(EvidenceKind::InvalidTransitionAttempt, command.envelope.command_id, trace)
        .stage(command.lifecycle.state)
        .moved(command.lifecycle.state, event)
        .reason(error.reason_code())
        .decision(
            Decision::Refused {
                refused: true,
                attempted_event: event,
                from: command.lifecycle.state,
                version: command.version,
                detail: error.to_string(),
            }
            .into(),
        )
}

/// A request refused because of the command's state, not a lifecycle event (a recovery action).
pub(super) fn refusal(
    command: &StoredCommand,
    reason_code: &str,
    decision: Value,
    trace: Arc<TraceBindings>,
) -> EvidenceDraft {
    let mut decision = decision;
    if let Some(fields) = decision.as_object_mut() {
        fields.insert("refused".into(), json!(true));
        fields.insert("from".into(), json!(command.lifecycle.state));
        fields.insert("version".into(), json!(command.version));
    }
    EvidenceDraft::new(EvidenceKind::InvalidTransitionAttempt, command.envelope.command_id, trace)
        .stage(command.lifecycle.state)
        .reason(reason_code)
        .decision(decision)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::lifecycle::CommandKind;
    use crate::domain::lifecycle::ConfirmationGate;
    use crate::domain::lifecycle::Lifecycle;
    use crate::domain::lifecycle::State;
    use crate::domain::lifecycle::apply;

    #[test]
    fn a_rejection_writes_both_kinds_with_the_deny_decision() {
        let current = Lifecycle {
            state: State::AuthzPending,
            kind: CommandKind::Mutation,
            confirmation: ConfirmationGate::Pending,
        };
        let t = apply(current, Event::Deny).expect("allowed");
        let drafts = transition_evidence(
            &t,
            Uuid::nil(),
            &Arc::default(),
            Some(json!({"authz": "allow", "scope": "x"})),
            Some("missing_scope".into()),
        );
        let kinds: Vec<_> = drafts.iter().map(|d| d.kind).collect();
        assert_eq!(kinds, vec![EvidenceKind::AuthzDecided, EvidenceKind::ExecutionRejected]);
        for d in &drafts {
            assert_eq!(d.decision, Some(json!({"authz": "deny", "scope": "x"})));
            assert_eq!(d.stage, Some(State::Rejected));
            assert_eq!(d.reason_code.as_deref(), Some("missing_scope"));
        }
    }
}
