//! `/v1/directory`: the tenant's people and roles, for operators and identity tools. Reading
//! takes `directory:read`, changing `directory:write`; erasing a person also takes a step-up
//! proof. Every change is evidence in the tenant's chain (`service::directory`).
//!
//! - `actors`: people listed, found, made, changed, deleted and erased.
//! - `link_codes`: a person's one-time codes for linking their other channels.
//! - `roles`: roles listed, set and removed.
//! - `bulk`: the import (JSON lines or CSV, streamed) and the export.

pub mod actors;
pub mod bulk;
pub mod link_codes;
pub mod roles;

use std::collections::BTreeMap;

use axum::Router;
use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::Serialize;
use time::OffsetDateTime;
use utoipa::ToSchema;

use crate::domain::directory::AddressKind;
use crate::http::auth::Principal;
use crate::http::{ApiError, AppState, Problem};
use crate::service::directory::{ChangedBy, Changing, DirectoryError};
use crate::service::ooc::view::rfc3339;
use crate::service::reads::{Source, StoredPerson};

pub const READ: &str = "directory:read";
pub const WRITE: &str = "directory:write";

/// The directory's routes but the import, which `bulk::import_router` serves under limits of
/// its own (a large body, a long time).
pub fn router() -> Router<AppState> {
    actors::router().merge(link_codes::router()).merge(roles::router()).merge(bulk::export_router())
}

/// A person as the API shows them.
#[derive(Debug, Serialize, ToSchema)]
pub struct ActorView {
    pub id: String,
    pub name: String,
    pub roles: Vec<String>,
    /// Their language, when it is not the tenant's.
    pub locale: Option<String>,
    pub active: bool,
    /// Their addresses by kind (`whatsapp`, `whatsapp_user_id`, `phone`).
    pub addresses: BTreeMap<AddressKind, Vec<String>>,
    /// Who owns the row: `file` (`directory.toml`, which updates it on reload) or `api` (the
    /// database wins).
    pub source: Source,
    /// Changes with every write; send it back in `If-Match` to change only this version.
    pub version: i64,
    pub created_at: String,
    pub updated_at: String,
}

impl ActorView {
    pub fn of(stored: &StoredPerson) -> Self {
        let person = &stored.person;
        let mut addresses: BTreeMap<AddressKind, Vec<String>> = BTreeMap::new();
        for address in &person.addresses {
            addresses.entry(address.kind).or_default().push(address.value.clone());
        }
        Self {
            id: person.id.to_string(),
            name: person.name.clone(),
            roles: person.roles.clone(),
            locale: person.locale.clone(),
            active: person.active,
            addresses,
            source: stored.source,
            version: stored.version,
            created_at: rfc3339(stored.created_at),
            updated_at: rfc3339(stored.updated_at),
        }
    }
}

/// Who changes the directory: the caller, now.
pub(crate) fn changing(principal: &Principal) -> Changing<'_> {
    let by = ChangedBy::Operator(format!("{}|{}", principal.issuer, principal.subject));
    Changing { tenant: &principal.tenant, by, at: OffsetDateTime::now_utc() }
}

/// The version a change is made at (`If-Match`): the person's `ETag` as read (`"3"`, `W/"3"`),
/// `*` or nothing for any. Taken from the request by the handler that changes (a bad one is 400,
/// nothing changed).
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
pub(crate) struct IfMatch {
    /// The version read (their `ETag`), or `*`.
    #[param(rename = "If-Match", value_type = Option<String>, nullable = false,
        pattern = r#"^(\*|(W/)?"?[0-9]{1,18}"?)$"#)]
    pub version: Option<i64>,
}

impl<S: Send + Sync> FromRequestParts<S> for IfMatch {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let Some(value) = parts.headers.get(axum::http::header::IF_MATCH) else { return Ok(IfMatch { version: None }) };
        let text = value.to_str().unwrap_or_default().trim().trim_start_matches("W/").trim_matches('"');
        if text == "*" {
            return Ok(IfMatch { version: None });
        }
        let version = text.parse().map_err(|_| {
            ApiError::from(
                Problem::new(StatusCode::BAD_REQUEST, "invalid_header", "Bad Request")
                    .detail("`If-Match` is the version a person was read at, as their `ETag` gives it (\"3\")."),
            )
        })?;
        Ok(IfMatch { version: Some(version) })
    }
}

/// A directory change refused, as a problem document.
pub(crate) fn refusal(error: DirectoryError) -> ApiError {
    let problem = |status, code: &str, title: &str| Problem::new(status, code, title).detail(error.to_string());
    match &error {
        DirectoryError::NotFound(_) => problem(StatusCode::NOT_FOUND, "not_found", "Not Found").into(),
        DirectoryError::Exists(_) => problem(StatusCode::CONFLICT, "actor_exists", "The person exists").into(),
        DirectoryError::Stale { .. } => {
            problem(StatusCode::PRECONDITION_FAILED, "version_mismatch", "The person changed").into()
        }
        DirectoryError::AddressTaken { .. } => {
            problem(StatusCode::CONFLICT, "address_taken", "The address is another person's").into()
        }
        DirectoryError::Invalid(_) => {
            problem(StatusCode::UNPROCESSABLE_ENTITY, "invalid_person", "The person cannot be kept").into()
        }
        DirectoryError::RoleInUse(_) => problem(StatusCode::CONFLICT, "role_in_use", "The role is in use").into(),
        DirectoryError::ProofUsed => {
            problem(StatusCode::CONFLICT, "step_up_token_used", "Step-up token already used").into()
        }
        DirectoryError::Store(_) => match error {
            DirectoryError::Store(store) => store.into(),
            _ => Problem::for_status(StatusCode::INTERNAL_SERVER_ERROR).into(),
        },
    }
}
