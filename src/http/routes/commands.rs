//! `/v1/commands`: a command's status for its tenant's callers, and the step-up endpoint. Each
//! route declares its scope with a layer; another tenant's command is a 404, never a 403.

use axum::body::Bytes;
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::Digest;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::http::ApiError;

use crate::domain::command::IdempotencyKey;
use crate::domain::command::ShortRef;
use crate::domain::lifecycle::recovery::RecoveryAction;
use crate::http::AppState;
use crate::http::Problem;
use crate::http::auth::Principal;
use crate::http::auth::require;
use crate::service::engine::Engine;
use crate::service::recovery::Operator;
use crate::service::recovery::RecoveryError;
use crate::service::recovery::StepUp;
use crate::service::recovery::recover;
use crate::service::security::StepUpError;
use crate::service::security::StepUpFailure;
use crate::service::security::complete_step_up;
use crate::store::{CommandFilter, KeyClaim, StoredCommand};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/commands", get(list).route_layer(require("commands:read")))
        .route("/v1/commands/{id}", get(status).route_layer(require("commands:read")))
        .route("/v1/commands/{id}/evidence", get(evidence).route_layer(require("commands:read")))
        .route("/v1/commands/{id}/recovery", post(recovery_request).route_layer(require("recovery:write")))
        .route("/v1/audit/verify", get(audit).route_layer(require("audit:read")))
        .route("/v1/traces/{correlation_id}", get(trace).route_layer(require("commands:read")))
        .route("/v1/commands/{id}/step-up", post(step_up).route_layer(require("stepup:verify")))
}

/// A path id that is not a UUID names no command.
pub(super) fn command_id(raw: &str) -> Result<Uuid, ApiError> {
    raw.parse().map_err(|_| Problem::for_status(StatusCode::NOT_FOUND).detail("No command has this id.").into())
}

#[utoipa::path(get, path = "/v1/commands/{id}", tag = "commands", security(("bearer" = ["commands:read"])), params(("id" = String, Path, description = "The command id (a UUID)")),
    responses((status = 200, description = "The command's status", content_type = "application/json", body = serde_json::Value), (status = 404, description = "No such command in the tenant", content_type = "application/problem+json", body = serde_json::Value), (status = 401, description = "Missing or invalid bearer token", content_type = "application/problem+json", body = serde_json::Value),
        (status = 403, description = "The token lacks the scope", content_type = "application/problem+json", body = serde_json::Value),
        (status = 429, description = "Over the client's rate limit", content_type = "application/problem+json", body = serde_json::Value),
        (status = 503, description = "Storage unavailable; retry", content_type = "application/problem+json", body = serde_json::Value)))]
pub(crate) async fn status(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = command_id(&id)?;
    let command = state.engine.store().commands().get(&principal.tenant, id).await?.ok_or_else(|| not_found(id))?;
    Ok(Json(status_document(&state, &command, true).await?))
}

