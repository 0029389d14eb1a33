//! Many people written in one transaction, as an import writes them: a handful of statements for
//! hundreds of people, with the evidence of what was written. The rows are applied as if one
//! after another: a row whose address another person holds at that point (in the database or by
//! an earlier row) is refused and the rest are written.

use std::collections::{HashMap, HashSet};

use time::OffsetDateTime;

use super::people::{holders, replace_addresses};
use super::{Source, Written};
use crate::domain::command::TenantId;
use crate::domain::directory::Person;
use crate::domain::evidence::EvidenceDraft;
use crate::store::evidence::append_all;
use crate::store::rows::{Param, insert_rows, to_ms, update_rows};
use crate::store::{Directory, StoreError};

/// One person of a batch, read at `expected` (0: they did not exist).
#[derive(Debug, Clone, Copy)]
pub struct BatchRow<'a> {
    pub person: &'a Person,
    pub expected: i64,
}

impl Directory<'_> {
    /// Brings the planner's statistics of the directory's tables up to date. An import grows
    /// them from a few rows to many, and PostgreSQL's plans for a batch's `IN (…)` reads, made
    /// while they were small, scan the whole tenant for every batch (2 s a batch of 500 at
    /// 100,000 people, found by `auto_explain`); SQLite's plans do not depend on them.
    pub async fn refresh_statistics(self) -> Result<(), StoreError> {
        if self.store.backend() == crate::store::BackendKind::Postgres {
            sqlx::query("ANALYZE directory_people, directory_addresses").execute(self.store.pool()).await?;
        }
        Ok(())
    }

    /// Writes `rows` with the evidence `evidence` makes of those written (their indexes), in one
    /// transaction. `None` when any of them changed since it was read: nothing is written, and
    /// the caller reads them again. Otherwise what each row came to, in order.
    pub async fn write_batch(
        self,
        tenant: &TenantId,
        rows: &[BatchRow<'_>],
        (source, at): (Source, OffsetDateTime),
        evidence: impl FnOnce(&[usize]) -> Vec<EvidenceDraft>,
    ) -> Result<Option<Vec<Written>>, StoreError> {
        let mut tx = self.store.begin().await?;
        let addresses: Vec<String> =
            rows.iter().flat_map(|r| r.person.addresses.iter().map(|a| a.value.clone())).collect();
        let held = holders(&mut tx, tenant, &addresses).await?;
        let outcomes = apply_in_order(rows, held);
        let written: Vec<usize> = (0..rows.len()).filter(|&i| outcomes[i] == Written::Done(0)).collect();
        if written.is_empty() {
            tx.rollback().await?;
            return Ok(Some(outcomes));
        }
        let (new, known): (Vec<usize>, Vec<usize>) = written.iter().partition(|&&i| rows[i].expected == 0);
        let wanted = (new.len(), known.len());
        let inserted = insert_people(&mut tx, tenant, new.iter().map(|&i| rows[i].person), (source, at)).await?;
        let updated = update_people(&mut tx, tenant, known.iter().map(|&i| rows[i]), (source, at)).await?;
        if (inserted, updated) != wanted {
            tx.rollback().await?;
            return Ok(None);
        }
        let people: Vec<Person> = written.iter().map(|&i| rows[i].person.clone()).collect();
        replace_addresses(&mut tx, tenant.as_str(), &people).await?;
        append_all(&mut tx, tenant.as_str(), &evidence(&written), at).await?;
        tx.commit().await?;
        Ok(Some(
            outcomes
                .into_iter()
                .zip(rows)
                .map(|(o, r)| if o == Written::Done(0) { Written::Done(r.expected + 1) } else { o })
                .collect(),
        ))
    }
}

