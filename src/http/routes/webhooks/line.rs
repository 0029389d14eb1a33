//! `POST /webhooks/line`: a LINE channel's webhook, signed with its channel secret.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::{Router, routing::post};
use utoipa::IntoResponses;

use crate::channels::line::{self, signature::SIGNATURE_HEADER};
use crate::http::responses::{PROBLEM_JSON, ProblemDocument};
use crate::http::{ApiError, AppState};

pub fn router() -> Router<AppState> {
    Router::new().route("/webhooks/line", post(receive))
}

/// Its part of the OpenAPI document (`webhooks::WEBHOOKS`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(receive))]
pub struct Doc;

/// What LINE may be answered besides its 200.
#[derive(IntoResponses)]
pub enum LineErrors {
    #[response(status = 400, description = "Not a LINE webhook", content_type = PROBLEM_JSON)]
    BadRequest(ProblemDocument),
    #[response(status = 401, description = "Missing or wrong x-line-signature", content_type = PROBLEM_JSON)]
    Unauthorized(ProblemDocument),
    #[response(status = 404, description = "No LINE channel is configured", content_type = PROBLEM_JSON)]
    NotFound(ProblemDocument),
    #[response(status = 413, description = "Body too large", content_type = PROBLEM_JSON)]
    TooLarge(ProblemDocument),
    #[response(status = 503, description = "Storage unavailable or inbox full", content_type = PROBLEM_JSON)]
    Unavailable(ProblemDocument),
}

#[utoipa::path(
    post,
    path = "/webhooks/line",
    operation_id = "receive_line_webhook",
    tag = "webhooks",
    params(("x-line-signature" = String, Header, description = "base64 HMAC-SHA256 of the body")),
    request_body(content = serde_json::Value, content_type = "application/json",
        description = "LINE's webhook: `destination` and `events`"),
    responses((status = 200, description = "Its events' messages stored (or seen before)"), LineErrors)
)]
pub(crate) async fn receive(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let signature = headers.get(SIGNATURE_HEADER).and_then(|v| v.to_str().ok());
    line::receive(&state.ingress, &state.config, signature, &body).await?;
    Ok(StatusCode::OK)
}
