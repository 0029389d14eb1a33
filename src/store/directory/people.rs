//! One person: read, found by an address, written whole, deleted; and pages of people, found by
//! name, number or id.

use std::collections::{BTreeSet, HashMap};

use sqlx::AnyConnection;
use sqlx::any::AnyRow;
use time::OffsetDateTime;

use super::{PersonWrite, StoredPerson, Written, like_escaped};
use crate::domain::command::{ActorId, TenantId};
use crate::domain::directory::{Address, Person};
use crate::domain::evidence::EvidenceDraft;
use crate::store::evidence::append_all;
use crate::store::keyed::{execute_tenant_in, fetch_tenant_in};
use crate::store::rows::{Param, from_ms, insert_rows, int, json, opt_text, parsed, text, to_ms};
use crate::store::{Directory, StoreError};

pub(super) const PERSON_COLUMNS: &str =
    "actor_id, name, roles, locale, active, source, version, created_at, updated_at";

/// What a page of people is filtered by.
#[derive(Debug, Clone, Default)]
pub struct Search {
    /// A name (any part of it, any case), an address (digits) or an id.
    pub text: Option<String>,
    pub role: Option<String>,
    pub active: Option<bool>,
    /// The last id of the page before.
    pub after: Option<String>,
    pub limit: u32,
}

