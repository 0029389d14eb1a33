//! The WhatsApp Cloud API adapter: the verification handshake and signed deliveries.

pub mod client;
pub mod payload;
pub mod signature;
pub mod simulate;

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;
use subtle::ConstantTimeEq;
use time::OffsetDateTime;

use crate::http::ApiError;

use crate::config::{Config, WhatsAppApp};
use crate::http::AppState;
use crate::http::Problem;
use crate::service::intake::Handled;
use crate::service::intake::Ingress;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/webhooks/whatsapp", get(verify_default).post(receive_default))
        .route("/webhooks/whatsapp/{app}", get(verify_app).post(receive_app))
}

fn app<'a>(config: &'a Config, name: Option<&str>) -> Result<&'a WhatsAppApp, ApiError> {
    let name = name.unwrap_or(&config.whatsapp.default_app);
    config.whatsapp.apps.get(name).ok_or_else(|| {
        Problem::for_status(StatusCode::NOT_FOUND).detail(format!("no WhatsApp app `{name}` is configured")).into()
    })
}

#[utoipa::path(get, path = "/webhooks/whatsapp", tag = "webhooks", params(("hub.mode" = String, Query), ("hub.verify_token" = String, Query), ("hub.challenge" = String, Query)),
    responses((status = 200, description = "The challenge", content_type = "text/plain", body = String), (status = 400, description = "A bad handshake", content_type = "application/problem+json", body = serde_json::Value), (status = 403, description = "Wrong verify token", content_type = "application/problem+json", body = serde_json::Value)))]
pub(crate) async fn verify_default(
    state: State<Arc<Config>>,
    query: Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    verify(&state, None, &query)
}

#[utoipa::path(get, path = "/webhooks/whatsapp/{app}", tag = "webhooks", params(("app" = String, Path), ("hub.mode" = String, Query), ("hub.verify_token" = String, Query), ("hub.challenge" = String, Query)),
    responses((status = 200, description = "The challenge", content_type = "text/plain", body = String), (status = 400, description = "A bad handshake", content_type = "application/problem+json", body = serde_json::Value), (status = 403, description = "Wrong verify token", content_type = "application/problem+json", body = serde_json::Value), (status = 404, description = "No such app", content_type = "application/problem+json", body = serde_json::Value)))]
pub(crate) async fn verify_app(
    state: State<Arc<Config>>,
    Path(name): Path<String>,
    query: Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    verify(&state, Some(&name), &query)
}

/// Meta's subscription handshake: echo `hub.challenge` when `hub.verify_token` is ours.
fn verify(config: &Config, name: Option<&str>, query: &HashMap<String, String>) -> Result<Response, ApiError> {
    let app = app(config, name)?;
    let param = |key: &str| query.get(key).map(String::as_str).unwrap_or_default();
    let token_ok: bool = param("hub.verify_token").as_bytes().ct_eq(app.verify_token.expose().as_bytes()).into();
    if param("hub.mode") != "subscribe" || !token_ok {
        return Err(Problem::new(StatusCode::FORBIDDEN, "verification_failed", "Verification failed")
            .detail("hub.mode must be `subscribe` and hub.verify_token must match the configured token.")
            .into());
    }
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], param("hub.challenge").to_owned()).into_response())
}

#[utoipa::path(post, path = "/webhooks/whatsapp", tag = "webhooks", params(("X-Hub-Signature-256" = String, Header)),
    request_body(content = serde_json::Value, content_type = "application/json", description = "A WhatsApp Business Account notification"), responses((status = 200, description = "Every message and status committed", content_type = "application/json", body = serde_json::Value), (status = 400, description = "Not a WhatsApp notification", content_type = "application/problem+json", body = serde_json::Value), (status = 401, description = "Missing or wrong signature", content_type = "application/problem+json", body = serde_json::Value), (status = 404, description = "No such app", content_type = "application/problem+json", body = serde_json::Value), (status = 413, description = "Body too large", content_type = "application/problem+json", body = serde_json::Value), (status = 503, description = "Storage unavailable; Meta retries", content_type = "application/problem+json", body = serde_json::Value)))]
