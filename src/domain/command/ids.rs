//! Identifiers that arrive from outside, parsed once so that a value that exists is valid.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what}: {why}")]
pub struct InvalidId {
    pub what: &'static str,
    pub why: &'static str,
}

/// Declares a string newtype whose only constructor is a fallible `parse`.
macro_rules! parsed_id {
    ($(#[$meta:meta])* $name:ident, $what:literal, $max:expr, $allowed:expr) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn parse(raw: &str) -> Result<Self, InvalidId> {
                let raw = raw.trim();
                let invalid = |why| InvalidId { what: $what, why };
                if raw.is_empty() {
                    return Err(invalid("must not be empty"));
                }
                if raw.len() > $max {
                    return Err(invalid(concat!("longer than ", stringify!($max), " bytes")));
                }
                let allowed: fn(char) -> bool = $allowed;
                if !raw.chars().all(allowed) {
                    return Err(invalid("contains a character that is not allowed"));
                }
                Ok(Self(raw.to_owned()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                Self::parse(&raw).map_err(serde::de::Error::custom)
            }
        }
    };
}

fn slug_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

fn visible_ascii(c: char) -> bool {
    c.is_ascii_graphic()
}

parsed_id!(
    /// A tenant: the unit of isolation. Keys, evidence chains and queries are scoped by it.
    TenantId, "tenant id", 64, slug_char
);
parsed_id!(
    /// The acting principal: a WhatsApp id, a phone number, a service account.
    ActorId, "actor id", 128, |c| slug_char(c) || matches!(c, '+' | ':' | '@')
);
parsed_id!(
    /// The channel a message came through (`whatsapp`, `twilio`, `hooks`, ...).
    Channel, "channel", 32, slug_char
);
parsed_id!(
    /// Any opaque identifier a provider or caller hands us (conversation, message, correlation).
    ExternalId, "identifier", 256, visible_ascii
);

impl ExternalId {
    /// A UUID's text is always a valid identifier.
    pub fn from_uuid(id: uuid::Uuid) -> Self {
        Self(id.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_trims_and_refuses_empty_long_or_odd_values() {
        assert_eq!(TenantId::parse(" demo ").map(|t| t.0), Ok("demo".into()));
        assert!(TenantId::parse("").is_err());
        assert!(TenantId::parse("de mo").is_err());
        assert!(TenantId::parse(&"a".repeat(65)).is_err());
        assert!(ActorId::parse("+15550000001").is_ok());
        assert!(ExternalId::parse("wamid.HBg=").is_ok());
        assert!(ExternalId::parse("tab\there").is_err());
    }

    #[test]
    fn deserialize_goes_through_parse() {
        assert!(serde_json::from_str::<TenantId>("\"demo\"").is_ok());
        assert!(serde_json::from_str::<TenantId>("\"\"").is_err());
    }
}