impl Directory<'_> {
    /// The person an address names.
    pub async fn find(self, tenant: &TenantId, address: &str) -> Result<Option<StoredPerson>, StoreError> {
        let mut conn = self.store.reader().await?;
        let row = sqlx::query("SELECT actor_id FROM directory_addresses WHERE tenant_id = $1 AND address = $2")
            .bind(tenant.as_str())
            .bind(address)
            .fetch_optional(&mut *conn)
            .await?;
        match row {
            Some(row) => load(&mut conn, tenant, &text(&row, "actor_id")?).await,
            None => Ok(None),
        }
    }

    /// A person by their id.
    pub async fn get(self, tenant: &TenantId, id: &str) -> Result<Option<StoredPerson>, StoreError> {
        load(&mut *self.store.reader().await?, tenant, id).await
    }

    /// The people `ids` name (those that exist), by id.
    pub async fn get_many(
        self,
        tenant: &TenantId,
        ids: &[String],
    ) -> Result<HashMap<String, StoredPerson>, StoreError> {
        let mut conn = self.store.reader().await?;
        let select = format!("SELECT {PERSON_COLUMNS} FROM directory_people");
        let rows = fetch_tenant_in(&mut conn, &select, tenant.as_str(), "actor_id", ids).await?;
        with_addresses(&mut conn, tenant, &rows)
            .await
            .map(|people| people.into_iter().map(|p| (p.person.id.as_str().to_owned(), p)).collect())
    }

    /// Who holds each of `addresses` in the tenant: address → person id.
    pub async fn holders(self, tenant: &TenantId, addresses: &[String]) -> Result<HashMap<String, String>, StoreError> {
        holders(&mut *self.store.reader().await?, tenant, addresses).await
    }

    /// A page of the tenant's people, by id, filtered by `search`.
    pub async fn list(self, tenant: &TenantId, search: &Search) -> Result<Vec<StoredPerson>, StoreError> {
        let mut conn = self.store.reader().await?;
        let text = search.text.as_deref().map(str::trim).unwrap_or_default();
        let digits: String = text.chars().filter(char::is_ascii_digit).collect();
        let role = search.role.as_deref().map(|r| format!("%{}%", like_escaped(&format!("\"{r}\""))));
        let sql = format!(
            "SELECT {PERSON_COLUMNS} FROM directory_people p WHERE tenant_id = $1 AND actor_id > $2
               AND ($3 = '' OR actor_id = $3 OR LOWER(name) LIKE $4 ESCAPE '\\'
                    OR actor_id IN (SELECT actor_id FROM directory_addresses a
                                    WHERE a.tenant_id = $1 AND (a.address = $3 OR a.address = $5)))
               AND ($6 = '' OR roles LIKE $6 ESCAPE '\\') AND ($7 < 0 OR active = $7)
             ORDER BY actor_id LIMIT $8"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(tenant.as_str())
            .bind(search.after.as_deref().unwrap_or_default())
            .bind(text)
            .bind(format!("%{}%", like_escaped(&text.to_lowercase())))
            .bind(if digits.is_empty() { text.to_owned() } else { digits })
            .bind(role.unwrap_or_default())
            .bind(search.active.map_or(-1, i64::from))
            .bind(i64::from(search.limit.max(1)))
            .fetch_all(&mut *conn)
            .await?;
        with_addresses(&mut conn, tenant, &rows).await
    }

    /// Writes a person whole, with the change's evidence, if they are still at `expected`.
    pub async fn write(self, write: &PersonWrite<'_>, evidence: &[EvidenceDraft]) -> Result<Written, StoreError> {
        let mut tx = self.store.begin().await?;
        let (tenant, person) = (write.tenant.as_str(), write.person);
        let values: Vec<String> = person.addresses.iter().map(|a| a.value.clone()).collect();
        let held = holders(&mut tx, write.tenant, &values).await?;
        if let Some((address, owner)) = held.into_iter().find(|(_, owner)| owner != person.id.as_str()) {
            tx.rollback().await?;
            return Ok(Written::AddressTaken { address, owner });
        }
        let roles = serde_json::to_string(&person.roles).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let version = write.expected + 1;
        let done = if write.expected == 0 {
            sqlx::query(
                "INSERT INTO directory_people (tenant_id, actor_id, name, roles, locale, active, source, version,
                   created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8, $8)
                 ON CONFLICT (tenant_id, actor_id) DO NOTHING",
            )
        } else {
            sqlx::query(
                "UPDATE directory_people SET name = $3, roles = $4, locale = $5, active = $6, source = $7,
                   version = version + 1, updated_at = $8
                 WHERE tenant_id = $1 AND actor_id = $2 AND version = $9",
            )
        }
        .bind(tenant)
        .bind(person.id.as_str())
        .bind(&person.name)
        .bind(roles)
        .bind(person.locale.as_deref())
        .bind(i64::from(person.active))
        .bind(write.source.as_str())
        .bind(to_ms(write.at))
        .bind(write.expected)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(Written::Stale);
        }
        replace_addresses(&mut tx, tenant, std::slice::from_ref(person)).await?;
        append_all(&mut tx, tenant, evidence, write.at).await?;
        tx.commit().await?;
        Ok(Written::Done(version))
    }

    /// The ids of the people the directory file made and still owns: ids alone, since a start
    /// compares them with the file's and loads only those it no longer lists (the whole rows of a
    /// 10,000-person file, read at once, were the gateway's peak of memory).
    pub async fn owned_by_file(self, tenant: &TenantId) -> Result<Vec<String>, StoreError> {
        let sql = "SELECT actor_id FROM directory_people WHERE tenant_id = $1 AND source = 'file'";
        let rows = sqlx::query(sql).bind(tenant.as_str()).fetch_all(&mut *self.store.reader().await?).await?;
        rows.iter().map(|row| text(row, "actor_id")).collect()
    }

    /// Deletes a person and their addresses, with the change's evidence, if still at `expected`.
    pub async fn delete(
        self,
        tenant: &TenantId,
        id: &ActorId,
        expected: i64,
        evidence: &[EvidenceDraft],
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut tx = self.store.begin().await?;
        if !delete_person(&mut tx, tenant, id, expected).await? {
            tx.rollback().await?;
            return Ok(false);
        }
        append_all(&mut tx, tenant.as_str(), evidence, at).await?;
        tx.commit().await?;
        Ok(true)
    }
}

