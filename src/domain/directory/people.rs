//! People: who writes to a tenant, in what roles, from which addresses. A person is data (the
//! operator API and imports make them, the directory file seeds them); an [`Actor`] is a person
//! as a message finds them, with the scopes their roles grant now.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::domain::command::ActorId;
use crate::domain::names::named_enum;

named_enum! {
    /// Where a person writes from. A WhatsApp `wa_id` and a phone number are the same digits: one
    /// address serves every channel that names people by their number. `whatsapp`: the WhatsApp
    /// id (`wa_id`), digits only; `whatsapp_user_id`: Meta's business-scoped user id (`US.…`), by
    /// which WhatsApp may name a sender instead; `phone`: a number that writes by SMS or through
    /// Twilio, digits only.
    AddressKind {
        Whatsapp => "whatsapp",
        WhatsappUserId => "whatsapp_user_id",
        Phone => "phone",
        Telegram => "telegram",
        Slack => "slack",
        Messenger => "messenger",
        Instagram => "instagram",
        Line => "line",
    }
}

/// How a Telegram user's id is written as an address (`tg:700000001`).
pub const TELEGRAM_PREFIX: &str = "tg:";

/// How a Slack user's id is written as an address (`slack:U0ANA`).
pub const SLACK_PREFIX: &str = "slack:";

/// How a Messenger user's page-scoped id is written as an address (`fb:24012345678901234`).
pub const MESSENGER_PREFIX: &str = "fb:";
/// How an Instagram user's id is written as an address (`ig:17841400000000000`).
pub const INSTAGRAM_PREFIX: &str = "ig:";
/// How a LINE user's id is written as an address (`line:U206d25c2ea6bd87c17655609a1c37cb8`).
pub const LINE_PREFIX: &str = "line:";

/// One address of a person.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Address {
    pub kind: AddressKind,
    pub value: String,
}

impl Address {
    /// An address as stored and looked up, written as its kind's [`Shape`] says: numbers without
    /// `+`, spaces or dashes; other ids trimmed and prefixed with their kind's mark.
    pub fn new(kind: AddressKind, raw: &str) -> Result<Self, PersonError> {
        let shape = kind.shape();
        let id: String =
            raw.trim().trim_start_matches(shape.prefix).chars().filter(|c| !shape.dropped.contains(c)).collect();
        if !shape.length.contains(&id.len()) || !id.chars().all(|c| (shape.allowed)(&c)) {
            return Err(PersonError(format!("`{raw}` is not {}", shape.what)));
        }
        let id = if shape.upper { id.to_ascii_uppercase() } else { id };
        Ok(Self { kind, value: format!("{}{id}", shape.prefix) })
    }
}

/// How an address of one kind is written.
#[derive(Debug, Clone)]
pub struct Shape {
    /// What it is, for a refusal ("a Telegram user id").
    pub what: &'static str,
    /// Kept before the id, so that no two kinds' addresses are the same text (`tg:`); a number
    /// has none, as one number is one address on every channel that names people by it.
    pub prefix: &'static str,
    /// Characters people write that are not part of it (a number's `+`, spaces and dashes).
    pub dropped: &'static [char],
    pub length: std::ops::RangeInclusive<usize>,
    pub allowed: fn(&char) -> bool,
    /// Kept in capitals (Slack's ids).
    pub upper: bool,
}

impl AddressKind {
    /// How an address of this kind is written: a kind added is a line in [`AddressKind`] and its
    /// shape here.
    pub fn shape(self) -> Shape {
        let id = |what, prefix, length, allowed| Shape { what, prefix, dropped: &[], length, allowed, upper: false };
        match self {
            // E.164 numbers have at most 15 digits; the shortest real ones, 7 or so.
            AddressKind::Whatsapp | AddressKind::Phone => {
                Shape { dropped: &['+', ' ', '-', '(', ')'], ..id("a phone number", "", 6..=20, char::is_ascii_digit) }
            }
            AddressKind::WhatsappUserId => id("a user id", "", 1..=128, char::is_ascii_graphic),
            // A Telegram user id, a number, kept as `tg:<id>` (as the channel names the sender).
            AddressKind::Telegram => id("a Telegram user id", TELEGRAM_PREFIX, 1..=20, char::is_ascii_digit),
            // A Slack user id (`U0ANA`, `W0ANA`), kept as `slack:<id>`.
            AddressKind::Slack => {
                Shape { upper: true, ..id("a Slack user id", SLACK_PREFIX, 1..=32, char::is_ascii_alphanumeric) }
            }
            // A page-scoped id (Messenger's PSID, Instagram's IGSID), a number.
            AddressKind::Messenger => id("a page-scoped id", MESSENGER_PREFIX, 1..=32, char::is_ascii_digit),
            AddressKind::Instagram => id("a page-scoped id", INSTAGRAM_PREFIX, 1..=32, char::is_ascii_digit),
            // A LINE user id: `U` and 32 hexadecimal digits, as the webhook's `source.userId`.
            AddressKind::Line => id("a LINE user id", LINE_PREFIX, 33..=33, char::is_ascii_alphanumeric),
        }
    }
}

/// Why a person as given cannot be kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PersonError(pub String);

