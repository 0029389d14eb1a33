//! Evidence artifacts (EAS): what one lifecycle step, decision or refusal left behind.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::canonical;
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
    /// Shared by a move's artifacts (and a command's moves): a copy of it for each was five
    /// allocations an artifact.
    pub trace: Arc<TraceBindings>,
    /// The security or dedupe decision, when there was one.
    pub decision: Option<Value>,
    pub reason_code: Option<String>,
}

impl EvidenceDraft {
    pub fn new(kind: EvidenceKind, command_id: Uuid, trace: impl Into<Arc<TraceBindings>>) -> Self {
        Self {
            kind,
            command_id: Some(command_id),
            stage: None,
            from: None,
            event: None,
            trace: trace.into(),
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
            trace: Arc::default(),
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

    /// The artifact's full content at a position in a chain (its text is
    /// [`Self::canonical_body`]).
    pub fn body(&self, artifact_id: Uuid, chain_id: &str, seq: i64, prev_hash: &str, at: OffsetDateTime) -> Value {
        // Strings, integers and values only: it always makes a `Value`.
        serde_json::to_value(self.sorted(artifact_id, chain_id, seq, prev_hash, at)).unwrap_or_default()
    }

    /// [`Self::body`] in canonical form (JCS): the text that is hashed and kept. Written straight
    /// from the draft's fields when serde_json's compact form of them is canonical already (a
    /// decision without fractions, huge integers or keys from U+E000: `canonical::written_alike`),
    /// without building the `Value` first — a fifth of the CPU an artifact cost; through the
    /// `Value` otherwise. The same text either way.
    pub fn canonical_body(
        &self,
        artifact_id: Uuid,
        chain_id: &str,
        seq: i64,
        prev_hash: &str,
        at: OffsetDateTime,
    ) -> String {
        let body = self.sorted(artifact_id, chain_id, seq, prev_hash, at);
        let plain = self.decision.as_ref().is_none_or(canonical::written_alike);
        if plain
            && canonical::written_alike(&Value::from(seq))
            && let Ok(text) = serde_json::to_string(&body)
        {
            return text;
        }
        canonical::to_string(&serde_json::to_value(&body).unwrap_or_default())
    }

    /// The body borrowed from the draft, each object's fields in JCS's order. Taken apart field
    /// by field, so that a field added to a draft or to its trace does not compile until the
    /// body says where it goes.
    fn sorted<'a>(
        &'a self,
        artifact_id: Uuid,
        chain_id: &'a str,
        seq: i64,
        prev_hash: &'a str,
        at: OffsetDateTime,
    ) -> SortedBody<'a> {
        let Self { kind, command_id, stage, from, event, trace, decision, reason_code } = self;
        let TraceBindings { conversation, actor, message_ids, correlation_id, causation_id } = &**trace;
        SortedBody {
            artifact_id,
            chain_id,
            decision,
            kind: *kind,
            lifecycle: SortedLifecycle { command_id: *command_id, event: *event, from: *from, stage: *stage },
            prev_hash,
            reason_code,
            recorded_at: recorded_at(at),
            seq,
            trace: SortedTrace { actor, causation_id, conversation, correlation_id, message_ids },
        }
    }
}

/// When an artifact was recorded, as its body says it.
fn recorded_at(at: OffsetDateTime) -> String {
    at.format(&time::format_description::well_known::Rfc3339).unwrap_or_else(|_| at.unix_timestamp().to_string())
}

/// An artifact's body borrowed from its draft, every object's fields in JCS's order (by name),
/// so that serde_json writes its canonical text (the one definition of what a body holds).
#[derive(Serialize)]
struct SortedBody<'a> {
    artifact_id: Uuid,
    chain_id: &'a str,
    decision: &'a Option<Value>,
    kind: EvidenceKind,
    lifecycle: SortedLifecycle,
    prev_hash: &'a str,
    reason_code: &'a Option<String>,
    recorded_at: String,
    seq: i64,
    trace: SortedTrace<'a>,
}

#[derive(Serialize)]
struct SortedLifecycle {
    command_id: Option<Uuid>,
    event: Option<Event>,
    from: Option<State>,
    stage: Option<State>,
}

