//! `GET|POST /webhooks/whatsapp[/{app}]`: Meta's handshake and signed deliveries.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use super::{AppName, ProviderPost};
use crate::channels::whatsapp::webhook::{self, DeliverySummary, Handshake};
use crate::config::Config;
use crate::http::responses::{HandshakeAnswers, NoSuchApp, ProviderErrors};
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

/// The header Meta signs a delivery with, as the document lists it (the channel reads it).
#[derive(utoipa::IntoParams)]
#[into_params(names("X-Hub-Signature-256"), parameter_in = Header)]
#[allow(dead_code)] // Read by the document only.
pub(crate) struct MetaSignature(String);

#[utoipa::path(get, path = "/webhooks/whatsapp", tag = "webhooks", params(Handshake), responses(HandshakeAnswers))]
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
    params(AppName, Handshake),
    responses(HandshakeAnswers, NoSuchApp)
)]
pub(crate) async fn verify_app(
    State(config): State<Arc<Config>>,
    Path(AppName(name)): Path<AppName>,
    Query(query): Query<Handshake>,
) -> Result<Response, ApiError> {
    challenge(webhook::verify_handshake(&config, Some(&name), query)?)
}

fn challenge(text: String) -> Result<Response, ApiError> {
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response())
}

#[utoipa::path(post, path = "/webhooks/whatsapp", tag = "webhooks", params(MetaSignature),
    request_body(content = crate::channels::whatsapp::payload::NotificationBody, content_type = "application/json",
        description = "A WhatsApp Business Account notification"),
    responses((status = 200, description = "Its messages stored, its statuses recorded", body = DeliverySummary),
    ProviderErrors))]
pub(crate) async fn receive_default(
    State(state): State<AppState>,
    post: ProviderPost,
) -> Result<Json<DeliverySummary>, ApiError> {
    Ok(Json(webhook::receive(&state.ingress, &state.config, None, post.posted()).await?))
}

#[utoipa::path(post, path = "/webhooks/whatsapp/{app}", tag = "webhooks", params(AppName, MetaSignature),
    request_body(content = crate::channels::whatsapp::payload::NotificationBody, content_type = "application/json",
        description = "A WhatsApp Business Account notification"),
    responses((status = 200, description = "Its messages stored, its statuses recorded", body = DeliverySummary),
    ProviderErrors))]
pub(crate) async fn receive_app(
    State(state): State<AppState>,
    Path(AppName(name)): Path<AppName>,
    post: ProviderPost,
) -> Result<Json<DeliverySummary>, ApiError> {
    Ok(Json(webhook::receive(&state.ingress, &state.config, Some(&name), post.posted()).await?))
}
