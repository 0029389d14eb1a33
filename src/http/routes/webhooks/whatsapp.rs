//! `GET|POST /webhooks/whatsapp[/{app}]`: Meta's handshake and signed deliveries.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use crate::channels::whatsapp::signature;
use crate::channels::whatsapp::webhook::{self, Handshake};
use crate::config::Config;
use crate::http::responses::{HandshakeErrors, NoSuchApp, ProviderErrors};
use crate::http::{ApiError, AppState};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/webhooks/whatsapp", get(verify_default).post(receive_default))
        .route("/webhooks/whatsapp/{app}", get(verify_app).post(receive_app))
}

/// Its part of the OpenAPI document (`webhooks::WEBHOOKS`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(verify_default, verify_app, receive_default, receive_app))]
pub struct Doc;

#[utoipa::path(
    get,
    path = "/webhooks/whatsapp",
    tag = "webhooks",
    params(Handshake),
    responses(
        (status = 200, description = "The challenge", content_type = "text/plain", body = String),
        HandshakeErrors
    )
)]
pub(crate) async fn verify_default(
    State(config): State<Arc<Config>>,
    Query(query): Query<Handshake>,
) -> Result<Response, ApiError> {
    challenge(webhook::verify_handshake(&config, None, query)?)
}

#[utoipa::path(
    get,
    path = "/webhooks/whatsapp/{app}",
    tag = "webhooks",
    params(("app" = String, Path), Handshake),
    responses(
        (status = 200, description = "The challenge", content_type = "text/plain", body = String),
        HandshakeErrors,
        NoSuchApp
    )
)]
pub(crate) async fn verify_app(
    State(config): State<Arc<Config>>,
    Path(name): Path<String>,
    Query(query): Query<Handshake>,
) -> Result<Response, ApiError> {
    challenge(webhook::verify_handshake(&config, Some(&name), query)?)
}

fn challenge(text: String) -> Result<Response, ApiError> {
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response())
}

#[utoipa::path(
    post,
    path = "/webhooks/whatsapp",
    tag = "webhooks",
    params(("X-Hub-Signature-256" = String, Header)),
    request_body(
        content = crate::channels::whatsapp::payload::NotificationBody,
        content_type = "application/json",
        description = "A WhatsApp Business Account notification"
    ),
    responses(
        (status = 200, description = "Its messages stored, its statuses recorded", body = webhook::DeliverySummary),
        ProviderErrors
    )
)]
pub(crate) async fn receive_default(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<webhook::DeliverySummary>, ApiError> {
    receive(&state, None, &headers, &body).await
}

#[utoipa::path(
    post,
    path = "/webhooks/whatsapp/{app}",
    tag = "webhooks",
    params(("app" = String, Path), ("X-Hub-Signature-256" = String, Header)),
    request_body(
        content = crate::channels::whatsapp::payload::NotificationBody,
        content_type = "application/json",
        description = "A WhatsApp Business Account notification"
    ),
    responses(
        (status = 200, description = "Its messages stored, its statuses recorded", body = webhook::DeliverySummary),
        ProviderErrors
    )
)]
pub(crate) async fn receive_app(
    State(state): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<webhook::DeliverySummary>, ApiError> {
    receive(&state, Some(&name), &headers, &body).await
}

async fn receive(
    state: &AppState,
    name: Option<&str>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Json<webhook::DeliverySummary>, ApiError> {
    let signature = headers.get(signature::HEADER).map(|v| v.as_bytes());
    Ok(Json(webhook::receive(&state.ingress, &state.config, name, signature, body).await?))
}
