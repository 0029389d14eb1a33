//! The directory as data: a tenant's roles, its people and their addresses. A person is written
//! whole (their row and their addresses) with a compare-and-swap on their version and the
//! change's evidence, in one transaction; an address names one person of a tenant.
//!
//! - `people`: one person read, found by an address, written, deleted; pages of people.
//! - `batch`: many people written in one transaction (an import).
//! - `erase`: a person erased, their messages' text with them.
//! - `identity`: an identity resolver's answers and the messages waiting for them.

mod batch;
mod erase;
mod identity;
mod people;

use std::collections::{BTreeMap, BTreeSet};

use time::OffsetDateTime;

pub use batch::BatchRow;
pub use erase::{ERASED_PAYLOAD, Erased, Erasure};
pub use identity::{ClaimedLookup, NewLookup, StoredAnswer};
pub use people::Search;

use crate::domain::command::TenantId;
use crate::domain::directory::{Person, Roles};
use crate::domain::evidence::EvidenceDraft;
use crate::domain::names::named_enum;
use crate::store::decoded::{decode_all, decoded, stored_by_name};
use crate::store::evidence::append_all;
use crate::store::rows::to_ms;
use crate::store::{Directory, StoreError};

named_enum! {
    /// Who owns a directory row: the file follows it on every start and reload; a change through
    /// the API (or an import) takes it over, and from then on the database wins.
    Source {
        File => "file",
        Api => "api",
    }
}
stored_by_name!(Source);

/// A person as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredPerson {
    pub person: Person,
    pub source: Source,
    pub version: i64,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

/// A person to write: `expected` is the version it was read at (0: it must not exist yet).
#[derive(Debug, Clone)]
pub struct PersonWrite<'a> {
    pub tenant: &'a TenantId,
    pub person: &'a Person,
    pub source: Source,
    pub expected: i64,
    pub at: OffsetDateTime,
}

/// What a write came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Written {
    /// Written at this version.
    Done(i64),
    /// The person changed (or appeared) since it was read: nothing written.
    Stale,
    /// An address belongs to another person of the tenant: nothing written.
    AddressTaken { address: String, owner: String },
}

decoded! {
    /// A role as stored: its scopes and who owns it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct StoredRole {
        pub name: String,
        pub scopes: BTreeSet<String>,
        pub source: Source,
    }
}

impl Directory<'_> {
    /// The tenant's roles and the scopes each grants.
    pub async fn roles(self, tenant: &TenantId) -> Result<Roles, StoreError> {
        let owned = self.roles_owned(tenant).await?;
        Ok(Roles(owned.into_iter().map(|role| (role.name, role.scopes)).collect::<BTreeMap<_, _>>()))
    }

    /// The roles with who owns each, by name.
    pub async fn roles_owned(self, tenant: &TenantId) -> Result<Vec<StoredRole>, StoreError> {
        let rows = sqlx::query("SELECT name, scopes, source FROM directory_roles WHERE tenant_id = $1 ORDER BY name")
            .bind(tenant.as_str())
            .fetch_all(&mut *self.store.reader().await?)
            .await?;
        decode_all(&rows)
    }

    /// Sets a role (with its change's evidence); `None` scopes removes it.
    pub async fn set_role(
        self,
        tenant: &TenantId,
        (name, scopes, source): (&str, Option<&BTreeSet<String>>, Source),
        evidence: &[EvidenceDraft],
        at: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let mut tx = self.store.begin().await?;
        match scopes {
            Some(scopes) => {
                let scopes = serde_json::to_string(scopes).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                sqlx::query(
                    "INSERT INTO directory_roles (tenant_id, name, scopes, source, updated_at)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (tenant_id, name) DO UPDATE SET scopes = $3, source = $4, updated_at = $5",
                )
                .bind(tenant.as_str())
                .bind(name)
                .bind(scopes)
                .bind(source.as_str())
                .bind(to_ms(at))
                .execute(&mut *tx)
                .await?;
            }
            None => {
                sqlx::query("DELETE FROM directory_roles WHERE tenant_id = $1 AND name = $2")
                    .bind(tenant.as_str())
                    .bind(name)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        append_all(&mut tx, tenant.as_str(), evidence, at).await?;
        tx.commit().await
    }

    /// How many of the tenant's people hold `role`.
    pub async fn holding(self, tenant: &TenantId, role: &str) -> Result<i64, StoreError> {
        let quoted = serde_json::to_string(role).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let row = sqlx::query(
            "SELECT COUNT(*) AS n FROM directory_people WHERE tenant_id = $1 AND roles LIKE $2 ESCAPE '\\'",
        )
        .bind(tenant.as_str())
        .bind(format!("%{}%", like_escaped(&quoted)))
        .fetch_one(&mut *self.store.reader().await?)
        .await?;
        crate::store::rows::int(&row, "n")
    }
}

/// `text` with LIKE's wildcards escaped (the statements say `ESCAPE '\'`).
pub(crate) fn like_escaped(text: &str) -> String {
    text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")
}
