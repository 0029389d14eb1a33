//! `/v1/directory/actors[/{id}[/erasure]]`: the tenant's people.

use axum::body::Bytes;
use axum::extract::{Path, Query};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{ActorView, IfMatch, READ, WRITE, changing, refusal};
use crate::domain::directory::PersonFields;
use crate::http::auth::{Caller, Principal, require};
use crate::http::error::invalid_body;
use crate::http::responses::{BearerErrors, NoSuchPerson, PROBLEM_JSON, ProblemDocument, StaleVersion};
use crate::http::{ApiError, AppState, Problem};
use crate::service::directory::{ErasureReport, erasure_binding};
use crate::service::reads::Search;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/directory/actors", get(list).route_layer(require(READ)))
        .route("/v1/directory/actors", post(create).route_layer(require(WRITE)))
        .route("/v1/directory/actors/{id}", get(read).route_layer(require(READ)))
        .route("/v1/directory/actors/{id}", axum::routing::patch(update).delete(remove).route_layer(require(WRITE)))
        .route("/v1/directory/actors/{id}/erasure", post(erase).route_layer(require(WRITE)))
}

/// A path's `{id}` that names a person.
#[derive(Deserialize, IntoParams)]
#[into_params(names("id"), parameter_in = Path)]
pub(crate) struct PersonPath(
    /// The person's id
    pub(crate) String,
);

/// What a page of people is filtered by.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// A name (any part, any case), an address (its digits) or an id.
    q: Option<String>,
    /// Only people with this role.
    role: Option<String>,
    /// Only the active (`true`) or the deactivated (`false`).
    active: Option<bool>,
    /// `next_cursor` of the page before.
    cursor: Option<String>,
    #[param(minimum = 1, maximum = 500)]
    limit: Option<u32>,
}

/// A page of people, by id.
#[derive(Debug, Serialize, ToSchema)]
pub struct ActorPage {
    pub actors: Vec<ActorView>,
    /// Pass as `cursor` for the next page; `null` on the last one.
    pub next_cursor: Option<String>,
}

#[utoipa::path(get, path = "/v1/directory/actors", operation_id = "list_actors", tag = "directory",
    security(("bearer" = ["directory:read"])), params(ListQuery),
    responses((status = 200, description = "A page of people", body = ActorPage),
    (status = 400, description = "A bad filter", content_type = PROBLEM_JSON, body = ProblemDocument), BearerErrors))]
pub(crate) async fn list(
    Caller { state, principal }: Caller,
    Query(query): Query<ListQuery>,
) -> Result<Json<ActorPage>, ApiError> {
    let limit = query.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(Problem::new(StatusCode::BAD_REQUEST, "invalid_query", "Bad Request")
            .detail("`limit` is between 1 and 500")
            .into());
    }
    let search =
        Search { text: query.q, role: query.role, active: query.active, after: query.cursor, limit: limit + 1 };
    let mut page = state.policy.people.list(&principal.tenant, &search).await?;
    let more = page.len() > limit as usize;
    page.truncate(limit as usize);
    let next_cursor = if more { page.last().map(|p| p.person.id.to_string()) } else { None };
    Ok(Json(ActorPage { actors: page.iter().map(ActorView::of).collect(), next_cursor }))
}

#[utoipa::path(post, path = "/v1/directory/actors", operation_id = "create_actor", tag = "directory",
    security(("bearer" = ["directory:write"])), request_body = PersonFields,
    responses((status = 201, description = "Made", body = ActorView),
    (status = 400, description = "Not a person's fields", content_type = PROBLEM_JSON, body = ProblemDocument),
    (status = 409, description = "The id or an address is taken", content_type = PROBLEM_JSON, body = ProblemDocument),
    (status = 422, description = "A role the tenant lacks, an odd value", content_type = PROBLEM_JSON,
        body = ProblemDocument), BearerErrors))]
pub(crate) async fn create(Caller { state, principal }: Caller, body: Bytes) -> Result<Response, ApiError> {
    let fields = read_fields(&body)?;
    let stored = state.policy.people.create(&changing(&principal), &fields).await.map_err(refusal)?;
    let location = format!("/v1/directory/actors/{}", stored.person.id);
    let mut response = (StatusCode::CREATED, Json(ActorView::of(&stored))).into_response();
    if let Ok(location) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(with_etag(response, stored.version))
}

#[utoipa::path(get, path = "/v1/directory/actors/{id}", operation_id = "get_actor", tag = "directory",
    security(("bearer" = ["directory:read"])), params(PersonPath),
    responses((status = 200, description = "The person", body = ActorView), NoSuchPerson, BearerErrors))]
pub(crate) async fn read(
    Caller { state, principal }: Caller,
    Path(PersonPath(id)): Path<PersonPath>,
) -> Result<Response, ApiError> {
    let stored = state.policy.people.get(&principal.tenant, &id).await?;
    let stored = stored.ok_or_else(|| refusal(crate::service::directory::DirectoryError::NotFound(id)))?;
    Ok(with_etag(Json(ActorView::of(&stored)).into_response(), stored.version))
}