/// The shared status view (the chat's `status <ref>` reads the same).
async fn status_document(app: &AppState, command: &StoredCommand, full: bool) -> Result<Value, ApiError> {
    Ok(crate::service::ooc::view::status(&app.engine, &app.policy, command, full).await?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    state: Option<String>,
    actor: Option<String>,
    conversation: Option<String>,
    command: Option<String>,
    #[serde(rename = "ref")]
    short_ref: Option<String>,
    since: Option<String>,
    until: Option<String>,
    cursor: Option<String>,
    limit: Option<i64>,
}

/// `GET /v1/commands`: newest first, a page at a time; `next_cursor` continues where the page
/// ended, whatever arrives meanwhile.
#[utoipa::path(get, path = "/v1/commands", tag = "commands", security(("bearer" = ["commands:read"])),
    params(("state" = Option<String>, Query), ("actor" = Option<String>, Query), ("conversation" = Option<String>, Query),
        ("command" = Option<String>, Query), ("ref" = Option<String>, Query, description = "A short reference, as replies show it (R7K2QX)"), ("since" = Option<String>, Query, format = DateTime), ("until" = Option<String>, Query, format = DateTime),
        ("cursor" = Option<String>, Query, format = Uuid), ("limit" = Option<i64>, Query, minimum = 1, maximum = 200)),
    responses((status = 200, description = "A page of commands", content_type = "application/json", body = serde_json::Value), (status = 400, description = "A bad filter", content_type = "application/problem+json", body = serde_json::Value), (status = 401, description = "Missing or invalid bearer token", content_type = "application/problem+json", body = serde_json::Value),
        (status = 403, description = "The token lacks the scope", content_type = "application/problem+json", body = serde_json::Value),
        (status = 429, description = "Over the client's rate limit", content_type = "application/problem+json", body = serde_json::Value),
        (status = 503, description = "Storage unavailable; retry", content_type = "application/problem+json", body = serde_json::Value)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Query(query): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let bad = |what: &str| invalid_query(what);
    let time = |raw: &Option<String>, what: &str| -> Result<Option<OffsetDateTime>, ApiError> {
        raw.as_deref()
            .map(|t| OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).map_err(|_| bad(what)))
            .transpose()
    };
    // Text filters narrow the list: an empty one is no filter, and a value nothing has (an
    // unknown state or command name) matches nothing.
    let given = |v: &Option<String>| v.as_deref().map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned);
    let wanted_state = given(&query.state);
    // Like an unknown state, text that cannot be a reference matches nothing.
    let wanted_ref = given(&query.short_ref);
    let intent = given(&query.command).map(|name| match state.policy.registry.get(&name) {
        Some(spec) => (spec.entity.clone(), spec.action.clone()),
        None => ("-".to_owned(), "-".to_owned()),
    });
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
        return Ok(Json(json!({"commands": [], "next_cursor": null})));
    }
    let mut page = state.engine.store().commands().list(&principal.tenant, &filter).await?;
    let more = page.len() as i64 > limit;
    page.truncate(usize::try_from(limit).unwrap_or(0));
    let mut items = Vec::with_capacity(page.len());
    for command in &page {
        items.push(status_document(&state, command, false).await?);
    }
    let next = if more { page.last().map(|c| c.envelope.command_id.to_string()) } else { None };
    Ok(Json(json!({"commands": items, "next_cursor": next})))
}

/// `GET /v1/commands/{id}/evidence`: its artifacts, in chain order.
#[utoipa::path(get, path = "/v1/commands/{id}/evidence", tag = "commands", security(("bearer" = ["commands:read"])), params(("id" = String, Path, description = "The command id (a UUID)")),
    responses((status = 200, description = "The command's artifacts", content_type = "application/json", body = serde_json::Value), (status = 404, description = "No such command in the tenant", content_type = "application/problem+json", body = serde_json::Value), (status = 401, description = "Missing or invalid bearer token", content_type = "application/problem+json", body = serde_json::Value),
        (status = 403, description = "The token lacks the scope", content_type = "application/problem+json", body = serde_json::Value),
        (status = 429, description = "Over the client's rate limit", content_type = "application/problem+json", body = serde_json::Value),
        (status = 503, description = "Storage unavailable; retry", content_type = "application/problem+json", body = serde_json::Value)))]
pub(crate) async fn evidence(
    State(engine): State<Engine>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = command_id(&id)?;
    engine.store().commands().get(&principal.tenant, id).await?.ok_or_else(|| not_found(id))?;
    let artifacts = engine.store().evidence().for_command(principal.tenant.as_str(), id).await?;
    let artifacts: Vec<Value> = artifacts
        .into_iter()
        .map(|a| json!({"artifact_id": a.artifact_id, "seq": a.seq, "kind": a.kind, "hash": a.hash, "body": a.body}))
        .collect();
    Ok(Json(json!({"command_id": id, "artifacts": artifacts})))
}

/// `GET /v1/audit/verify`: the caller's tenant's evidence chain checked end to end.
#[utoipa::path(get, path = "/v1/audit/verify", tag = "audit", security(("bearer" = ["audit:read"])),
    responses((status = 200, description = "The tenant's evidence chain checked", content_type = "application/json", body = serde_json::Value), (status = 401, description = "Missing or invalid bearer token", content_type = "application/problem+json", body = serde_json::Value),
        (status = 403, description = "The token lacks the scope", content_type = "application/problem+json", body = serde_json::Value),
        (status = 429, description = "Over the client's rate limit", content_type = "application/problem+json", body = serde_json::Value),
        (status = 503, description = "Storage unavailable; retry", content_type = "application/problem+json", body = serde_json::Value)))]
