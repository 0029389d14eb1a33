//! The hook bridge's routes (`/hooks/wake`, `/hooks/agent`, `/hooks/{name}` under
//! `hooks.base_path`): 202 with the command's id and where to follow it.

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::json;
use uuid::Uuid;

use crate::channels::hooks;
use crate::http::responses::HookResponses;
use crate::http::{ApiError, AppState};

/// The bridge's routes under `base` (`hooks.base_path`, `/hooks` by default; the configuration
/// check keeps it clear of every other route).
pub fn router(base: &str) -> Router<AppState> {
    let base = base.trim_end_matches('/');
    Router::new()
        .route(&format!("{base}/wake"), post(wake))
        .route(&format!("{base}/agent"), post(agent))
        .route(&format!("{base}/{{name}}"), post(mapped))
}

/// 202 with the command's id and where to follow it.
pub(crate) fn accepted(command_id: Uuid) -> Response {
    let status_url = format!("/v1/commands/{command_id}");
    (
        StatusCode::ACCEPTED,
        [(header::LOCATION, status_url.clone())],
        Json(json!({"command_id": command_id, "status_url": status_url})),
    )
        .into_response()
}

/// `POST /hooks/wake`: `{"text": "...", "mode": "now" | "next-heartbeat"}`.
#[utoipa::path(
    post,
    path = "/hooks/wake",
    tag = "hooks",
    params(
        ("Idempotency-Key" = Option<String>, Header),
        ("X-Correlation-Id" = Option<String>, Header),
        ("x-openclaw-token" = Option<String>, Header)
    ),
    request_body(content = serde_json::Value, content_type = "application/json"),
    responses(HookResponses)
)]
pub(crate) async fn wake(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    Ok(accepted(hooks::wake(&state, query.as_deref(), &headers, &body).await?))
}

/// `POST /hooks/agent`: `{"message": "..."}` and the optional OpenClaw fields, each checked.
#[utoipa::path(
    post,
    path = "/hooks/agent",
    tag = "hooks",
    params(
        ("Idempotency-Key" = Option<String>, Header),
        ("X-Correlation-Id" = Option<String>, Header),
        ("x-openclaw-token" = Option<String>, Header)
    ),
    request_body(content = serde_json::Value, content_type = "application/json"),
    responses(HookResponses)
)]
pub(crate) async fn agent(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    Ok(accepted(hooks::agent(&state, query.as_deref(), &headers, &body).await?))
}

/// `POST /hooks/{name}`: a mapped hook; its fields become the command's arguments.
#[utoipa::path(
    post,
    path = "/hooks/{name}",
    tag = "hooks",
    params(
        ("name" = String, Path),
        ("Idempotency-Key" = Option<String>, Header),
        ("X-Correlation-Id" = Option<String>, Header),
        ("x-openclaw-token" = Option<String>, Header)
    ),
    request_body(content = serde_json::Value, content_type = "application/json"),
    responses(HookResponses)
)]
pub(crate) async fn mapped(
    State(state): State<AppState>,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    Ok(accepted(hooks::mapped(&state, &name, query.as_deref(), &headers, &body).await?))
}
