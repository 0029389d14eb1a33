//! People: who writes to each tenant, looked up in the database when their message comes, and
//! changed by the operator API, imports and the directory file — each change written with its
//! evidence in the tenant's chain.
//!
//! - `cache`: a few seconds' memory of lookups (no whole directory in memory).
//! - `change`: one person's change as evidence (who changed whom, from what to what).
//! - `manage`: an operator's changes: people made, changed, deleted; roles set and removed.
//! - `erase`: a person erased on request, with a step-up proof.
//! - `identity`: what a tenant's identity resolver said of senders the directory does not list.
//! - `link`: a person's one-time codes for linking their other channels, redeemed and undone.
//! - `import`: many people from JSON lines or CSV, a batch at a time, each line on its own.
//! - `seed`: the directory file's roles and people, applied on start and on reload.

mod cache;
mod change;
mod erase;
mod identity;
mod import;
mod link;
mod manage;
mod seed;

use std::collections::BTreeSet;
use std::sync::Arc;

pub use cache::TTL as LOOKUP_TTL;
pub use change::{Change, ChangedBy};
pub use erase::{ErasureReport, erasure_binding};
pub use identity::Resolution;
pub use import::{ImportError, ImportFormat, ImportReport, Importer, LineProblem};
pub use link::{IssuedCode, LinkRules, Linked, Unlinked};
pub use manage::{Changing, DirectoryError};
pub use seed::SeedReport;

use crate::domain::command::{ActorId, TenantId};
use crate::domain::directory::{Actor, Person, Roles};
use crate::domain::evidence::Pseudonymizer;
use crate::store::{Store, StoreError};

/// What the directory lets a person do now: their roles, and the scopes those give.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Standing {
    pub roles: BTreeSet<String>,
    pub scopes: BTreeSet<String>,
}

#[derive(Debug, Clone)]
pub struct People {
    store: Store,
    pseudonymizer: Pseudonymizer,
    lookups: Arc<cache::Lookups>,
    links: LinkRules,
}

impl People {
    pub fn new(store: Store, pseudonymizer: Pseudonymizer) -> Self {
        Self { store, pseudonymizer, lookups: Arc::default(), links: LinkRules::default() }
    }

    /// The active person an address names in `tenant`, with the scopes their roles grant now.
    pub async fn find(&self, tenant: &TenantId, address: &str) -> Result<Option<Actor>, StoreError> {
        let key = address_key(address);
        if let Some(known) = self.lookups.get(tenant.as_str(), &key) {
            return Ok(known);
        }
        let stored = self.store.directory().find(tenant, address).await?;
        let found = self.actor_of(tenant, stored.as_ref().map(|stored| &stored.person), None).await?;
        self.lookups.put(tenant.as_str(), &key, found.clone());
        Ok(found)
    }

    /// The person an address names in `tenant` as this process remembers them, without asking
    /// the database (`None`: not a person, or not remembered).
    pub fn remembered(&self, tenant: &TenantId, address: &str) -> Option<Actor> {
        self.lookups.get(tenant.as_str(), &address_key(address)).flatten()
    }

    /// Looks up, at once, every one of `addresses` not looked up within half the memory's `TTL`
    /// (so that what is remembered is still remembered while the batch is handled), so that
    /// [`People::find`] then answers each from memory: a batch of messages costs four queries
    /// (holders, people, their addresses, the tenant's roles), not four per sender.
    pub async fn know(&self, tenant: &TenantId, addresses: &[&str]) -> Result<(), StoreError> {
        let unknown: BTreeSet<String> = addresses
            .iter()
            .filter(|address| self.lookups.get_within(tenant.as_str(), &address_key(address), cache::TTL / 2).is_none())
            .map(|address| (*address).to_owned())
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        let unknown: Vec<String> = unknown.into_iter().collect();
        let directory = self.store.directory();
        let holders = directory.holders(tenant, &unknown).await?;
        let ids: Vec<String> = holders.values().cloned().collect::<BTreeSet<_>>().into_iter().collect();
        let people = if ids.is_empty() { Default::default() } else { directory.get_many(tenant, &ids).await? };
        let roles = if people.values().any(|stored| stored.person.active) {
            self.roles(tenant).await?
        } else {
            Roles::default()
        };
        for address in &unknown {
            let person = holders.get(address).and_then(|id| people.get(id)).map(|stored| &stored.person);
            let found = self.actor_of(tenant, person, Some(&roles)).await?;
            self.lookups.put(tenant.as_str(), &address_key(address), found);
        }
        Ok(())
    }