pub(crate) async fn audit(
    State(engine): State<Engine>,
    Extension(principal): Extension<Principal>,
) -> Result<Response, ApiError> {
    let report = engine.store().evidence().verify().await?;
    let chains: Vec<_> = report.chains.into_iter().filter(|c| c.chain_id == principal.tenant.as_str()).collect();
    let intact = chains.iter().all(|c| c.intact);
    let body = json!({"intact": intact, "chains": chains});
    Ok(Json(body).into_response())
}

/// `GET /v1/traces/{correlation_id}`: what happened under one correlation id, as a timeline of
/// nodes with their causes. Another tenant's trace is simply not found.
#[utoipa::path(get, path = "/v1/traces/{correlation_id}", tag = "commands", security(("bearer" = ["commands:read"])),
    params(("correlation_id" = String, Path)),
    responses((status = 200, description = "The causation graph", content_type = "application/json", body = serde_json::Value), (status = 404, description = "Nothing carries this correlation id", content_type = "application/problem+json", body = serde_json::Value), (status = 401, description = "Missing or invalid bearer token", content_type = "application/problem+json", body = serde_json::Value),
        (status = 403, description = "The token lacks the scope", content_type = "application/problem+json", body = serde_json::Value),
        (status = 429, description = "Over the client's rate limit", content_type = "application/problem+json", body = serde_json::Value),
        (status = 503, description = "Storage unavailable; retry", content_type = "application/problem+json", body = serde_json::Value)))]
pub(crate) async fn trace(
    State(engine): State<Engine>,
    Extension(principal): Extension<Principal>,
    Path(correlation_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let nodes = engine.store().commands().trace(&principal.tenant, &correlation_id).await?;
    if nodes.is_empty() {
        return Err(Problem::for_status(StatusCode::NOT_FOUND)
            .detail("Nothing in your tenant carries this correlation id.")
            .into());
    }
    let edges: Vec<Value> =
        nodes.iter().filter_map(|n| n.caused_by.as_ref().map(|from| json!({"from": from, "to": n.id}))).collect();
    Ok(Json(json!({"correlation_id": correlation_id, "nodes": nodes, "edges": edges})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecoveryBody {
    action: String,
    #[serde(default)]
    reason: String,
}

/// `RecoveryBody` as the OpenAPI document describes it.
pub(crate) fn recovery_body_schema() -> Value {
    let actions: Vec<&str> = RecoveryAction::ALL.iter().map(|a| a.as_str()).collect();
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["action"],
        "properties": {"action": {"type": "string", "enum": actions}, "reason": {"type": "string"}},
    })
}

/// `POST /v1/commands/{id}/recovery`, honouring `Idempotency-Key` (IETF httpapi draft).
#[utoipa::path(post, path = "/v1/commands/{id}/recovery", tag = "recovery", security(("bearer" = ["recovery:write"])),
    params(("id" = String, Path, description = "The command id (a UUID)"), ("Idempotency-Key" = Option<String>, Header),
        ("Step-Up" = Option<String>, Header, description = "A step-up JWT, for actions on high-risk commands")),
    request_body(content = serde_json::Value, content_type = "application/json", description = "{\"action\": \"retry\" | \"cancel\" | \"compensate\", \"reason\": \"...\"}"),
    responses((status = 201, description = "The recovery command", content_type = "application/json", body = serde_json::Value), (status = 400, description = "A bad body", content_type = "application/problem+json", body = serde_json::Value), (status = 404, description = "No such command in the tenant", content_type = "application/problem+json", body = serde_json::Value),
        (status = 409, description = "Not allowed in this state, or a request with this key is running", content_type = "application/problem+json", body = serde_json::Value), (status = 422, description = "The key was used for another request", content_type = "application/problem+json", body = serde_json::Value), (status = 401, description = "Missing or invalid bearer token", content_type = "application/problem+json", body = serde_json::Value),
        (status = 403, description = "The token lacks the scope", content_type = "application/problem+json", body = serde_json::Value),
        (status = 429, description = "Over the client's rate limit", content_type = "application/problem+json", body = serde_json::Value),
        (status = 503, description = "Storage unavailable; retry", content_type = "application/problem+json", body = serde_json::Value)))]