/// [`TraceBindings`] in JCS's order.
#[derive(Serialize)]
struct SortedTrace<'a> {
    actor: &'a Option<String>,
    causation_id: &'a Option<String>,
    conversation: &'a Option<String>,
    correlation_id: &'a Option<String>,
    message_ids: &'a [String],
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};
    use time::OffsetDateTime;
    use uuid::Uuid;

    use super::{EvidenceDraft, TraceBindings};
    use crate::domain::canonical;
    use crate::domain::lifecycle::{Event, EvidenceKind, State};

    /// Decisions as the engine writes them, and ones the direct path must leave to the `Value`'s
    /// (a fraction, an integer past 2^53, a key that sorts apart in UTF-16).
    fn decisions() -> Vec<Option<Value>> {
        vec![
            None,
            Some(json!({"authz": "allow", "reason": null, "limits": [1, 2, {"b": "\u{7f}", "a": "\u{2028}"}]})),
            Some(json!({"amount": 25.5, "currency": "EUR"})),
            Some(json!({"big": 9_007_199_254_740_993u64})),
            Some(json!({"\u{e000}": 1, "\u{1f600}": 2, "z": "\n\t\"\\"})),
            Some(json!("a bare string")),
        ]
    }

    #[test]
    fn a_body_holds_what_it_always_held_in_jcs_order() {
        let trace = TraceBindings {
            conversation: Some("hk1:c".into()),
            actor: Some("hk1:a".into()),
            message_ids: vec!["wamid.1".into()],
            correlation_id: Some("corr-1".into()),
            causation_id: None,
        };
        let id = Uuid::from_u128(7);
        let draft = EvidenceDraft::new(EvidenceKind::AuthzDecided, id, trace)
            .stage(State::Authorized)
            .moved(State::AuthzPending, Event::Allow)
            .decision(json!({"authz": "allow"}));
        let at = OffsetDateTime::from_unix_timestamp(1_700_000_000).expect("a time");
        let expected = concat!(
            r#"{"artifact_id":"00000000-0000-0000-0000-000000000007","chain_id":"demo","decision":{"authz":"allow"},"#,
            r#""kind":"authz.decided","lifecycle":{"command_id":"00000000-0000-0000-0000-000000000007","#,
            r#""event":"allow","from":"authz_pending","stage":"authorized"},"prev_hash":"00","reason_code":null,"#,
            r#""recorded_at":"2023-11-14T22:13:20Z","seq":3,"trace":{"actor":"hk1:a","causation_id":null,"#,
            r#""conversation":"hk1:c","correlation_id":"corr-1","message_ids":["wamid.1"]}}"#
        );
        assert_eq!(draft.canonical_body(id, "demo", 3, "00", at), expected);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn the_canonical_body_is_the_values_canonical_text(
            decision in prop::sample::select(decisions()),
            (chain, prev_hash, reason) in (any::<String>(), "[0-9a-f]{0,64}", prop::option::of(any::<String>())),
            (conversation, actor, ids) in (prop::option::of(any::<String>()), prop::option::of(any::<String>()),
                prop::collection::vec(any::<String>(), 0..3)),
            seq in prop_oneof![0i64..1_000_000, any::<i64>()],
            moved in any::<bool>(),
            at in 0i64..4_000_000_000,
        ) {
            let trace = TraceBindings {
                conversation, actor, message_ids: ids, correlation_id: Some("corr-1".into()), causation_id: None,
            };
            let draft = EvidenceDraft::new(EvidenceKind::AuthzDecided, Uuid::now_v7(), trace);
            let mut draft = draft.stage(State::Authorized);
            if moved {
                draft = draft.moved(State::AuthzPending, Event::Allow);
            }
            draft.decision = decision;
            draft.reason_code = reason;
            let (id, at) = (Uuid::now_v7(), OffsetDateTime::from_unix_timestamp(at).expect("a time"));
            let expected = canonical::to_string(&draft.body(id, &chain, seq, &prev_hash, at));
            prop_assert_eq!(draft.canonical_body(id, &chain, seq, &prev_hash, at), expected);
        }
    }
}