    /// The active person `id` is, with their scopes now.
    pub async fn actor(&self, tenant: &TenantId, id: &str) -> Result<Option<Actor>, StoreError> {
        let key = format!("id:{id}");
        if let Some(known) = self.lookups.get(tenant.as_str(), &key) {
            return Ok(known);
        }
        let stored = self.store.directory().get(tenant, id).await?;
        let found = self.actor_of(tenant, stored.as_ref().map(|stored| &stored.person), None).await?;
        self.lookups.put(tenant.as_str(), &key, found.clone());
        Ok(found)
    }

    /// Who `person` acts as now: nobody once deactivated; else with the scopes `roles` grant, or
    /// the tenant's roles looked up now (only for an active person).
    async fn actor_of(
        &self,
        tenant: &TenantId,
        person: Option<&Person>,
        roles: Option<&Roles>,
    ) -> Result<Option<Actor>, StoreError> {
        let Some(person) = person.filter(|person| person.active) else { return Ok(None) };
        let looked_up;
        let roles = match roles {
            Some(roles) => roles,
            None => {
                looked_up = self.roles(tenant).await?;
                &looked_up
            }
        };
        Ok(Some(Actor::of(person, roles)))
    }

    /// The scopes `actor` holds now in `tenant` (none for someone the directory no longer lists or
    /// who was deactivated); someone handled in the tenant's role for strangers holds that role's.
    pub async fn scopes_of(
        &self,
        tenant: &TenantId,
        actor: &str,
        stranger_role: Option<&str>,
    ) -> Result<BTreeSet<String>, StoreError> {
        Ok(self.standing_of(tenant, actor, stranger_role).await?.scopes)
    }

    /// The roles the directory gives `actor` now, and their scopes: a listed person's, one a
    /// resolver named (its latest answer), a stranger's role for strangers; none for anyone else.
    pub async fn standing_of(
        &self,
        tenant: &TenantId,
        actor: &str,
        stranger_role: Option<&str>,
    ) -> Result<Standing, StoreError> {
        let of = |actor: Actor| Standing { roles: actor.roles.into_iter().collect(), scopes: actor.scopes };
        if let Some(actor) = self.actor(tenant, actor).await? {
            return Ok(of(actor));
        }
        if let Some(person) = self.store.identities().person(tenant, actor).await? {
            return Ok(of(self.resolved_actor(tenant, &person).await?));
        }
        match stranger_role {
            Some(role) if actor.starts_with(STRANGER_PREFIX) => {
                let role = role.to_owned();
                let scopes = self.roles(tenant).await?.scopes_of([&role]);
                Ok(Standing { roles: BTreeSet::from([role]), scopes })
            }
            _ => Ok(Standing::default()),
        }
    }

    /// An address as the directory keeps it: a number without its `+`.
    pub fn address_of(raw: &str) -> &str {
        raw.trim().trim_start_matches('+')
    }

    /// Someone nobody listed, when the tenant gives strangers a role (`stranger_role`): a person
    /// in that role under an id made of their address (`unknown:whatsapp:15550009999`).
    pub async fn stranger(
        &self,
        tenant: &TenantId,
        (channel, address): (&str, &str),
        stranger_role: Option<&str>,
        name: Option<&str>,
    ) -> Result<Option<Actor>, StoreError> {
        let Some(role) = stranger_role else { return Ok(None) };
        let Ok(id) = ActorId::parse(&format!("{STRANGER_PREFIX}{channel}:{address}")) else { return Ok(None) };
        let scopes = self.roles(tenant).await?.scopes_of([&role.to_owned()]);
        let name = name.unwrap_or_default().to_owned();
        Ok(Some(Actor { id, name, roles: vec![role.to_owned()], scopes, locale: None }))
    }

    pub async fn roles(&self, tenant: &TenantId) -> Result<Roles, StoreError> {
        self.store.directory().roles(tenant).await
    }

    pub(crate) fn pseudonym(&self, value: &str) -> String {
        self.pseudonymizer.pseudonym(value)
    }

    /// This process changed `tenant`'s directory: lookups are made afresh.
    pub(crate) fn changed(&self, tenant: &TenantId) {
        self.lookups.forget(tenant.as_str());
    }
}

/// What a lookup by address is remembered under.
fn address_key(address: &str) -> String {
    format!("address:{address}")
}

/// How the id of someone nobody listed begins (`unknown:whatsapp:15550009999`): their commands
/// name them by their address, under the tenant's role for strangers.
pub const STRANGER_PREFIX: &str = "unknown:";