pub(crate) async fn recovery_request(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let id = command_id(&id)?;
    let key = headers.get("idempotency-key").map(|v| v.to_str().map(str::to_owned));
    let key = match key {
        None => None,
        Some(Ok(k)) if IdempotencyKey::parse(&k).is_ok() => Some(k),
        Some(_) => return Err(invalid_body("`Idempotency-Key` is 1 to 255 visible ASCII characters")),
    };
    let tenant = principal.tenant.as_str();
    if let Some(key) = &key {
        let hash = hex::encode(sha2::Sha256::digest([id.as_bytes().as_slice(), &body].concat()));
        match state.store.api_keys().claim(tenant, key, &hash, OffsetDateTime::now_utc()).await? {
            KeyClaim::Fresh => {}
            KeyClaim::Replay { status, response } => {
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
                return Ok((status, [(header::CONTENT_TYPE, "application/json")], response).into_response());
            }
            KeyClaim::InProgress => {
                return Err(Problem::new(StatusCode::CONFLICT, "request_in_progress", "Request in progress")
                    .detail("A request with this Idempotency-Key is still being processed.")
                    .into());
            }
            KeyClaim::Mismatch => {
                return Err(Problem::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "idempotency_key_reused",
                    "Idempotency-Key reused",
                )
                .detail("This Idempotency-Key was used for a different request.")
                .into());
            }
        }
    }
    let step_up = headers.get("step-up").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let response = run_recovery(&state, &principal, id, &body, step_up.as_deref()).await;
    let (status, text) = match &response {
        Ok((status, value)) => (*status, value.to_string()),
        Err(error) => {
            let problem = error.problem();
            (
                StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                serde_json::to_string(&problem).unwrap_or_default(),
            )
        }
    };
    if let Some(key) = &key {
        state.store.api_keys().finish(tenant, key, status.as_u16(), &text).await?;
    }
    match response {
        Ok((status, value)) => Ok((status, Json(value)).into_response()),
        Err(error) => Err(error),
    }
}

async fn run_recovery(
    state: &AppState,
    principal: &Principal,
    id: Uuid,
    body: &[u8],
    step_up: Option<&str>,
) -> Result<(StatusCode, Value), ApiError> {
    let request: RecoveryBody = serde_json::from_slice(body).map_err(|e| invalid_body(&e.to_string()))?;
    let action: RecoveryAction = request
        .action
        .parse()
        .map_err(|_| invalid_body("`action` is `retry`, `cancel`, `compensate` or `reprocess`"))?;
    let operator_id = format!("{}|{}", principal.issuer, principal.subject);
    let operator = Operator {
        tenant: &principal.tenant,
        id: &operator_id,
        subject: &principal.subject,
        reason: &request.reason,
        step_up: step_up.map_or(StepUp::None, StepUp::Token),
    };
    match recover(&state.ingress, &state.engine, &state.policy, &operator, id, action, OffsetDateTime::now_utc()).await
    {
        Ok(done) => Ok((
            StatusCode::CREATED,
            json!({
                "recovery_command_id": done.recovery_command_id,
                "action": action,
                "state": done.state,
                "target_command_id": id,
                "target_state": done.target_state,
                "links": {"recovery_command": format!("/v1/commands/{}", done.recovery_command_id)},
            }),
        )),
        Err(RecoveryError::NotFound) => Err(not_found(id)),
        Err(RecoveryError::NotAllowed { action, state, allowed }) => {
            Err(Problem::new(StatusCode::CONFLICT, "recovery_not_allowed", "Recovery action not allowed")
                .detail(format!("{action} is not allowed while the command is {state}."))
                .with("state", state.as_str())
                .with("allowed", serde_json::to_value(allowed).unwrap_or(Value::Null))
                .into())
        }
        Err(RecoveryError::Conflict(detail)) => {
            Err(Problem::new(StatusCode::CONFLICT, "recovery_conflict", "Recovery not possible now")
                .detail(detail)
                .into())
        }
        Err(RecoveryError::StepUpRequired(detail)) => {
            Err(Problem::new(StatusCode::UNAUTHORIZED, "insufficient_user_authentication", "Step-up required")
                .detail(format!("{detail}; send a step-up token for this command in the `Step-Up` header."))
                .challenge(state.policy.security.stepup.challenge(&detail))
                .into())
        }
        Err(RecoveryError::Engine(error)) => Err(error.into()),
    }
}

