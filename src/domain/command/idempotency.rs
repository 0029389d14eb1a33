//! Idempotency keys (IDS §VII) and envelope fingerprints (IDS §VIII.D).

use std::fmt;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::domain::command::envelope::Args;

use crate::domain::command::envelope::Intent;
use crate::domain::command::ids::ActorId;
use crate::domain::command::ids::TenantId;
use crate::domain::lifecycle::CommandKind;
use crate::domain::names::named_enum;

/// The inputs of the key, and nothing else: IDS §VII.C forbids timestamps, message ids and
/// random values, so they have no field here to leak in through.
#[derive(Debug, Clone, Serialize)]
pub struct KeyInputs<'a> {
    pub tenant_id: &'a TenantId,
    pub actor_id: &'a ActorId,
    pub intent: &'a Intent,
    pub args: &'a Args,
    pub command_kind: CommandKind,
}

impl KeyInputs<'_> {
    /// `hex(SHA-256(JCS(inputs)))`. JCS (RFC 8785) sorts keys and fixes number and string
    /// forms, so the field order a caller used does not matter.
    fn digest(&self) -> String {
        // Plain strings, maps and numbers always make JSON; if they ever did not, hashing their
        // debug form would still be deterministic rather than a panic on the ingress path.
        let canonical = crate::domain::canonical::of(self).unwrap_or_else(|| format!("{self:?}"));
        hex::encode(Sha256::digest(canonical))
    }
}

/// The key under which a logical command is deduplicated within its tenant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub fn derive(inputs: &KeyInputs<'_>) -> Self {
        Self(inputs.digest())
    }

    /// A caller-supplied key (an `Idempotency-Key` header): visible ASCII, at most 255 bytes,
    /// as Stripe and the IETF httpapi draft accept.
    pub fn parse(raw: &str) -> Result<Self, InvalidIdempotencyKey> {
        if raw.is_empty() || raw.len() > 255 || !raw.chars().all(|c| c.is_ascii_graphic()) {
            return Err(InvalidIdempotencyKey);
        }
        Ok(Self(raw.to_owned()))
    }

    /// Rebuilds a key read back from the store, where it was valid when written.
    pub(crate) fn from_stored(raw: String) -> Self {
        Self(raw)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("an idempotency key is 1 to 255 visible ASCII characters")]
pub struct InvalidIdempotencyKey;

/// What the command means, hashed the same way as a derived key. For a derived key the two are
/// equal by construction; a caller-supplied key reused for a different command is caught by
/// comparing fingerprints (`idempotency_conflict`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct Fingerprint(String);

impl Fingerprint {
    pub fn of(inputs: &KeyInputs<'_>) -> Self {
        Self(inputs.digest())
    }

    pub(crate) fn from_stored(raw: String) -> Self {
        Self(raw)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

named_enum! {
    /// IDS §VI: how a command is deduplicated.
    IdempotencyClass {
        I0 => "I0",
        I1 => "I1",
        I2 => "I2",
        I3 => "I3",
    }
}

impl IdempotencyClass {
    /// What a command declares none of is: I1 for a mutation (IDS's default), I0 for a read.
    pub fn default_for(mutation: bool) -> Self {
        if mutation { Self::I1 } else { Self::I0 }
    }

    /// I0 (read-only) needs no reservation: repeating a read has no effect to duplicate.
    pub fn reserves_key(self) -> bool {
        self != Self::I0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::command::envelope::Args;
    use crate::domain::command::envelope::Intent;

    fn inputs_json(tenant: &str, actor: &str, args: &str) -> String {
        let tenant = TenantId::parse(tenant).expect("valid tenant");
        let actor = ActorId::parse(actor).expect("valid actor");
        let intent = Intent::parse("order", "refund", Some("1234")).expect("valid intent");
        let args: Args = serde_json::from_str(args).expect("valid args");
        let inputs = KeyInputs {
            tenant_id: &tenant,
            actor_id: &actor,
            intent: &intent,
            args: &args,
            command_kind: CommandKind::Mutation,
        };
        IdempotencyKey::derive(&inputs).0
    }

    #[test]
    fn key_is_lowercase_hex_sha256() {
        let key = inputs_json("demo", "15550000001", r#"{"amount":"25.00"}"#);
        assert_eq!(key.len(), 64);
        assert!(key.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    }

    #[test]
    fn key_ignores_json_field_order() {
        let a = inputs_json("demo", "15550000001", r#"{"order_id":"1234","amount":"25.00"}"#);
        let b = inputs_json("demo", "15550000001", r#"{"amount":"25.00","order_id":"1234"}"#);
        assert_eq!(a, b);
    }

    #[test]
    fn key_differs_across_tenants_actors_and_args() {
        let base = inputs_json("demo", "15550000001", r#"{"amount":"25.00"}"#);
        assert_ne!(base, inputs_json("other", "15550000001", r#"{"amount":"25.00"}"#));
        assert_ne!(base, inputs_json("demo", "15550000002", r#"{"amount":"25.00"}"#));
        assert_ne!(base, inputs_json("demo", "15550000001", r#"{"amount":"25.01"}"#));
    }

    #[test]
    fn key_matches_a_hand_computed_jcs_digest() {
        // The canonical form written by hand: keys sorted, no whitespace.
        let canonical = concat!(
            r#"{"actor_id":"15550000001","args":{"amount":"25.00"},"command_kind":"mutation","#,
            r#""intent":{"action":"refund","entity":"order","target":"1234"},"tenant_id":"demo"}"#
        );
        let expected = hex::encode(Sha256::digest(canonical.as_bytes()));
        assert_eq!(inputs_json("demo", "15550000001", r#"{"amount":"25.00"}"#), expected);
    }

    #[test]
    fn supplied_keys_are_bounded_visible_ascii() {
        assert!(IdempotencyKey::parse("order-1234-refund").is_ok());
        assert!(IdempotencyKey::parse("").is_err());
        assert!(IdempotencyKey::parse("has space").is_err());
        assert!(IdempotencyKey::parse(&"k".repeat(256)).is_err());
    }
}