/// Deletes a person at `expected` and their addresses; `false` when they moved on or went.
pub(super) async fn delete_person(
    conn: &mut AnyConnection,
    tenant: &TenantId,
    id: &ActorId,
    expected: i64,
) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM directory_people WHERE tenant_id = $1 AND actor_id = $2 AND version = $3")
        .bind(tenant.as_str())
        .bind(id.as_str())
        .bind(expected)
        .execute(&mut *conn)
        .await?;
    if done.rows_affected() != 1 {
        return Ok(false);
    }
    sqlx::query("DELETE FROM directory_addresses WHERE tenant_id = $1 AND actor_id = $2")
        .bind(tenant.as_str())
        .bind(id.as_str())
        .execute(&mut *conn)
        .await?;
    Ok(true)
}

/// Who holds each of `addresses` in the tenant.
pub(super) async fn holders(
    conn: &mut AnyConnection,
    tenant: &TenantId,
    addresses: &[String],
) -> Result<HashMap<String, String>, StoreError> {
    let select = "SELECT address, actor_id FROM directory_addresses";
    let rows = fetch_tenant_in(conn, select, tenant.as_str(), "address", addresses).await?;
    rows.iter().map(|row| Ok((text(row, "address")?, text(row, "actor_id")?))).collect()
}

/// Gives `people` exactly their addresses (those they had are replaced).
pub(super) async fn replace_addresses(
    conn: &mut AnyConnection,
    tenant: &str,
    people: &[Person],
) -> Result<(), StoreError> {
    let ids: Vec<String> = people.iter().map(|p| p.id.as_str().to_owned()).collect();
    execute_tenant_in(conn, "DELETE FROM directory_addresses", tenant, "actor_id", &ids).await?;
    let rows: Vec<Vec<Param>> = people
        .iter()
        .flat_map(|p| p.addresses.iter().map(move |a| (p, a)))
        .map(|(p, a)| vec![tenant.into(), a.value.clone().into(), a.kind.as_str().into(), p.id.as_str().into()])
        .collect();
    if !rows.is_empty() {
        let head = "INSERT INTO directory_addresses (tenant_id, address, kind, actor_id)";
        insert_rows(conn, head, 4, rows, "").await?;
    }
    Ok(())
}

async fn load(conn: &mut AnyConnection, tenant: &TenantId, id: &str) -> Result<Option<StoredPerson>, StoreError> {
    let sql = format!("SELECT {PERSON_COLUMNS} FROM directory_people WHERE tenant_id = $1 AND actor_id = $2");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(tenant.as_str()).bind(id).fetch_optional(&mut *conn).await?;
    let Some(row) = row else { return Ok(None) };
    Ok(with_addresses(conn, tenant, std::slice::from_ref(&row)).await?.pop())
}

/// The people of `rows` (in their order) with their addresses, read with one query.
async fn with_addresses(
    conn: &mut AnyConnection,
    tenant: &TenantId,
    rows: &[AnyRow],
) -> Result<Vec<StoredPerson>, StoreError> {
    let ids = rows.iter().map(|row| text(row, "actor_id")).collect::<Result<Vec<_>, _>>()?;
    let select = "SELECT actor_id, address, kind FROM directory_addresses";
    let mut addresses: HashMap<String, BTreeSet<Address>> = HashMap::new();
    for row in fetch_tenant_in(conn, select, tenant.as_str(), "actor_id", &ids).await? {
        let address = Address { kind: parsed(&row, "kind")?, value: text(&row, "address")? };
        addresses.entry(text(&row, "actor_id")?).or_default().insert(address);
    }
    rows.iter().zip(&ids).map(|(row, id)| decode(row, addresses.remove(id).unwrap_or_default())).collect()
}

fn decode(row: &AnyRow, addresses: BTreeSet<Address>) -> Result<StoredPerson, StoreError> {
    let id = ActorId::parse(&text(row, "actor_id")?).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let person = Person {
        id,
        name: text(row, "name")?,
        roles: json(row, "roles")?,
        locale: opt_text(row, "locale")?,
        active: int(row, "active")? != 0,
        addresses,
    };
    Ok(StoredPerson {
        person,
        source: parsed(row, "source")?,
        version: int(row, "version")?,
        created_at: from_ms(int(row, "created_at")?)?,
        updated_at: from_ms(int(row, "updated_at")?)?,
    })
}