pub(crate) async fn receive_default(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    receive(&state, None, &headers, &body).await
}

#[utoipa::path(post, path = "/webhooks/whatsapp/{app}", tag = "webhooks", params(("app" = String, Path), ("X-Hub-Signature-256" = String, Header)),
    request_body(content = serde_json::Value, content_type = "application/json", description = "A WhatsApp Business Account notification"), responses((status = 200, description = "Every message and status committed", content_type = "application/json", body = serde_json::Value), (status = 400, description = "Not a WhatsApp notification", content_type = "application/problem+json", body = serde_json::Value), (status = 401, description = "Missing or wrong signature", content_type = "application/problem+json", body = serde_json::Value), (status = 404, description = "No such app", content_type = "application/problem+json", body = serde_json::Value), (status = 413, description = "Body too large", content_type = "application/problem+json", body = serde_json::Value), (status = 503, description = "Storage unavailable; Meta retries", content_type = "application/problem+json", body = serde_json::Value)))]
pub(crate) async fn receive_app(
    State(state): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    receive(&state, Some(&name), &headers, &body).await
}

async fn receive(state: &AppState, name: Option<&str>, headers: &HeaderMap, body: &[u8]) -> Result<Response, ApiError> {
    let result = receive_counted(state, name, headers, body).await;
    let outcome = match &result {
        Ok(_) => "accepted",
        Err(ApiError::Problem(p)) if p.code == "invalid_signature" => "bad_signature",
        Err(ApiError::Problem(p)) if p.code == "invalid_payload" => "malformed",
        Err(ApiError::Problem(p)) if p.code == "not_found" => "unknown_app",
        Err(_) => "unavailable",
    };
    metrics::counter!("chatgate_webhooks_total", "channel" => "whatsapp", "outcome" => outcome).increment(1);
    result
}

async fn receive_counted(
    state: &AppState,
    name: Option<&str>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let app = app(&state.config, name)?;
    let signature = headers.get(signature::HEADER).map(|v| v.as_bytes());
    signature::verify(app.app_secret.expose().as_bytes(), signature, body).map_err(|e| {
        ApiError::from(
            Problem::new(StatusCode::UNAUTHORIZED, "invalid_signature", "Invalid signature").detail(e.to_string()),
        )
    })?;
    let delivery = payload::parse(body).map_err(|e| {
        ApiError::from(
            Problem::new(StatusCode::BAD_REQUEST, "invalid_payload", "Invalid payload").detail(e.to_string()),
        )
    })?;
    let summary = handle_delivery(&state.ingress, &delivery, OffsetDateTime::now_utc()).await?;
    Ok(Json(summary).into_response())
}

/// Every message and status of a delivery, each committed on its own; the first storage failure
/// answers 503 so that Meta retries, and the retry finds the committed ones already done.
pub async fn handle_delivery(
    ingress: &Ingress,
    delivery: &payload::Delivery,
    now: OffsetDateTime,
) -> Result<serde_json::Value, ApiError> {
    let (mut commands, mut duplicates, mut redelivered) = (0, 0, 0);
    for message in &delivery.messages {
        match ingress.handle(message, now).await? {
            Handled::Command { outcome, .. } if outcome.starts_with("duplicate") => duplicates += 1,
            Handled::Command { .. } => commands += 1,
            Handled::Redelivered => redelivered += 1,
            _ => {}
        }
    }
    for status in &delivery.statuses {
        ingress.handle_status(status, now).await?;
    }
    Ok(json!({
        "messages": delivery.messages.len(),
        "statuses": delivery.statuses.len(),
        "commands": commands,
        "duplicates": duplicates,
        "redelivered": redelivered,
    }))
}