/// Each row's outcome with the rows applied one after another (`Done(0)`: to be written): an
/// address is another's if the database says so and that person has not given it up in an
/// earlier row, or an earlier row took it.
fn apply_in_order(rows: &[BatchRow<'_>], mut held: HashMap<String, String>) -> Vec<Written> {
    let mut written: HashSet<&str> = HashSet::new();
    let mut outcomes = Vec::with_capacity(rows.len());
    for row in rows {
        let id = row.person.id.as_str();
        if written.contains(id) {
            // The same person twice in a batch: the later row is read again in the next one.
            outcomes.push(Written::Stale);
            continue;
        }
        let taken = row.person.addresses.iter().find_map(|a| match held.get(&a.value) {
            Some(owner) if owner != id => {
                Some(Written::AddressTaken { address: a.value.clone(), owner: owner.clone() })
            }
            _ => None,
        });
        if let Some(taken) = taken {
            outcomes.push(taken);
            continue;
        }
        held.retain(|_, owner| owner != id);
        held.extend(row.person.addresses.iter().map(|a| (a.value.clone(), id.to_owned())));
        written.insert(id);
        outcomes.push(Written::Done(0));
    }
    outcomes
}

fn person_values(tenant: &TenantId, person: &Person, (source, at): (Source, OffsetDateTime)) -> Vec<Param> {
    let roles = serde_json::to_string(&person.roles).unwrap_or_else(|_| "[]".into());
    vec![
        tenant.as_str().into(),
        person.id.as_str().into(),
        person.name.clone().into(),
        roles.into(),
        person.locale.clone().into(),
        i64::from(person.active).into(),
        source.as_str().into(),
        to_ms(at).into(),
    ]
}

async fn insert_people<'a>(
    conn: &mut sqlx::AnyConnection,
    tenant: &TenantId,
    people: impl Iterator<Item = &'a Person>,
    written: (Source, OffsetDateTime),
) -> Result<usize, StoreError> {
    let rows: Vec<Vec<Param>> = people
        .map(|p| {
            let mut values = person_values(tenant, p, written);
            values.extend([Param::Int(Some(1)), to_ms(written.1).into()]);
            values
        })
        .collect();
    if rows.is_empty() {
        return Ok(0);
    }
    let head = "INSERT INTO directory_people (tenant_id, actor_id, name, roles, locale, active, source, updated_at,
        version, created_at)";
    let tail = "ON CONFLICT (tenant_id, actor_id) DO NOTHING RETURNING actor_id";
    Ok(insert_rows(conn, head, 10, rows, tail).await?.len())
}

async fn update_people<'a>(
    conn: &mut sqlx::AnyConnection,
    tenant: &TenantId,
    rows: impl Iterator<Item = BatchRow<'a>>,
    written: (Source, OffsetDateTime),
) -> Result<usize, StoreError> {
    let rows: Vec<Vec<Param>> = rows
        .map(|row| {
            let mut values = person_values(tenant, row.person, written);
            values.push(row.expected.into());
            values
        })
        .collect();
    let set = "name = v.column3, roles = v.column4, locale = v.column5, active = v.column6, source = v.column7, \
        updated_at = v.column8, version = directory_people.version + 1";
    let matching = "directory_people.tenant_id = v.column1 AND directory_people.actor_id = v.column2 \
        AND directory_people.version = v.column9";
    update_rows(conn, ("directory_people", set, matching), 9, rows).await
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::domain::command::ActorId;
    use crate::domain::directory::{Address, AddressKind};

    fn person(id: &str, numbers: &[&str]) -> Person {
        Person {
            id: ActorId::parse(id).expect("id"),
            name: String::new(),
            roles: vec![],
            locale: None,
            active: true,
            addresses: numbers
                .iter()
                .map(|n| Address::new(AddressKind::Whatsapp, n).expect("number"))
                .collect::<BTreeSet<_>>(),
        }
    }

    #[test]
    fn rows_apply_one_after_another() {
        let (one, two) = ("15550000001", "15550000002");
        let (a, b, c, a_again) =
            (person("a", &[two]), person("b", &[one]), person("c", &[two]), person("a", &["15550000003"]));
        let rows: Vec<BatchRow<'_>> =
            [&a, &b, &c, &a_again].iter().map(|p| BatchRow { person: p, expected: 0 }).collect();
        // In the database, `a` holds 1; this batch moves `a` to 2, so `b` may take 1; `c` finds 2 taken.
        let held = HashMap::from([(one.to_owned(), "a".to_owned())]);
        let outcomes = apply_in_order(&rows, held);
        assert_eq!(outcomes[0], Written::Done(0));
        assert_eq!(outcomes[1], Written::Done(0));
        assert_eq!(outcomes[2], Written::AddressTaken { address: two.into(), owner: "a".into() });
        assert_eq!(outcomes[3], Written::Stale);
    }
}
