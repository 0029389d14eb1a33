//! `GET|POST /webhooks/messenger[/{app}]`: the Meta app's handshake and its signed Messenger
//! (`object: page`) and Instagram (`object: instagram`) deliveries.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};

use super::whatsapp::MetaSignature;
use super::{AppName, ProviderPost};
use crate::channels::messenger::{self, DeliverySummary};
use crate::channels::whatsapp::webhook::Handshake;
use crate::config::Config;
use crate::http::responses::{HandshakeAnswers, NoSuchApp, ProviderErrors};
use crate::http::{ApiError, AppState};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/webhooks/messenger", get(verify).post(receive))
        .route("/webhooks/messenger/{app}", get(verify_app).post(receive_app))
}

/// Its part of the OpenAPI document (`webhooks::WEBHOOKS`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(verify, verify_app, receive, receive_app))]
pub struct Doc;

#[utoipa::path(
    get,
    path = "/webhooks/messenger",
    operation_id = "verify_messenger_webhook",
    tag = "webhooks",
    params(Handshake),
    responses(HandshakeAnswers)
)]
pub(crate) async fn verify(config: State<Arc<Config>>, query: Query<Handshake>) -> Result<Response, ApiError> {
    // The Meta app's handshake, the same for its WhatsApp, Messenger and Instagram webhooks.
    super::whatsapp::verify_default(config, query).await
}

#[utoipa::path(
    get,
    path = "/webhooks/messenger/{app}",
    operation_id = "verify_messenger_webhook_of_app",
    tag = "webhooks",
    params(AppName, Handshake),
    responses(HandshakeAnswers, NoSuchApp)
)]
pub(crate) async fn verify_app(
    config: State<Arc<Config>>,
    name: Path<AppName>,
    query: Query<Handshake>,
) -> Result<Response, ApiError> {
    super::whatsapp::verify_app(config, name, query).await
}

#[utoipa::path(post, path = "/webhooks/messenger", operation_id = "receive_messenger_delivery", tag = "webhooks",
    params(MetaSignature),
    request_body(content = messenger::payload::NotificationBody, content_type = "application/json",
        description = "A page or instagram notification"),
    responses((status = 200, description = "Its messages stored, its statuses recorded", body = DeliverySummary),
    ProviderErrors))]
pub(crate) async fn receive(
    State(state): State<AppState>,
    post: ProviderPost,
) -> Result<Json<DeliverySummary>, ApiError> {
    Ok(Json(messenger::receive(&state.ingress, &state.config, None, post.posted()).await?))
}

#[utoipa::path(post, path = "/webhooks/messenger/{app}", operation_id = "receive_messenger_delivery_of_app",
    tag = "webhooks", params(AppName, MetaSignature),
    request_body(content = messenger::payload::NotificationBody, content_type = "application/json",
        description = "A page or instagram notification"),
    responses((status = 200, description = "Its messages stored, its statuses recorded", body = DeliverySummary),
    ProviderErrors))]
pub(crate) async fn receive_app(
    State(state): State<AppState>,
    Path(AppName(name)): Path<AppName>,
    post: ProviderPost,
) -> Result<Json<DeliverySummary>, ApiError> {
    Ok(Json(messenger::receive(&state.ingress, &state.config, Some(&name), post.posted()).await?))
}