fn invalid_query(detail: &str) -> ApiError {
    Problem::new(StatusCode::BAD_REQUEST, "invalid_query", "Bad Request").detail(detail.to_owned()).into()
}

#[derive(Deserialize)]
struct StepUpBody {
    token: String,
}

/// `StepUpBody` as the OpenAPI document describes it.
pub(crate) fn step_up_body_schema() -> Value {
    json!({"type": "object", "required": ["token"], "properties": {"token": {"type": "string"}}})
}

#[utoipa::path(post, path = "/v1/commands/{id}/step-up", tag = "security", security(("bearer" = ["stepup:verify"])), params(("id" = String, Path, description = "The command id (a UUID)")),
    request_body(content = serde_json::Value, content_type = "application/json", description = "{\"token\": \"<step-up JWT>\"}"),
    responses((status = 200, description = "Authorized and started", content_type = "application/json", body = serde_json::Value), (status = 400, description = "A bad body", content_type = "application/problem+json", body = serde_json::Value), (status = 404, description = "No such command in the tenant", content_type = "application/problem+json", body = serde_json::Value),
        (status = 409, description = "Used token, or not waiting for a step-up", content_type = "application/problem+json", body = serde_json::Value), (status = 401, description = "Missing or invalid bearer token", content_type = "application/problem+json", body = serde_json::Value),
        (status = 403, description = "The token lacks the scope", content_type = "application/problem+json", body = serde_json::Value),
        (status = 429, description = "Over the client's rate limit", content_type = "application/problem+json", body = serde_json::Value),
        (status = 503, description = "Storage unavailable; retry", content_type = "application/problem+json", body = serde_json::Value)))]
pub(crate) async fn step_up(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let id = command_id(&id)?;
    let body: StepUpBody = serde_json::from_slice(&body)
        .map_err(|e| invalid_body(&format!("Expected {{\"token\": \"<step-up JWT>\"}}: {e}")))?;
    let now = OffsetDateTime::now_utc();
    match complete_step_up(&state.engine, &state.policy, &principal.tenant, id, &body.token, now).await {
        Ok(after) => Ok(Json(json!({"command_id": id, "state": after}))),
        Err(failure) => Err(step_up_problem(&state, id, failure)),
    }
}

fn step_up_problem(state: &AppState, id: Uuid, failure: StepUpFailure) -> ApiError {
    let stepup = &state.policy.security.stepup;
    match failure {
        StepUpFailure::NotFound => not_found(id),
        StepUpFailure::Engine(error) => error.into(),
        // RFC 9470: the proof is missing, broken, too weak or too old: authenticate again.
        StepUpFailure::Proof(error @ (StepUpError::Token(_) | StepUpError::Insufficient(_))) => {
            let code = if matches!(error, StepUpError::Insufficient(_)) {
                "insufficient_user_authentication"
            } else {
                "invalid_step_up_token"
            };
            Problem::new(StatusCode::UNAUTHORIZED, code, "Step-up required")
                .detail(error.to_string())
                .challenge(stepup.challenge(&error.to_string()))
                .into()
        }
        StepUpFailure::Proof(error @ StepUpError::Mismatch(_)) => {
            Problem::new(StatusCode::FORBIDDEN, "step_up_mismatch", "Forbidden").detail(error.to_string()).into()
        }
        StepUpFailure::Used => Problem::new(StatusCode::CONFLICT, "step_up_token_used", "Step-up token already used")
            .detail("A step-up token is used once; authenticate again for a new one.")
            .into(),
        StepUpFailure::NotAwaiting(state) => {
            Problem::new(StatusCode::CONFLICT, "not_awaiting_step_up", "The command is not waiting for a step-up")
                .detail(format!("The command is {state}."))
                .with("state", state.as_str())
                .into()
        }
    }
}

pub(super) fn invalid_body(detail: &str) -> ApiError {
    Problem::new(StatusCode::BAD_REQUEST, "invalid_body", "Bad Request").detail(detail.to_owned()).into()
}

pub(super) fn not_found(id: Uuid) -> ApiError {
    Problem::for_status(StatusCode::NOT_FOUND).detail(format!("No command {id} in your tenant.")).into()
}
