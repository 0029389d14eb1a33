//! `/v1/locks`: what the tenant's mutations under way hold (issue #47), and an operator's release
//! of one — with a written reason, as evidence bound to the command that held it.

use axum::body::Bytes;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::domain::locks::Resource;
use crate::http::auth::{Caller, require};
use crate::http::body::read_json;
use crate::http::error::invalid_body;
use crate::http::responses::{BadBody, BearerErrors, PROBLEM_JSON, ProblemDocument};
use crate::http::{ApiError, AppState, Problem};
use crate::service::locks::{self, LockView, Released, SHORTEST_REASON};

pub const READ: &str = "locks:read";
/// Releasing what a command under way holds lets another change the same thing: an operator's.
pub const RELEASE: &str = "locks:release";

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/locks", get(list).route_layer(require(READ)))
        .route("/v1/locks/{resource}/release", post(release).route_layer(require(RELEASE)))
}

/// The tenant's locks.
#[derive(Debug, Serialize, ToSchema)]
pub struct LockList {
    pub locks: Vec<LockView>,
}

/// Why the lock is released, in a sentence (kept in the evidence).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReleaseBody {
    /// At least 10 characters.
    #[schema(min_length = 10)]
    pub(crate) reason: String,
}

/// A lock released.
#[derive(Debug, Serialize, ToSchema)]
pub struct LockReleased {
    pub resource: String,
    /// The command that held it (it goes on: cancel it to stop it).
    pub command_id: Uuid,
    /// The `lock.released` artifact.
    pub evidence_id: Uuid,
}

/// A path's `{resource}`: `{entity}:{target}` (`order:1234`).
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(names("resource"), parameter_in = Path)]
pub(crate) struct ResourcePath(
    /// The resource, as `GET /v1/locks` names it (`order:1234`)
    String,
);

#[utoipa::path(get, path = "/v1/locks", operation_id = "list_locks", tag = "locks",
    security(("bearer" = ["locks:read"])),
    responses((status = 200, description = "The tenant's locks, oldest first", body = LockList), BearerErrors))]
pub(crate) async fn list(Caller { state, principal }: Caller) -> Result<Json<LockList>, ApiError> {
    Ok(Json(LockList { locks: locks::held(&state.engine, &principal.tenant, 500).await? }))
}

#[utoipa::path(
    post,
    path = "/v1/locks/{resource}/release",
    operation_id = "release_lock",
    tag = "locks",
    security(("bearer" = ["locks:release"])),
    params(ResourcePath),
    request_body(content = inline(ReleaseBody), content_type = "application/json"),
    responses(
        (status = 200, description = "Released, with its evidence", body = LockReleased),
        BadBody,
        (status = 404, description = "Nothing holds it in this tenant", content_type = PROBLEM_JSON,
            body = ProblemDocument),
        BearerErrors
    )
)]
pub(crate) async fn release(
    Caller { state, principal }: Caller,
    Path(ResourcePath(resource)): Path<ResourcePath>,
    body: Bytes,
) -> Result<Json<LockReleased>, ApiError> {
    let not_held = || -> ApiError {
        Problem::for_status(StatusCode::NOT_FOUND).detail(format!("Nothing holds `{resource}` in this tenant.")).into()
    };
    let named = Resource::parse(&resource).ok_or_else(not_held)?;
    let body: ReleaseBody = read_json(&body)?;
    let asked = (&named, principal.subject.as_str(), body.reason.as_str());
    match locks::release(&state.engine, &principal.tenant, asked, OffsetDateTime::now_utc()).await? {
        Released::Done { command_id, evidence_id } => {
            Ok(Json(LockReleased { resource: named.to_string(), command_id, evidence_id }))
        }
        Released::NotHeld => Err(not_held()),
        Released::ReasonTooShort => {
            Err(invalid_body(&format!("`reason` says why, in at least {SHORTEST_REASON} characters.")))
        }
    }
}
