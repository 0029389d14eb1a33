//! `/v1/commands`, `/v1/audit/verify`, `/v1/traces`: commands, their evidence, the audit and the
//! causation trace, for the tenant's callers. Each route declares its scope with a layer; another
//! tenant's command is a 404, never a 403.

use axum::extract::{FromRequestParts, Path, Query};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::http::ApiError;
pub(crate) use crate::http::error::invalid_body;

use crate::domain::command::ShortRef;
use crate::http::AppState;
use crate::http::Problem;
use crate::http::auth::Caller;
use crate::http::auth::require;
use crate::http::responses::{BearerErrors, NoSuchCommand, PROBLEM_JSON, ProblemDocument};
use crate::http::views::{Artifact, AuditVerdict, CommandPage, EvidenceList, TraceEdge, TraceGraph};
use crate::service::engine::Engine;
use crate::service::ooc::view::CommandStatus;
use crate::service::reads::{CommandFilter, StoredCommand};

/// Reading commands, their status, evidence, traces and the event stream.
pub const READ: &str = crate::service::ooc::SEE_ALL;
/// Checking the tenant's evidence chains.
pub const AUDIT: &str = "audit:read";

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/commands", get(list).route_layer(require(READ)))
        .route("/v1/commands/{id}", get(status).route_layer(require(READ)))
        .route("/v1/commands/{id}/evidence", get(evidence).route_layer(require(READ)))
        .route("/v1/audit/verify", get(audit).route_layer(require(AUDIT)))
        .route("/v1/traces/{correlation_id}", get(trace).route_layer(require(READ)))
}

/// A path's `{id}` that names a command; one that is not a UUID names none (404).
#[derive(utoipa::IntoParams)]
#[into_params(names("id"), parameter_in = Path)]
pub(crate) struct CommandPath(
    /// The command id (a UUID)
    #[param(value_type = String)]
    pub(crate) Uuid,
);

impl<S: Send + Sync> FromRequestParts<S> for CommandPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        /// The route's `{id}`, beside any other parameter of its path.
        #[derive(Deserialize)]
        struct Named {
            id: String,
        }
        let named = Path::<Named>::from_request_parts(parts, state).await.ok();
        let id = named.and_then(|Path(Named { id })| id.parse().ok());
        id.map(Self).ok_or_else(|| Problem::for_status(StatusCode::NOT_FOUND).detail("No command has this id.").into())
    }
}

#[utoipa::path(get, path = "/v1/commands/{id}", operation_id = "command_status", tag = "commands",
    security(("bearer" = ["commands:read"])), params(CommandPath),
    responses((status = 200, description = "The command's status", body = CommandStatus), NoSuchCommand, BearerErrors))]
pub(crate) async fn status(
    Caller { state, principal }: Caller,
    CommandPath(id): CommandPath,
) -> Result<Json<CommandStatus>, ApiError> {
    let command = state.engine.reads().command(&principal.tenant, id).await?.ok_or_else(|| not_found(id))?;
    Ok(Json(status_document(&state, &command, true).await?))
}

/// The shared status view (the chat's `status <ref>` reads the same).
pub(crate) async fn status_document(
    app: &AppState,
    command: &StoredCommand,
    full: bool,
) -> Result<CommandStatus, ApiError> {
    Ok(crate::service::ooc::view::status(&app.engine, &app.policy, command, full).await?)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    pub(crate) state: Option<String>,
    pub(crate) actor: Option<String>,
    pub(crate) conversation: Option<String>,
    pub(crate) command: Option<String>,
    #[serde(rename = "ref")]
    pub(crate) short_ref: Option<String>,
    pub(crate) since: Option<String>,
    pub(crate) until: Option<String>,
    pub(crate) cursor: Option<String>,
    pub(crate) limit: Option<i64>,
}

/// `GET /v1/commands`: newest first, a page at a time; `next_cursor` continues where the page
/// ended, whatever arrives meanwhile.
#[utoipa::path(get, path = "/v1/commands", operation_id = "list_commands", tag = "commands",
    security(("bearer" = ["commands:read"])),
    params(("state" = Option<String>, Query), ("actor" = Option<String>, Query),
        ("conversation" = Option<String>, Query), ("command" = Option<String>, Query),
        ("ref" = Option<String>, Query, description = "A short reference, as replies show it (R7K2QX)"),
        ("since" = Option<String>, Query, format = DateTime), ("until" = Option<String>, Query, format = DateTime),
        ("cursor" = Option<String>, Query, format = Uuid), ("limit" = Option<i64>, Query, minimum = 1, maximum = 200)),
    responses((status = 200, description = "A page of commands", body = CommandPage),
    (status = 400, description = "A bad filter", content_type = PROBLEM_JSON, body = ProblemDocument), BearerErrors))]
