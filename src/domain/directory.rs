//! The directory: which tenant a provider number belongs to, and who an actor is (roles and the
//! scopes they grant). Loaded from `config/directory.toml` and checked at start-up.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Deserialize;

use crate::domain::command::ActorId;

use crate::domain::command::TenantId;

/// What to do with a message from a sender the tenant does not list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownSenderPolicy {
    /// Refused with a reason, and the sender gets a reply saying so.
    #[default]
    Refuse,
    /// Stored and acknowledged, nothing said back.
    Ignore,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Tenant {
    pub id: TenantId,
    pub display_name: String,
    pub phone_number_ids: Vec<String>,
    pub unknown_sender: UnknownSenderPolicy,
    pub locale: String,
    actors: BTreeMap<String, Actor>,
    /// An actor's business-scoped user id (Meta's `user_id`), to its phone id.
    by_user_id: HashMap<String, String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Actor {
    pub id: ActorId,
    pub name: String,
    pub roles: Vec<String>,
    /// The union of the roles' scopes.
    pub scopes: BTreeSet<String>,
}

impl Tenant {
    /// The actor `id` names: their phone id (`wa_id`) or their business-scoped user id.
    pub fn actor(&self, id: &str) -> Option<&Actor> {
        self.actors.get(id).or_else(|| self.by_user_id.get(id).and_then(|phone| self.actors.get(phone)))
    }
}

#[derive(Debug, Clone, Default)]
pub struct Directory {
    tenants: BTreeMap<String, Tenant>,
    by_phone_number_id: HashMap<String, String>,
}

impl Directory {
    /// Builds the directory from its parsed file, refusing unknown roles and numbers claimed twice.
    pub fn build(file: DirectoryFile) -> Result<Self, String> {
        let mut directory = Self::default();
        let mut problems = vec![];
        for (name, raw) in file.tenants {
            let id = match TenantId::parse(&name) {
                Ok(id) => id,
                Err(e) => {
                    problems.push(format!("tenants.{name}: {e}"));
                    continue;
                }
            };
            let mut actors = BTreeMap::new();
            let mut by_user_id = HashMap::new();
            for (actor_name, raw_actor) in raw.actors {
                let actor_id = match ActorId::parse(&actor_name) {
                    Ok(actor_id) => actor_id,
                    Err(e) => {
                        problems.push(format!("tenants.{name}.actors.{actor_name}: {e}"));
                        continue;
                    }
                };
                let mut scopes = BTreeSet::new();
                for role in &raw_actor.roles {
                    match raw.roles.get(role) {
                        Some(granted) => scopes.extend(granted.iter().cloned()),
                        None => {
                            problems.push(format!("tenants.{name}.actors.{actor_name}: role `{role}` is not defined"))
                        }
                    }
                }
                if let Some(user_id) = raw_actor.user_id {
                    by_user_id.insert(user_id, actor_name.clone());
                }
                let actor = Actor { id: actor_id, name: raw_actor.name, roles: raw_actor.roles, scopes };
                actors.insert(actor_name, actor);
            }
            for number in raw.phone_number_ids.iter().chain(&raw.twilio_numbers) {
                if let Some(other) = directory.by_phone_number_id.insert(number.clone(), name.clone()) {
                    problems.push(format!("number {number} belongs to both `{other}` and `{name}`"));
                }
            }
            let tenant = Tenant {
                id,
                display_name: raw.display_name.unwrap_or_else(|| name.clone()),
                phone_number_ids: raw.phone_number_ids,
                unknown_sender: raw.unknown_sender,
                locale: raw.locale.unwrap_or_else(|| "en".into()),
                actors,
                by_user_id,
            };
            directory.tenants.insert(name, tenant);
        }
        if problems.is_empty() { Ok(directory) } else { Err(problems.join("; ")) }
    }

    /// The tenant a provider number (WhatsApp `phone_number_id`, a Twilio number) belongs to.
    pub fn tenant_for_number(&self, phone_number_id: &str) -> Option<&Tenant> {
        self.by_phone_number_id.get(phone_number_id).and_then(|name| self.tenants.get(name))
    }

    pub fn tenant(&self, id: &str) -> Option<&Tenant> {
        self.tenants.get(id)
    }

    pub fn tenants(&self) -> impl Iterator<Item = &Tenant> {
        self.tenants.values()
    }
}

/// `config/directory.toml` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirectoryFile {
    #[serde(default)]
    pub tenants: BTreeMap<String, RawTenant>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTenant {
    display_name: Option<String>,
    #[serde(default)]
    phone_number_ids: Vec<String>,
    /// Twilio numbers (`+14155238886`, without `whatsapp:`) that reach this tenant, for
    /// WhatsApp and SMS alike.
    #[serde(default)]
    twilio_numbers: Vec<String>,
    #[serde(default)]
    unknown_sender: UnknownSenderPolicy,
    locale: Option<String>,
    #[serde(default)]
    roles: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    actors: BTreeMap<String, RawActor>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawActor {
    #[serde(default)]
    name: String,
    #[serde(default)]
    roles: Vec<String>,
    /// Meta's business-scoped user id for this person (`US.…`), when they write with it.
    user_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Directory, String> {
        let file: DirectoryFile = toml::from_str(text).map_err(|e| e.to_string())?;
        Directory::build(file)
    }

    #[test]
    fn tenants_are_found_by_number_and_actors_get_their_roles_scopes() {
        let text = include_str!("../../config/directory.toml")
            .replace("${CHATGATE_DEMO_PHONE_NUMBER_ID:-100000000000001}", "100000000000001");
        let directory = parse(&text).expect("shipped directory");
        let demo = directory.tenant_for_number("100000000000001").expect("demo tenant");
        assert_eq!(demo.id.as_str(), "demo");
        assert_eq!(demo.unknown_sender, UnknownSenderPolicy::Refuse);
        let customer = demo.actor("15550000001").expect("customer");
        assert!(customer.scopes.contains("orders:refund") && !customer.scopes.contains("accounts:close"));
        assert!(demo.actor("15550000002").expect("admin").scopes.contains("accounts:close"));
        assert!(demo.actor("15559999999").is_none());
        assert!(directory.tenant_for_number("999").is_none());
    }

    #[test]
    fn unknown_roles_and_shared_numbers_are_refused() {
        let err = parse("[tenants.a]\n[tenants.a.actors.1]\nroles = [\"ghost\"]\n").expect_err("role");
        assert!(err.contains("role `ghost` is not defined"), "{err}");
        let err = parse("[tenants.a]\nphone_number_ids = [\"1\"]\n[tenants.b]\nphone_number_ids = [\"1\"]\n")
            .expect_err("shared");
        assert!(err.contains("belongs to both"), "{err}");
        assert!(parse("[tenants.a]\nunknown_sender = \"shrug\"\n").is_err());
    }
}
