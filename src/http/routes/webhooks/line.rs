//! `POST /webhooks/line`: a LINE channel's webhook, signed with its channel secret.

use axum::extract::State;
use axum::http::StatusCode;
use axum::{Router, routing::post};

use super::ProviderPost;
use crate::channels::line;
use crate::http::responses::ProviderErrors;
use crate::http::{ApiError, AppState};

pub fn router() -> Router<AppState> {
    Router::new().route("/webhooks/line", post(receive))
}

/// Its part of the OpenAPI document (`webhooks::WEBHOOKS`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(receive))]
pub struct Doc;

/// LINE's webhook: answered 200 once its events' messages are stored (LINE redelivers what got
/// no 2xx, with the same `webhookEventId`).
#[utoipa::path(post, path = "/webhooks/line", operation_id = "receive_line_webhook", tag = "webhooks",
    params(("x-line-signature" = String, Header, description = "base64 HMAC-SHA256 of the body")),
    request_body(content = line::events::WebhookBody, content_type = "application/json",
        description = "LINE's webhook: `destination` and `events`"),
    responses((status = 200, description = "Its events' messages stored (or seen before)"), ProviderErrors))]
pub(crate) async fn receive(State(state): State<AppState>, post: ProviderPost) -> Result<StatusCode, ApiError> {
    line::receive(&state.ingress, &state.config, post.posted()).await?;
    Ok(StatusCode::OK)
}
