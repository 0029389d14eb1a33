//! A person as a caller gives them: the API's body and an import line are the same shape, so a
//! file exported, edited and imported again reads as the API would. Every field but `id` may be
//! left out: what is left out keeps what the person has (or the default for someone new).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

use super::people::{Address, AddressKind, Person, PersonError};
use crate::domain::command::ActorId;

/// Ids no person may have: the gateway names someone nobody listed `unknown:…` and someone
/// erased `erased:…`.
pub const RESERVED_ID_PREFIXES: &[&str] = &["unknown:", "erased:"];
/// The byte a JSON object begins with.
const JSON_OBJECT_OPENS: &[u8] = b"{";
/// How many addresses one person may have.
pub const MAX_ADDRESSES: usize = 16;

/// One address or several, under one kind (`"whatsapp": "5511999990000"` or a list).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// A person's fields as given: `{"id": "c-1042", "name": "Ana", "roles": ["customer"],
/// "addresses": {"whatsapp": "5511999990000"}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PersonFields {
    /// Their id in the tenant (letters, digits, `-_.+:@`; at most 128). An update's path names
    /// them; given there too, it must be the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Role names the tenant has; given, they replace the person's roles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles: Option<Vec<String>>,
    /// Their language (`pt-BR`); `null` clears it, and the tenant's is used.
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub locale: Option<Option<String>>,
    /// `false` deactivates them: their messages are handled as a stranger's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<bool>,
    /// Where they write from, by kind (`whatsapp`, `whatsapp_user_id`, `phone`); given, these
    /// replace all their addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<BTreeMap<AddressKind, OneOrMany>>,
}

/// A field that is there as `null` is `Some(None)`; one left out is `None` (`serde(default)`).
fn nullable<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

impl PersonFields {
    /// A person's fields written as a JSON object (an API body, an import line). Only an object:
    /// serde would also read the struct from an array (`["c-1042"]` as the id), a shape nobody
    /// means.
    pub fn from_json(text: &[u8]) -> Result<Self, String> {
        if !text.trim_ascii_start().starts_with(JSON_OBJECT_OPENS) {
            return Err("a person's fields are a JSON object".into());
        }
        serde_json::from_slice(text).map_err(|e| e.to_string())
    }

    /// The fields of `person` as an export line (which an import reads back unchanged).
    pub fn of(person: &Person) -> Self {
        let mut addresses: BTreeMap<AddressKind, Vec<String>> = BTreeMap::new();
        for address in &person.addresses {
            addresses.entry(address.kind).or_default().push(address.value.clone());
        }
        let addresses = addresses
            .into_iter()
            .map(|(kind, mut values)| {
                let one = if values.len() == 1 { values.pop().map(OneOrMany::One) } else { None };
                (kind, one.unwrap_or(OneOrMany::Many(values)))
            })
            .collect();
        Self {
            id: Some(person.id.as_str().to_owned()),
            name: Some(person.name.clone()),
            roles: Some(person.roles.clone()),
            locale: Some(person.locale.clone()),
            active: Some(person.active),
            addresses: Some(addresses),
        }
    }

    /// The id the fields name, checked.
    pub fn id(&self) -> Result<ActorId, PersonError> {
        let raw = self.id.as_deref().ok_or_else(|| PersonError("`id` is required".into()))?;
        actor_id(raw)
    }

    /// The person these fields make of `current` (or of nobody: a new person named `id`).
    pub fn apply(&self, id: &ActorId, current: Option<&Person>) -> Result<Person, PersonError> {
        if let Some(given) = &self.id
            && actor_id(given)? != *id
        {
            return Err(PersonError(format!("`id` is `{given}`, not `{id}`")));
        }
        let mut person = current.cloned().unwrap_or_else(|| Person {
            id: id.clone(),
            name: String::new(),
            roles: vec![],
            locale: None,
            active: true,
            addresses: BTreeSet::new(),
        });
        if let Some(name) = &self.name {
            person.name = text("name", name, 200)?;
        }
        if let Some(roles) = &self.roles {
            let mut seen = BTreeSet::new();
            person.roles = roles.iter().map(|r| r.trim().to_owned()).filter(|r| seen.insert(r.clone())).collect();
        }
        if let Some(locale) = &self.locale {
            person.locale = locale.as_deref().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned);
        }
        if let Some(active) = self.active {
            person.active = active;
        }
        if let Some(addresses) = &self.addresses {
            person.addresses = read_addresses(addresses)?;
        }
        Ok(person)
    }
}

