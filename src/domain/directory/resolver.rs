//! A tenant's identity resolver: the URL chatgate asks about a sender its directory does not know
//! (for a business whose customers live in its own systems), what it sends and what it takes
//! back. The request is signed as Standard Webhooks are; the answer is a person or "unknown".

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `[tenants.<t>.resolver]` as the directory file writes it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawResolver {
    url: String,
    /// The Standard Webhooks secret the requests are signed with (`whsec_…`).
    secret: String,
    timeout_ms: Option<u64>,
    /// How long an answer naming a person is kept (`1h`).
    known_ttl: Option<String>,
    /// How long an "unknown" is kept (`10m`).
    unknown_ttl: Option<String>,
    /// How long a message waits for an answer before it is handled as an unknown sender's (`10m`).
    give_up_after: Option<String>,
}

/// A resolver, checked.
#[derive(Clone, PartialEq, Eq)]
pub struct Resolver {
    pub url: String,
    /// The key of the `whsec_` secret.
    pub key: Vec<u8>,
    pub timeout: Duration,
    pub known_ttl: Duration,
    pub unknown_ttl: Duration,
    pub give_up_after: Duration,
}

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolver")
            .field("url", &self.url)
            .field("key", &"<redacted>")
            .field("timeout", &self.timeout)
            .field("known_ttl", &self.known_ttl)
            .field("unknown_ttl", &self.unknown_ttl)
            .field("give_up_after", &self.give_up_after)
            .finish()
    }
}

impl RawResolver {
    pub fn check(&self) -> Result<Resolver, String> {
        let url = self.url.trim();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!("resolver.url `{url}` is not an http(s) URL"));
        }
        let key = crate::domain::standard_webhooks::key(&self.secret).map_err(|e| format!("resolver.secret: {e}"))?;
        let duration = |name: &str, raw: &Option<String>, default: Duration| match raw {
            None => Ok(default),
            Some(text) => humantime::parse_duration(text).map_err(|e| format!("resolver.{name} `{text}`: {e}")),
        };
        let timeout = Duration::from_millis(self.timeout_ms.unwrap_or(3_000));
        if timeout.is_zero() || timeout > Duration::from_secs(60) {
            return Err("resolver.timeout_ms is between 1 and 60000".into());
        }
        Ok(Resolver {
            url: url.to_owned(),
            key,
            timeout,
            known_ttl: duration("known_ttl", &self.known_ttl, Duration::from_secs(3_600))?,
            unknown_ttl: duration("unknown_ttl", &self.unknown_ttl, Duration::from_secs(600))?,
            give_up_after: duration("give_up_after", &self.give_up_after, Duration::from_secs(600))?,
        })
    }
}

/// What chatgate asks: who writes from `address` on `channel` to `tenant`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lookup {
    /// `identity.lookup`.
    #[serde(rename = "type")]
    pub kind: String,
    pub tenant: String,
    pub channel: String,
    /// Their address as the directory keeps it (a number's digits, a user id).
    pub address: String,
    /// The name the provider gave (WhatsApp's profile name), when it gave one.
    pub profile_name: Option<String>,
}

/// The resolver's answer: `{"known": true, "id": "c-1042", "name": "Ana", "roles": ["customer"],
/// "locale": "pt-BR"}` or `{"known": false}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    pub known: bool,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub roles: Vec<String>,
    #[serde(default)]
    pub locale: Option<String>,
}

/// A person as a resolver named them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub id: crate::domain::command::ActorId,
    pub name: String,
    pub roles: Vec<String>,
    pub locale: Option<String>,
}

impl Answer {
    /// The person the answer names (`None`: unknown), checked as a person from the API is.
    pub fn person(&self) -> Result<Option<Resolved>, String> {
        if !self.known {
            return Ok(None);
        }
        let raw = self.id.as_deref().ok_or("a known person's answer carries their `id`")?;
        let fields = super::PersonFields {
            id: Some(raw.to_owned()),
            name: self.name.clone(),
            roles: Some(self.roles.clone()),
            locale: Some(self.locale.clone()),
            ..super::PersonFields::default()
        };
        let id = fields.id().map_err(|e| e.to_string())?;
        let person = fields.apply(&id, None).map_err(|e| e.to_string())?;
        Ok(Some(Resolved { id, name: person.name, roles: person.roles, locale: person.locale }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_and_checked() {
        let known: Answer =
            serde_json::from_str(r#"{"known": true, "id": "c-1", "name": "Ana", "roles": ["customer"]}"#)
                .expect("answer");
        assert_eq!(known.person().expect("person").map(|p| p.id.to_string()), Some("c-1".into()));
        let unknown: Answer = serde_json::from_str(r#"{"known": false}"#).expect("answer");
        assert_eq!(unknown.person(), Ok(None));
        let nameless: Answer = serde_json::from_str(r#"{"known": true}"#).expect("answer");
        assert!(nameless.person().is_err());
        let raw = RawResolver {
            url: "ftp://x".into(),
            secret: "whsec_MTIz".into(),
            timeout_ms: None,
            known_ttl: None,
            unknown_ttl: None,
            give_up_after: None,
        };
        assert!(raw.check().is_err());
        let raw = RawResolver { url: "http://127.0.0.1:1/who".into(), known_ttl: Some("2h".into()), ..raw };
        assert_eq!(raw.check().map(|r| r.known_ttl), Ok(Duration::from_secs(7_200)));
    }
}
