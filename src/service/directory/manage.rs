//! An operator's changes to the directory (the API's and the console's): people made, changed,
//! deactivated and deleted, roles set and removed. Each is one versioned write with its evidence;
//! a change that crossed another is refused (`Stale`), never lost.

use time::OffsetDateTime;

use super::People;
use super::change::{Change, ChangedBy, person_evidence, role_evidence};
use crate::domain::command::TenantId;
use crate::domain::directory::{Person, PersonError, PersonFields, Roles};
use crate::service::scopes::DEPLOYMENT_SCOPES;
use crate::store::{PersonWrite, Search, Source, StoreError, StoredPerson, Written};

/// Why a directory change was not made.
#[derive(Debug, thiserror::Error)]
pub enum DirectoryError {
    #[error("no person `{0}` in this tenant")]
    NotFound(String),
    #[error("`{0}` is in the directory already")]
    Exists(String),
    /// The person is at another version than the one the caller read.
    #[error("the person is at version {current}, not {expected}")]
    Stale { expected: i64, current: i64 },
    #[error("the address {address} belongs to `{owner}`")]
    AddressTaken { address: String, owner: String },
    #[error("{0}")]
    Invalid(#[from] PersonError),
    /// A role that people (or the tenant's strangers) hold cannot be removed.
    #[error("{0}")]
    RoleInUse(String),
    /// The step-up proof for a high-risk change was used before.
    #[error("the step-up token was used before")]
    ProofUsed,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Who makes a change to which tenant's directory, when.
#[derive(Debug, Clone)]
pub struct Changing<'a> {
    pub tenant: &'a TenantId,
    pub by: ChangedBy,
    pub at: OffsetDateTime,
}

impl People {
    /// Adds a person; `Exists` when the id is taken.
    pub async fn create(&self, who: &Changing<'_>, fields: &PersonFields) -> Result<StoredPerson, DirectoryError> {
        let id = fields.id()?;
        if self.store.directory().get(who.tenant, id.as_str()).await?.is_some() {
            return Err(DirectoryError::Exists(id.to_string()));
        }
        let person = fields.apply(&id, None)?;
        self.write(who, &person, None).await
    }

    /// Changes a person by `fields` (what is left out stays); at `if_version` when given.
    pub async fn update(
        &self,
        who: &Changing<'_>,
        id: &str,
        fields: &PersonFields,
        if_version: Option<i64>,
    ) -> Result<StoredPerson, DirectoryError> {
        let current = self.current(who.tenant, id, if_version).await?;
        let person = fields.apply(&current.person.id, Some(&current.person))?;
        if person == current.person {
            return Ok(current);
        }
        self.write(who, &person, Some(&current)).await
    }

    /// Deletes a person from the directory (their commands and messages stay; see `erase`).
    pub async fn delete(&self, who: &Changing<'_>, id: &str, if_version: Option<i64>) -> Result<(), DirectoryError> {
        let current = self.current(who.tenant, id, if_version).await?;
        let evidence = person_evidence(Change::Deleted, self.pseudonym(id), Some(&current.person), None, &who.by);
        let directory = self.store.directory();
        if !directory.delete(who.tenant, &current.person.id, current.version, &[evidence], who.at).await? {
            return Err(self.stale(who.tenant, id, current.version).await);
        }
        self.changed(who.tenant);
        Ok(())
    }

    /// Sets a role's scopes (made if new).
    pub async fn set_role(&self, who: &Changing<'_>, name: &str, scopes: &[String]) -> Result<(), DirectoryError> {
        let (name, scopes) = Roles::checked(name, scopes)?;
        if let Some(scope) = scopes.iter().find(|s| DEPLOYMENT_SCOPES.contains(&s.as_str())) {
            return Err(
                PersonError(format!("`{scope}` acts on the whole deployment; no tenant's role grants it")).into()
            );
        }
        let current = self.store.directory().roles_owned(who.tenant).await?;
        let before = current.iter().find(|r| r.name == name);
        if before.is_some_and(|r| r.scopes == scopes && r.source == Source::Api) {
            return Ok(());
        }
        let from = before.map(|r| serde_json::json!(r.scopes));
        let evidence = role_evidence(&name, from.as_ref(), Some(&serde_json::json!(scopes)), &who.by);
        let role = (name.as_str(), Some(&scopes), Source::Api);
        self.store.directory().set_role(who.tenant, role, &[evidence], who.at).await?;
        self.changed(who.tenant);
        Ok(())
    }