/// A person as the directory keeps them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Person {
    pub id: ActorId,
    pub name: String,
    pub roles: Vec<String>,
    /// Their language, when it is not the tenant's.
    pub locale: Option<String>,
    /// A person deactivated is treated as someone nobody listed.
    pub active: bool,
    pub addresses: BTreeSet<Address>,
}

impl Person {
    /// Checks what cannot be kept: roles the tenant does not have, an empty or odd locale.
    pub fn check(&self, roles: &Roles) -> Result<(), PersonError> {
        if let Some(role) = self.roles.iter().find(|r| !roles.0.contains_key(*r)) {
            return Err(PersonError(format!("role `{role}` is not one of the tenant's")));
        }
        let locale_ok =
            |l: &str| (2..=16).contains(&l.len()) && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if let Some(locale) = self.locale.as_deref().filter(|l| !locale_ok(l)) {
            return Err(PersonError(format!("locale `{locale}` is not a language tag")));
        }
        if self.name.chars().count() > 200 {
            return Err(PersonError("a name is at most 200 characters".into()));
        }
        Ok(())
    }
}

/// A tenant's roles: each a set of scopes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Roles(pub BTreeMap<String, BTreeSet<String>>);

impl Roles {
    /// A role as given: a name of letters, digits, `-` and `_` (at most 64) and at most 64
    /// scopes, each like `orders:refund`.
    pub fn checked(name: &str, scopes: &[String]) -> Result<(String, BTreeSet<String>), PersonError> {
        let word = |s: &str| {
            !s.is_empty() && s.len() <= 64 && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
        };
        if !word(name) {
            return Err(PersonError(format!("`{name}` is not a role name (letters, digits, `-`, `_`)")));
        }
        if scopes.len() > 64 {
            return Err(PersonError("a role grants at most 64 scopes".into()));
        }
        let scope = |s: &str| s.len() <= 64 && s.split(':').all(word);
        if let Some(bad) = scopes.iter().find(|s| !scope(s)) {
            return Err(PersonError(format!("`{bad}` is not a scope (like `orders:refund`)")));
        }
        Ok((name.to_owned(), scopes.iter().cloned().collect()))
    }

    /// The scopes `roles` grant together (an unknown role grants nothing).
    pub fn scopes_of<'a>(&self, roles: impl IntoIterator<Item = &'a String>) -> BTreeSet<String> {
        roles.into_iter().filter_map(|r| self.0.get(r)).flatten().cloned().collect()
    }
}

/// A person as a message finds them: who, and what they may do now.
#[derive(Debug, Clone, PartialEq)]
pub struct Actor {
    pub id: ActorId,
    pub name: String,
    pub roles: Vec<String>,
    /// The union of the roles' scopes.
    pub scopes: BTreeSet<String>,
    pub locale: Option<String>,
}

impl Actor {
    pub fn of(person: &Person, roles: &Roles) -> Self {
        Self {
            id: person.id.clone(),
            name: person.name.clone(),
            roles: person.roles.clone(),
            scopes: roles.scopes_of(&person.roles),
            locale: person.locale.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_digits_and_roles_must_exist() {
        assert_eq!(
            Address::new(AddressKind::Whatsapp, "+55 11 99999-0000").map(|a| a.value),
            Ok("5511999990000".into())
        );
        assert!(Address::new(AddressKind::Phone, "call me").is_err());
        assert_eq!(Address::new(AddressKind::WhatsappUserId, " US.1 ").map(|a| a.value), Ok("US.1".into()));
        assert_eq!(Address::new(AddressKind::Telegram, "700000001").map(|a| a.value), Ok("tg:700000001".into()));
        assert_eq!(Address::new(AddressKind::Telegram, "tg:7").map(|a| a.value), Ok("tg:7".into()));
        assert!(Address::new(AddressKind::Telegram, "@ana").is_err());
        assert_eq!(Address::new(AddressKind::Slack, "U0ANA").map(|a| a.value), Ok("slack:U0ANA".into()));
        assert!(Address::new(AddressKind::Slack, "<@U0ANA>").is_err());
        assert_eq!(Address::new(AddressKind::Messenger, "2401").map(|a| a.value), Ok("fb:2401".into()));
        assert_eq!(Address::new(AddressKind::Instagram, "ig:1784").map(|a| a.value), Ok("ig:1784".into()));
        let line = "U206d25c2ea6bd87c17655609a1c37cb8";
        assert_eq!(Address::new(AddressKind::Line, line).map(|a| a.value), Ok(format!("line:{line}")));
        assert!(Address::new(AddressKind::Line, "U206d").is_err());
        let roles = Roles([("customer".to_owned(), BTreeSet::from(["orders:read".to_owned()]))].into());
        let person = |role: &str| Person {
            id: ActorId::parse("c-1").expect("id"),
            name: "Ana".into(),
            roles: vec![role.into()],
            locale: Some("pt-BR".into()),
            active: true,
            addresses: BTreeSet::new(),
        };
        assert!(person("customer").check(&roles).is_ok());
        assert!(person("ghost").check(&roles).is_err());
        assert_eq!(Actor::of(&person("customer"), &roles).scopes, BTreeSet::from(["orders:read".to_owned()]));
    }
}
