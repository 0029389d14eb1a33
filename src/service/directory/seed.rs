//! The directory file's roles and people, applied to the database on start and on every reload.
//! The file owns what it wrote (`source = file`): a row it made follows it, and one it no longer
//! lists goes. Once a row is changed through the API or an import it is the database's
//! (`source = api`), and the file leaves it alone: **the database wins**.

use std::collections::BTreeSet;

use serde_json::json;
use time::OffsetDateTime;

use super::People;
use super::change::{Change, ChangedBy, person_evidence, role_evidence};
use super::import::{BATCH, ROUNDS, Refreshes};
use crate::domain::command::TenantId;
use crate::domain::directory::{Person, Roles, Seed};
use crate::store::{BatchRow, Source, StoreError, Written};

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
            // A batch at a time, as an import writes: a file of 10,000 people took a transaction
            // each, half a minute before the gateway answered on PostgreSQL.
            let mut refreshes = Refreshes::new();
            for batch in people.chunks(BATCH) {
                self.seed_people(tenant, batch, now, &mut report).await?;
                refreshes.after(report.people_written as u64, self).await?;
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

    /// `people` of the file written in one transaction; those the database owns, or that match
    /// what is stored, are left alone. A batch whose people changed while it was read is read
    /// again; one that changes every time is left to whoever changes it.
    async fn seed_people(
        &self,
        tenant: &TenantId,
        people: &[Person],
        now: OffsetDateTime,
        report: &mut SeedReport,
    ) -> Result<(), StoreError> {
        let ids: Vec<String> = people.iter().map(|p| p.id.as_str().to_owned()).collect();
        for _ in 0..ROUNDS {
            let mut current = self.store.directory().get_many(tenant, &ids).await?;
            let (mut rows, mut before, mut kept) = (vec![], vec![], 0);
            for person in people {
                match current.remove(person.id.as_str()) {
                    Some(stored) if stored.source == Source::Api => kept += 1,
                    Some(stored) if stored.person == *person => {}
                    stored => {
                        rows.push(BatchRow { person, expected: stored.as_ref().map_or(0, |s| s.version) });
                        before.push(stored.map(|s| s.person));
                    }
                }
            }
            if rows.is_empty() {
                // Nothing of the batch to write (a restart with the same file): no transaction.
                report.kept_by_database += kept;
                return Ok(());
            }
            let evidence = |written: &[usize]| {
                let change = |i: usize| {
                    let (after, before) = (rows[i].person, before[i].as_ref());
                    let change = if before.is_some() { Change::Updated } else { Change::Created };
                    person_evidence(change, self.pseudonym(after.id.as_str()), before, Some(after), &ChangedBy::File)
                };
                written.iter().map(|&i| change(i)).collect()
            };
            let directory = self.store.directory();
            let Some(outcomes) = directory.write_batch(tenant, &rows, (Source::File, now), evidence).await? else {
                continue;
            };
            report.kept_by_database += kept;
            for (row, outcome) in rows.iter().zip(outcomes) {
                match outcome {
                    Written::Done(_) => report.people_written += 1,
                    Written::Stale => {}
                    Written::AddressTaken { address, owner } => {
                        let id = &row.person.id;
                        report.refused.push(format!("{tenant}: {id}: address {address} belongs to {owner}"));
                    }
                }
            }
            return Ok(());
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
        for id in self.store.directory().owned_by_file(tenant).await? {
            if listed.contains(id.as_str()) {
                continue;
            }
            let directory = self.store.directory();
            // Gone or changed through the API since the ids were read: no longer the file's.
            let Some(stored) = directory.get(tenant, &id).await?.filter(|p| p.source == Source::File) else {
                continue;
            };
            let pseudonym = self.pseudonym(stored.person.id.as_str());
            let evidence = person_evidence(Change::Deleted, pseudonym, Some(&stored.person), None, &ChangedBy::File);
            if directory.delete(tenant, &stored.person.id, stored.version, &[evidence], now).await? {
                report.people_removed += 1;
            }
        }
        Ok(())
    }
}