fn actor_id(raw: &str) -> Result<ActorId, PersonError> {
    let id = ActorId::parse(raw).map_err(|e| PersonError(format!("`id`: {e}")))?;
    if let Some(prefix) = RESERVED_ID_PREFIXES.iter().find(|p| id.as_str().starts_with(*p)) {
        return Err(PersonError(format!("`id` may not begin with `{prefix}`: the gateway names people so")));
    }
    Ok(id)
}

/// Text a person is shown by: trimmed, at most `max` characters, no control characters.
fn text(field: &str, raw: &str, max: usize) -> Result<String, PersonError> {
    let trimmed = raw.trim();
    if trimmed.chars().count() > max {
        return Err(PersonError(format!("`{field}` is at most {max} characters")));
    }
    if trimmed.chars().any(char::is_control) {
        return Err(PersonError(format!("`{field}` holds a control character")));
    }
    Ok(trimmed.to_owned())
}

fn read_addresses(given: &BTreeMap<AddressKind, OneOrMany>) -> Result<BTreeSet<Address>, PersonError> {
    let mut addresses = BTreeSet::new();
    for (kind, values) in given {
        let values = match values {
            OneOrMany::One(value) => std::slice::from_ref(value),
            OneOrMany::Many(values) => values.as_slice(),
        };
        for value in values {
            addresses.insert(Address::new(*kind, value).map_err(|e| PersonError(format!("`addresses.{kind}`: {e}")))?);
        }
    }
    if addresses.len() > MAX_ADDRESSES {
        return Err(PersonError(format!("a person has at most {MAX_ADDRESSES} addresses")));
    }
    Ok(addresses)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(json: &str) -> PersonFields {
        serde_json::from_str(json).expect("fields")
    }

    #[test]
    fn a_line_makes_a_person_and_what_is_left_out_is_kept() {
        let line = fields(
            r#"{"id": "c-1042", "name": " Ana ", "roles": ["customer"],
                "addresses": {"whatsapp": "+55 11 99999-0000"}}"#,
        );
        let id = line.id().expect("id");
        let ana = line.apply(&id, None).expect("Ana");
        assert_eq!((ana.name.as_str(), ana.active), ("Ana", true));
        assert_eq!(ana.addresses.iter().next().map(|a| a.value.as_str()), Some("5511999990000"));
        let renamed = fields(r#"{"name": "Ana Maria", "locale": "pt-BR"}"#).apply(&id, Some(&ana)).expect("renamed");
        assert_eq!((renamed.roles.clone(), renamed.addresses.clone()), (ana.roles.clone(), ana.addresses.clone()));
        let cleared = fields(r#"{"locale": null}"#).apply(&id, Some(&renamed)).expect("cleared");
        assert_eq!(cleared.locale, None);
        assert_eq!(PersonFields::of(&renamed).apply(&id, None), Ok(renamed));
    }

    #[test]
    fn odd_fields_ids_and_addresses_are_refused() {
        assert!(serde_json::from_str::<PersonFields>(r#"{"id": "a", "rolez": []}"#).is_err());
        assert!(fields(r#"{"name": "x"}"#).id().is_err());
        assert!(fields(r#"{"id": "unknown:whatsapp:1"}"#).id().is_err());
        let id = ActorId::parse("a").expect("id");
        assert!(fields(r#"{"id": "b"}"#).apply(&id, None).is_err());
        assert!(fields(r#"{"name": "a\u0000b"}"#).apply(&id, None).is_err());
        assert!(fields(r#"{"addresses": {"whatsapp": "call me"}}"#).apply(&id, None).is_err());
        assert!(serde_json::from_str::<PersonFields>(r#"{"addresses": {"fax": "1"}}"#).is_err());
        // serde reads a struct from an array too; a person's fields are an object only.
        assert!(serde_json::from_str::<PersonFields>(r#"["c-1042"]"#).is_ok(), "what from_json is for");
        for array in [&b"[\"c-1042\"]"[..], b" [null, null]", b"null", b"\"c-1\""] {
            assert!(PersonFields::from_json(array).is_err(), "{}", String::from_utf8_lossy(array));
        }
        assert_eq!(PersonFields::from_json(b" {\"id\": \"c-1\"}").map(|f| f.id), Ok(Some("c-1".into())));
    }
}
