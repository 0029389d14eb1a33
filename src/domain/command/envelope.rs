//! The canonical command envelope (DESIGN §4): what every channel's message becomes.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::idempotency::Fingerprint;

use crate::domain::command::idempotency::IdempotencyClass;

use crate::domain::command::idempotency::IdempotencyKey;

use crate::domain::command::idempotency::KeyInputs;
use crate::domain::command::ids::ActorId;
use crate::domain::command::ids::Channel;
use crate::domain::command::ids::ExternalId;
use crate::domain::command::ids::InvalidId;
use crate::domain::command::ids::TenantId;
use crate::domain::lifecycle::CommandKind;
use crate::domain::names::named_enum;

/// The normalized arguments: a JSON object whose strings are trimmed. Typing (amounts, ids) is
/// the registry's job; what arrives here is already typed.
pub type Args = serde_json::Map<String, serde_json::Value>;

/// What the command is about: `refund` (action) an `order` (entity) `1234` (target).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    pub entity: String,
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

impl Intent {
    pub fn parse(entity: &str, action: &str, target: Option<&str>) -> Result<Self, InvalidId> {
        let word = |what: &'static str, raw: &str| {
            let raw = raw.trim();
            let ok = !raw.is_empty()
                && raw.len() <= 64
                && raw.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            ok.then(|| raw.to_ascii_lowercase())
                .ok_or(InvalidId { what, why: "must be 1 to 64 letters, digits, '_' or '-'" })
        };
        let target = target.map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned);
        Ok(Self { entity: word("intent entity", entity)?, action: word("intent action", action)?, target })
    }
}

named_enum! {
    /// How much harm a mistaken execution could do; the registry sets it.
    Risk {
        Low => "low",
        Medium => "medium",
        High => "high",
    }
}

/// Everything canonicalization knows about a new command, before it gets its identity.
#[derive(Debug, Clone)]
pub struct CommandRequest {
    pub tenant_id: TenantId,
    pub actor_id: ActorId,
    pub channel: Channel,
    pub conversation_id: ExternalId,
    pub message_ids: Vec<ExternalId>,
    pub correlation_id: Option<ExternalId>,
    pub causation_id: Option<ExternalId>,
    pub intent: Intent,
    pub args: Args,
    pub command_kind: CommandKind,
    pub idempotency_class: IdempotencyClass,
    pub risk: Risk,
    /// A key the caller chose (an `Idempotency-Key` header); derived when absent.
    pub supplied_key: Option<IdempotencyKey>,
    /// How long the command may wait before it has started (TTL); none means no limit.
    pub ttl: Option<Duration>,
    /// How long a duplicate is recognized (IDS §VIII.C), from the registry.
    pub dedupe_window: Duration,
    /// For recovery commands: the command they act on.
    pub target_command_id: Option<Uuid>,
    /// The command registry it is admitted under (`Registry::version`).
    pub registry_version: Option<String>,
}

/// The canonical envelope, as stored and as handed to executors.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandEnvelope {
    pub command_id: Uuid,
    pub tenant_id: TenantId,
    pub actor_id: ActorId,
    pub channel: Channel,
    pub conversation_id: ExternalId,
    pub message_ids: Vec<ExternalId>,
    pub correlation_id: ExternalId,
    pub causation_id: Option<ExternalId>,
    pub intent: Intent,
    pub args: Args,
    pub command_kind: CommandKind,
    pub idempotency_class: IdempotencyClass,
    pub idempotency_key: IdempotencyKey,
    pub fingerprint: Fingerprint,
    pub risk: Risk,
    #[serde(with = "time::serde::rfc3339")]
    pub received_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub expires_at: Option<OffsetDateTime>,
    pub target_command_id: Option<Uuid>,
    /// The command registry it was admitted under: it keeps that entry when the registry is
    /// reloaded (none for commands admitted before registries had versions).
    pub registry_version: Option<String>,
}