#[utoipa::path(patch, path = "/v1/directory/actors/{id}", operation_id = "update_actor", tag = "directory",
    security(("bearer" = ["directory:write"])), params(PersonPath, IfMatch),
    request_body(content = PersonFields, description = "The fields to change; `{\"active\": false}` deactivates"),
    responses((status = 200, description = "Changed", body = ActorView),
    (status = 400, description = "Not a person's fields", content_type = PROBLEM_JSON, body = ProblemDocument),
    NoSuchPerson,
    (status = 409, description = "An address is taken", content_type = PROBLEM_JSON, body = ProblemDocument),
    StaleVersion,
    (status = 422, description = "A role the tenant lacks, an odd value", content_type = PROBLEM_JSON,
        body = ProblemDocument), BearerErrors))]
pub(crate) async fn update(
    Caller { state, principal }: Caller,
    Path(PersonPath(id)): Path<PersonPath>,
    IfMatch { version }: IfMatch,
    body: Bytes,
) -> Result<Response, ApiError> {
    let fields = read_fields(&body)?;
    let stored = state.policy.people.update(&changing(&principal), &id, &fields, version).await.map_err(refusal)?;
    Ok(with_etag(Json(ActorView::of(&stored)).into_response(), stored.version))
}

#[utoipa::path(delete, path = "/v1/directory/actors/{id}", operation_id = "delete_actor", tag = "directory",
    security(("bearer" = ["directory:write"])), params(PersonPath, IfMatch),
    responses((status = 204, description = "Deleted from the directory (their commands stay; see erasure)"),
    (status = 400, description = "A bad `If-Match`", content_type = PROBLEM_JSON, body = ProblemDocument), NoSuchPerson,
    StaleVersion, BearerErrors))]
pub(crate) async fn remove(
    Caller { state, principal }: Caller,
    Path(PersonPath(id)): Path<PersonPath>,
    IfMatch { version }: IfMatch,
) -> Result<StatusCode, ApiError> {
    state.policy.people.delete(&changing(&principal), &id, version).await.map_err(refusal)?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/v1/directory/actors/{id}/erasure", operation_id = "erase_actor", tag = "directory",
    security(("bearer" = ["directory:write"])),
    params(PersonPath,
        ("Step-Up" = Option<String>, Header,
            description = "A step-up JWT bound to the erasure (its `command_id` and `idempotency_key` as the 401 \
                says)")), responses((status = 200, description = "Erased", body = ErasureReport),
    (status = 401, description = "A step-up proof is needed, or the one sent is not valid", content_type = PROBLEM_JSON,
        body = ProblemDocument), NoSuchPerson,
    (status = 409, description = "The step-up token was used before", content_type = PROBLEM_JSON,
        body = ProblemDocument), BearerErrors))]
pub(crate) async fn erase(
    Caller { state, principal }: Caller,
    Path(PersonPath(id)): Path<PersonPath>,
    headers: HeaderMap,
) -> Result<Json<ErasureReport>, ApiError> {
    let token = headers.get("step-up").and_then(|v| v.to_str().ok()).map(str::trim).filter(|t| !t.is_empty());
    run_erasure(&state, &principal, &id, token).await.map(Json)
}

/// Erases `id` with the operator's step-up `token` (the API's header, the console's form).
pub(crate) async fn run_erasure(
    state: &AppState,
    principal: &Principal,
    id: &str,
    token: Option<&str>,
) -> Result<ErasureReport, ApiError> {
    if state.policy.people.get(&principal.tenant, id).await?.is_none() {
        return Err(refusal(crate::service::directory::DirectoryError::NotFound(id.to_owned())));
    }
    let stepup = &state.policy.security.stepup;
    let (command, key) = erasure_binding(&principal.tenant, id);
    let step_up = |detail: String| -> ApiError {
        let hint =
            format!("{detail}; send a step-up token for command `{command}` and idempotency key `{key}` in `Step-Up`.");
        Problem::new(StatusCode::UNAUTHORIZED, "insufficient_user_authentication", "Step-up required")
            .detail(hint)
            .challenge(stepup.challenge(&detail))
            .into()
    };
    let Some(token) = token else { return Err(step_up("erasing a person needs a step-up proof".into())) };
    let now = time::OffsetDateTime::now_utc();
    let proof =
        stepup.verify_binding(token, &principal.subject, (command, &key), now).map_err(|e| step_up(e.to_string()))?;
    let consumed = proof.consumed();
    state.policy.people.erase(&changing(principal), id, &consumed).await.map_err(refusal)
}

fn read_fields(body: &[u8]) -> Result<PersonFields, ApiError> {
    PersonFields::from_json(body).map_err(|e| invalid_body(&format!("Not a person's fields: {e}")))
}

fn with_etag(mut response: Response, version: i64) -> Response {
    if let Ok(etag) = HeaderValue::from_str(&format!("\"{version}\"")) {
        response.headers_mut().insert(header::ETAG, etag);
    }
    response
}