pub(crate) async fn list(
    Caller { state, principal }: Caller,
    Query(query): Query<ListQuery>,
) -> Result<Json<CommandPage>, ApiError> {
    let bad = |what: &str| invalid_query(what);
    let time = |raw: &Option<String>, what: &str| -> Result<Option<OffsetDateTime>, ApiError> {
        raw.as_deref()
            .map(|t| OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).map_err(|_| bad(what)))
            .transpose()
    };
    // Text filters narrow the list: an empty one is no filter, and a value nothing has (an
    // unknown state or command name) matches nothing.
    let wanted_state = given(&query.state);
    // Like an unknown state, text that cannot be a reference matches nothing.
    let wanted_ref = given(&query.short_ref);
    let intent = given(&query.command).map(|name| state.policy.intent_named(&name));
    let limit = query.limit.unwrap_or(50);
    if !(1..=200).contains(&limit) {
        return Err(bad("`limit` is between 1 and 200"));
    }
    let filter = CommandFilter {
        state: wanted_state.as_deref().and_then(|s| s.parse().ok()),
        actor: given(&query.actor),
        conversation: given(&query.conversation),
        intent,
        // Formatted values are formatted or refused, empty ones included.
        since: time(&query.since, "`since` is an RFC 3339 time")?,
        until: time(&query.until, "`until` is an RFC 3339 time")?,
        after: query.cursor.as_deref().map(|c| c.parse().map_err(|_| bad("`cursor` is not a cursor"))).transpose()?,
        short_ref: wanted_ref.as_deref().and_then(|r| ShortRef::parse(r).ok()),
        limit: limit + 1,
    };
    // Everything else was valid: a state no command can be in matches nothing.
    if wanted_state.as_deref().is_some_and(|s| s.parse::<crate::domain::lifecycle::State>().is_err())
        || wanted_ref.as_deref().is_some_and(|r| ShortRef::parse(r).is_err())
    {
        return Ok(Json(CommandPage { commands: vec![], next_cursor: None }));
    }
    let mut page = state.engine.reads().list(&principal.tenant, &filter).await?;
    let more = page.len() as i64 > limit;
    page.truncate(usize::try_from(limit).unwrap_or(0));
    let mut items = Vec::with_capacity(page.len());
    for command in &page {
        items.push(status_document(&state, command, false).await?);
    }
    let next = if more { page.last().map(|c| c.envelope.command_id.to_string()) } else { None };
    Ok(Json(CommandPage { commands: items, next_cursor: next }))
}

/// `GET /v1/commands/{id}/evidence`: its artifacts, in chain order.
#[utoipa::path(get, path = "/v1/commands/{id}/evidence", tag = "commands", security(("bearer" = ["commands:read"])),
    params(CommandPath), responses((status = 200, description = "The command's artifacts", body = EvidenceList),
    NoSuchCommand, BearerErrors))]
pub(crate) async fn evidence(
    Caller { state, principal }: Caller,
    CommandPath(id): CommandPath,
) -> Result<Json<EvidenceList>, ApiError> {
    state.engine.reads().command(&principal.tenant, id).await?.ok_or_else(|| not_found(id))?;
    let artifacts = state.engine.reads().evidence_of(&principal.tenant, id).await?;
    let artifacts = artifacts
        .into_iter()
        .map(|a| Artifact { artifact_id: a.artifact_id, seq: a.seq, kind: a.kind, hash: a.hash, body: a.body })
        .collect();
    Ok(Json(EvidenceList { command_id: id, artifacts }))
}

/// `GET /v1/audit/verify`: the caller's tenant's evidence chain checked end to end.
#[utoipa::path(get, path = "/v1/audit/verify", tag = "audit", security(("bearer" = ["audit:read"])),
    responses((status = 200, description = "The tenant's evidence chain checked", body = AuditVerdict), BearerErrors))]
pub(crate) async fn audit(Caller { state, principal }: Caller) -> Result<Response, ApiError> {
    let chains = tenant_chains(&state.engine, &principal.tenant).await?;
    let intact = chains.iter().all(|c| c.intact);
    Ok(Json(AuditVerdict { intact, chains }).into_response())
}

/// The tenant's evidence chains, checked end to end (the API's audit and the console's).
pub(crate) async fn tenant_chains(
    engine: &Engine,
    tenant: &crate::domain::command::TenantId,
) -> Result<Vec<crate::service::reads::ChainReport>, ApiError> {
    let report = engine.reads().verify_evidence().await?;
    Ok(report.chains.into_iter().filter(|c| c.chain_id == tenant.as_str()).collect())
}

/// `GET /v1/traces/{correlation_id}`: what happened under one correlation id, as a timeline of
/// nodes with their causes. Another tenant's trace is simply not found.
#[utoipa::path(get, path = "/v1/traces/{correlation_id}", tag = "commands", security(("bearer" = ["commands:read"])),
    params(("correlation_id" = String, Path)),
    responses((status = 200, description = "The causation graph", body = TraceGraph),
    (status = 404, description = "Nothing carries this correlation id", content_type = PROBLEM_JSON,
        body = ProblemDocument), BearerErrors))]
pub(crate) async fn trace(
    Caller { state, principal }: Caller,
    Path(correlation_id): Path<String>,
) -> Result<Json<TraceGraph>, ApiError> {
    let nodes = state.engine.reads().trace(&principal.tenant, &correlation_id).await?;
    if nodes.is_empty() {
        return Err(Problem::for_status(StatusCode::NOT_FOUND)
            .detail("Nothing in your tenant carries this correlation id.")
            .into());
    }
    let edges = nodes
        .iter()
        .filter_map(|n| n.caused_by.as_ref().map(|from| TraceEdge { from: from.clone(), to: n.id.clone() }))
        .collect();
    Ok(Json(TraceGraph { correlation_id, nodes, edges }))
}

/// A text filter as given: trimmed, and none when empty (an empty filter is no filter).
pub(crate) fn given(value: &Option<String>) -> Option<String> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned)
}

fn invalid_query(detail: &str) -> ApiError {
    Problem::new(StatusCode::BAD_REQUEST, "invalid_query", "Bad Request").detail(detail.to_owned()).into()
}

pub(crate) fn not_found(id: Uuid) -> ApiError {
    Problem::for_status(StatusCode::NOT_FOUND).detail(format!("No command {id} in your tenant.")).into()
}