impl CommandEnvelope {
    /// Gives the request its identity (a UUIDv7 `command_id`), its key and its fingerprint.
    pub fn canonicalize(request: CommandRequest, now: OffsetDateTime) -> Self {
        let args = normalize_args(request.args);
        let inputs = KeyInputs {
            tenant_id: &request.tenant_id,
            actor_id: &request.actor_id,
            intent: &request.intent,
            args: &args,
            command_kind: request.command_kind,
        };
        let fingerprint = Fingerprint::of(&inputs);
        let idempotency_key = request.supplied_key.unwrap_or_else(|| IdempotencyKey::derive(&inputs));
        let command_id = Uuid::now_v7();
        // A command started by a message is its own correlation root unless told otherwise.
        let correlation_id = request.correlation_id.unwrap_or_else(|| ExternalId::from_uuid(command_id));
        Self {
            command_id,
            tenant_id: request.tenant_id,
            actor_id: request.actor_id,
            channel: request.channel,
            conversation_id: request.conversation_id,
            message_ids: request.message_ids,
            correlation_id,
            causation_id: request.causation_id,
            intent: request.intent,
            args,
            command_kind: request.command_kind,
            idempotency_class: request.idempotency_class,
            idempotency_key,
            fingerprint,
            risk: request.risk,
            received_at: now,
            expires_at: request.ttl.map(|ttl| now + ttl),
            target_command_id: request.target_command_id,
            registry_version: request.registry_version,
        }
    }
}

/// Trims every string, at any depth, so that "25.00 " and "25.00" are one command.
fn normalize_args(args: Args) -> Args {
    fn normalize(value: serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match value {
            Value::String(s) => Value::String(s.trim().to_owned()),
            Value::Array(items) => Value::Array(items.into_iter().map(normalize).collect()),
            Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, normalize(v))).collect()),
            other => other,
        }
    }
    args.into_iter().map(|(k, v)| (k, normalize(v))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refund_request(tenant: &str, message_id: &str) -> CommandRequest {
        // A trailing space, which normalization must remove.
        crate::domain::command::demo::refund(tenant, "1234", "25.00 ", message_id).expect("demo refund")
    }

    #[test]
    fn the_key_ignores_timestamps_message_ids_and_command_ids() {
        let early = OffsetDateTime::from_unix_timestamp(1_700_000_000).expect("valid time");
        let late = early + Duration::from_secs(3_600);
        let a = CommandEnvelope::canonicalize(refund_request("demo", "wamid.A"), early);
        let b = CommandEnvelope::canonicalize(refund_request("demo", "wamid.B"), late);
        assert_ne!(a.command_id, b.command_id);
        assert_eq!(a.idempotency_key, b.idempotency_key);
        assert_eq!(a.fingerprint, b.fingerprint);
    }

    #[test]
    fn the_key_differs_across_tenants() {
        let now = OffsetDateTime::now_utc();
        let a = CommandEnvelope::canonicalize(refund_request("demo", "m1"), now);
        let b = CommandEnvelope::canonicalize(refund_request("acme", "m1"), now);
        assert_ne!(a.idempotency_key, b.idempotency_key);
    }

    #[test]
    fn args_are_trimmed_and_a_supplied_key_is_kept_with_the_true_fingerprint() {
        let now = OffsetDateTime::now_utc();
        let mut request = refund_request("demo", "m1");
        request.supplied_key = Some(IdempotencyKey::parse("caller-key-1").expect("valid key"));
        let envelope = CommandEnvelope::canonicalize(request, now);
        assert_eq!(envelope.args["amount"], "25.00");
        assert_eq!(envelope.idempotency_key.as_str(), "caller-key-1");
        let derived = CommandEnvelope::canonicalize(refund_request("demo", "m2"), now);
        assert_eq!(envelope.fingerprint, derived.fingerprint);
        assert_eq!(envelope.expires_at, Some(now + Duration::from_secs(600)));
    }

    #[test]
    fn intent_words_are_checked_and_lowercased() {
        assert_eq!(Intent::parse(" Order ", "REFUND", None).map(|i| i.entity), Ok("order".into()));
        assert!(Intent::parse("order", "re fund", None).is_err());
        assert!(Intent::parse("", "refund", None).is_err());
    }
}