    /// Removes a role nobody holds (`stranger_role`: the tenant's role for strangers, kept).
    pub async fn remove_role(
        &self,
        who: &Changing<'_>,
        name: &str,
        stranger_role: Option<&str>,
    ) -> Result<(), DirectoryError> {
        let current = self.store.directory().roles_owned(who.tenant).await?;
        let Some(role) = current.iter().find(|r| r.name == name) else {
            return Err(DirectoryError::NotFound(format!("role {name}")));
        };
        if stranger_role == Some(name) {
            return Err(DirectoryError::RoleInUse(format!("`{name}` is the tenant's role for unknown senders")));
        }
        let holding = self.store.directory().holding(who.tenant, name).await?;
        if holding > 0 {
            return Err(DirectoryError::RoleInUse(format!("{holding} people hold `{name}`; change them first")));
        }
        let evidence = role_evidence(name, Some(&serde_json::json!(role.scopes)), None, &who.by);
        self.store.directory().set_role(who.tenant, (name, None, Source::Api), &[evidence], who.at).await?;
        self.changed(who.tenant);
        Ok(())
    }

    /// The person `id` at `if_version`, when given.
    async fn current(
        &self,
        tenant: &TenantId,
        id: &str,
        if_version: Option<i64>,
    ) -> Result<StoredPerson, DirectoryError> {
        let current =
            self.store.directory().get(tenant, id).await?.ok_or_else(|| DirectoryError::NotFound(id.into()))?;
        match if_version {
            Some(expected) if expected != current.version => {
                Err(DirectoryError::Stale { expected, current: current.version })
            }
            _ => Ok(current),
        }
    }

    /// Writes `person` (new when `before` is none) with the change's evidence.
    async fn write(
        &self,
        who: &Changing<'_>,
        person: &Person,
        before: Option<&StoredPerson>,
    ) -> Result<StoredPerson, DirectoryError> {
        let change = change_of(before.map(|b| &b.person), person);
        let pseudonym = self.pseudonym(person.id.as_str());
        let evidence = person_evidence(change, pseudonym, before.map(|b| &b.person), Some(person), &who.by);
        self.write_with(who, person, before, evidence).await
    }

    /// Writes `person` with `evidence` of the change (see `write`).
    pub(super) async fn write_with(
        &self,
        who: &Changing<'_>,
        person: &Person,
        before: Option<&StoredPerson>,
        evidence: crate::domain::evidence::EvidenceDraft,
    ) -> Result<StoredPerson, DirectoryError> {
        person.check(&self.roles(who.tenant).await?)?;
        let expected = before.map_or(0, |b| b.version);
        let write = PersonWrite { tenant: who.tenant, person, source: Source::Api, expected, at: who.at };
        match self.store.directory().write(&write, &[evidence]).await? {
            Written::Done(_) => {}
            Written::Stale if expected == 0 => return Err(DirectoryError::Exists(person.id.to_string())),
            Written::Stale => return Err(self.stale(who.tenant, person.id.as_str(), expected).await),
            Written::AddressTaken { address, owner } => return Err(DirectoryError::AddressTaken { address, owner }),
        }
        self.changed(who.tenant);
        let stored = self.store.directory().get(who.tenant, person.id.as_str()).await?;
        stored.ok_or_else(|| DirectoryError::NotFound(person.id.to_string()))
    }

    async fn stale(&self, tenant: &TenantId, id: &str, expected: i64) -> DirectoryError {
        match self.store.directory().get(tenant, id).await {
            Ok(Some(now)) => DirectoryError::Stale { expected, current: now.version },
            Ok(None) => DirectoryError::NotFound(id.to_owned()),
            Err(error) => error.into(),
        }
    }

    /// A person by id, as stored.
    pub async fn get(&self, tenant: &TenantId, id: &str) -> Result<Option<StoredPerson>, StoreError> {
        self.store.directory().get(tenant, id).await
    }

    /// A page of people (see `Search`).
    pub async fn list(&self, tenant: &TenantId, search: &Search) -> Result<Vec<StoredPerson>, StoreError> {
        self.store.directory().list(tenant, search).await
    }
}

/// What a change from `before` to `after` is called in the evidence.
pub(super) fn change_of(before: Option<&Person>, after: &Person) -> Change {
    match before {
        None => Change::Created,
        Some(b) if b.active && !after.active => Change::Deactivated,
        Some(b) if !b.active && after.active => Change::Reactivated,
        Some(_) => Change::Updated,
    }
}
