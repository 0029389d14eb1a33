//! Senders the directory does not list, for a tenant with an identity resolver: what the
//! resolver's last answer says of them (shared by every instance through the database), and
//! keeping that answer when it comes.

use time::OffsetDateTime;

use super::People;
use crate::domain::command::TenantId;
use crate::domain::directory::{Actor, Resolved, Resolver};
use crate::store::{StoreError, StoredAnswer};

/// What is known of a sender the directory does not list.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    /// The resolver named them, and the answer holds.
    Known(Actor),
    /// The resolver said "unknown", and the answer holds.
    Unknown,
    /// No answer holds, or messages from them already wait for one: this one waits too.
    Ask,
}

impl People {
    /// What the resolver's answers say of `address` now.
    pub async fn resolution(
        &self,
        tenant: &TenantId,
        address: &str,
        now: OffsetDateTime,
    ) -> Result<Resolution, StoreError> {
        if self.store.inbox().parked_from(tenant, address).await? {
            return Ok(Resolution::Ask);
        }
        match self.store.identities().answer(tenant, address).await? {
            Some(answer) if answer.expires_at > now => match answer.person {
                Some(person) => Ok(Resolution::Known(self.resolved_actor(tenant, &person).await?)),
                None => Ok(Resolution::Unknown),
            },
            _ => Ok(Resolution::Ask),
        }
    }

    /// Who the resolver's latest answer about `address` named, however old (`None`: it said
    /// "unknown", or never answered): for a message that waited for that answer.
    pub async fn answered_as(&self, tenant: &TenantId, address: &str) -> Result<Option<Actor>, StoreError> {
        match self.store.identities().answer(tenant, address).await? {
            Some(StoredAnswer { person: Some(person), .. }) => Ok(Some(self.resolved_actor(tenant, &person).await?)),
            _ => Ok(None),
        }
    }

    /// Keeps the resolver's answer about `address` for as long as the tenant says.
    pub async fn answered(
        &self,
        (tenant, address): (&TenantId, &str),
        person: Option<&Resolved>,
        resolver: &Resolver,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let ttl = if person.is_some() { resolver.known_ttl } else { resolver.unknown_ttl };
        let expires_at = now + ttl;
        self.store.identities().answered((tenant, address), person, (now, expires_at)).await
    }

    /// A person as a resolver named them, with the scopes the tenant's roles grant them now (a
    /// role the tenant does not have grants nothing).
    pub async fn resolved_actor(&self, tenant: &TenantId, person: &Resolved) -> Result<Actor, StoreError> {
        let roles = self.roles(tenant).await?;
        let scopes = roles.scopes_of(&person.roles);
        Ok(Actor {
            id: person.id.clone(),
            name: person.name.clone(),
            roles: person.roles.clone(),
            scopes,
            locale: person.locale.clone(),
        })
    }
}
