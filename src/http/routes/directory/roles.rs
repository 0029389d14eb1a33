//! `/v1/directory/roles[/{name}]`: the tenant's roles and the scopes each grants.

use axum::body::Bytes;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{READ, WRITE, changing, refusal};
use crate::http::auth::{Caller, Principal, require};
use crate::http::body::decode_json;
use crate::http::error::invalid_body;
use crate::http::responses::{BearerErrors, PROBLEM_JSON, ProblemDocument};
use crate::http::{ApiError, AppState};
use crate::service::reads::Source;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/directory/roles", get(list).route_layer(require(READ)))
        .route("/v1/directory/roles/{name}", axum::routing::put(set).delete(remove).route_layer(require(WRITE)))
}

/// A role: the scopes it grants.
#[derive(Debug, Serialize, ToSchema)]
pub struct RoleView {
    pub name: String,
    pub scopes: Vec<String>,
    /// `file` (`directory.toml`) or `api`.
    pub source: Source,
}

/// The tenant's roles.
#[derive(Debug, Serialize, ToSchema)]
pub struct RoleList {
    pub roles: Vec<RoleView>,
    /// The role someone nobody listed writes with, if the tenant gives one (`directory.toml`'s
    /// `unknown_sender`).
    pub unknown_sender_role: Option<String>,
}

/// `PUT /v1/directory/roles/{name}`'s body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RoleBody {
    /// Scopes like `orders:refund`; at most 64.
    pub scopes: Vec<String>,
}

#[utoipa::path(get, path = "/v1/directory/roles", operation_id = "list_roles", tag = "directory",
    security(("bearer" = ["directory:read"])),
    responses((status = 200, description = "The tenant's roles", body = RoleList), BearerErrors))]
pub(crate) async fn list(Caller { state, principal }: Caller) -> Result<Json<RoleList>, ApiError> {
    let roles = state.engine.reads().roles(&principal.tenant).await?;
    let roles = roles
        .into_iter()
        .map(|r| RoleView { name: r.name, scopes: r.scopes.into_iter().collect(), source: r.source })
        .collect();
    let unknown_sender_role = stranger_role(&state, &principal);
    Ok(Json(RoleList { roles, unknown_sender_role }))
}

#[utoipa::path(put, path = "/v1/directory/roles/{name}", operation_id = "set_role", tag = "directory",
    security(("bearer" = ["directory:write"])),
    params(("name" = String, Path, description = "The role's name (letters, digits, `-`, `_`)")),
    request_body = RoleBody, responses((status = 204, description = "Set"),
    (status = 400, description = "Not a role's body", content_type = PROBLEM_JSON, body = ProblemDocument),
    (status = 422, description = "An odd name or scope, or a deployment's scope", content_type = PROBLEM_JSON,
        body = ProblemDocument), BearerErrors))]
pub(crate) async fn set(
    Caller { state, principal }: Caller,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let body: RoleBody = decode_json(&body).map_err(|e| invalid_body(&format!("Not a role: {e}")))?;
    state.policy.people.set_role(&changing(&principal), &name, &body.scopes).await.map_err(refusal)?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(delete, path = "/v1/directory/roles/{name}", operation_id = "remove_role", tag = "directory",
    security(("bearer" = ["directory:write"])), params(("name" = String, Path, description = "The role's name")),
    responses((status = 204, description = "Removed"),
    (status = 404, description = "No such role", content_type = PROBLEM_JSON, body = ProblemDocument),
    (status = 409, description = "People (or unknown senders) hold it", content_type = PROBLEM_JSON,
        body = ProblemDocument), BearerErrors))]
pub(crate) async fn remove(
    Caller { state, principal }: Caller,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let stranger = stranger_role(&state, &principal);
    state.policy.people.remove_role(&changing(&principal), &name, stranger.as_deref()).await.map_err(refusal)?;
    Ok(StatusCode::NO_CONTENT)
}

fn stranger_role(state: &AppState, principal: &Principal) -> Option<String> {
    let tenants = state.policy.tenants.get();
    tenants.tenant(principal.tenant.as_str()).and_then(|t| t.unknown_sender.role()).map(str::to_owned)
}
