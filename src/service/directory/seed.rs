//! The directory file's roles and people, applied to the database on start and on every reload.
//! The file owns what it wrote (`source = file`): a row it made follows it, and one it no longer
//! lists goes. Once a row is changed through the API or an import it is the database's
//! (`source = api`), and the file leaves it alone: **the database wins**.

use std::collections::BTreeSet;

use serde_json::json;
use time::OffsetDateTime;

use super::People;
use super::change::{Change, ChangedBy, person_evidence, role_evidence};
use crate::domain::command::TenantId;
use crate::domain::directory::{Person, Roles, Seed};
use crate::store::{PersonWrite, Source, StoreError, Written};

/// What applying the file changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeedReport {
    pub roles_set: usize,
    pub people_written: usize,
    pub people_removed: usize,
    /// Rows the file names that the database owns now (changed through the API): left alone.
    pub kept_by_database: usize,
    /// People the file lists that could not be written (an address another person has).
    pub refused: Vec<String>,
}

impl People {
    /// Applies `seed` (the directory file) to the database.
    pub async fn seed(&self, seed: &Seed, now: OffsetDateTime) -> Result<SeedReport, StoreError> {
        let mut report = SeedReport::default();
        for (tenant, (roles, people)) in &seed.tenants {
            self.seed_roles(tenant, roles, now, &mut report).await?;
            for person in people {
                self.seed_person(tenant, person, now, &mut report).await?;
            }
            self.remove_unlisted(tenant, people, now, &mut report).await?;
            self.changed(tenant);
        }
        Ok(report)
    }

    async fn seed_roles(
        &self,
        tenant: &TenantId,
        roles: &Roles,
        now: OffsetDateTime,
        report: &mut SeedReport,
    ) -> Result<(), StoreError> {
        let owned = self.store.directory().roles_owned(tenant).await?;
        for (name, scopes) in &roles.0 {
            let current = owned.iter().find(|role| role.name == *name);
            match current {
                Some(role) if role.source == Source::Api => report.kept_by_database += 1,
                Some(role) if role.scopes == *scopes => {}
                _ => {
                    let from = current.map(|role| json!(role.scopes));
                    let evidence = role_evidence(name, from.as_ref(), Some(&json!(scopes)), &ChangedBy::File);
                    let role = (name.as_str(), Some(scopes), Source::File);
                    self.store.directory().set_role(tenant, role, &[evidence], now).await?;
                    report.roles_set += 1;
                }
            }
        }
        for role in owned.iter().filter(|role| !roles.0.contains_key(&role.name)) {
            if role.source == Source::File {
                let evidence = role_evidence(&role.name, Some(&json!(role.scopes)), None, &ChangedBy::File);
                self.store.directory().set_role(tenant, (&role.name, None, Source::File), &[evidence], now).await?;
                report.roles_set += 1;
            }
        }
        Ok(())
    }

    async fn seed_person(
        &self,
        tenant: &TenantId,
        person: &Person,
        now: OffsetDateTime,
        report: &mut SeedReport,
    ) -> Result<(), StoreError> {
        let current = self.store.directory().get(tenant, person.id.as_str()).await?;
        let (change, expected, before) = match &current {
            None => (Change::Created, 0, None),
            Some(stored) if stored.source == Source::Api => {
                report.kept_by_database += 1;
                return Ok(());
            }
            Some(stored) if stored.person == *person => return Ok(()),
            Some(stored) => (Change::Updated, stored.version, Some(&stored.person)),
        };
        let pseudonym = self.pseudonym(person.id.as_str());
        let evidence = person_evidence(change, pseudonym, before, Some(person), &ChangedBy::File);
        let write = PersonWrite { tenant, person, source: Source::File, expected, at: now };
        match self.store.directory().write(&write, &[evidence]).await? {
            Written::Done(_) => report.people_written += 1,
            Written::Stale => {}
            Written::AddressTaken { address, owner } => {
                report.refused.push(format!("{tenant}: {}: address {address} belongs to {owner}", person.id));
            }
        }
        Ok(())
    }

    /// The people the file made that it no longer lists.
    async fn remove_unlisted(
        &self,
        tenant: &TenantId,
        listed: &[Person],
        now: OffsetDateTime,
        report: &mut SeedReport,
    ) -> Result<(), StoreError> {
        let listed: BTreeSet<&str> = listed.iter().map(|p| p.id.as_str()).collect();
        for stored in self.store.directory().owned_by_file(tenant).await? {
            if listed.contains(stored.person.id.as_str()) {
                continue;
            }
            let pseudonym = self.pseudonym(stored.person.id.as_str());
            let evidence = person_evidence(Change::Deleted, pseudonym, Some(&stored.person), None, &ChangedBy::File);
            let directory = self.store.directory();
            if directory.delete(tenant, &stored.person.id, stored.version, &[evidence], now).await? {
                report.people_removed += 1;
            }
        }
        Ok(())
    }
}
