//! Standard Webhooks senders (`POST /webhooks/standard/{source}`): the signature is checked over
//! `{webhook-id}.{webhook-timestamp}.{body}` with any of the source's `whsec_` secrets (several
//! during a rotation) against any `v1,` entry of `webhook-signature`; a timestamp outside the
//! tolerance is refused; `webhook-id` is the transport dedupe key. Each delivery becomes a
//! command for the source's agent.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use serde_json::{Map, Value};
use subtle::ConstantTimeEq;
use time::OffsetDateTime;

use super::hooks::{Submission, accepted, submit};
use crate::api::{ApiError, Problem};
use crate::app::AppState;
use crate::command::{Channel, ExternalId, Intent, TenantId};
use crate::config::StandardSource;
use crate::delivery::executor::{sign, standard_webhooks_key};
use crate::store::NewInbound;

pub fn router() -> Router<AppState> {
    Router::new().route("/webhooks/standard/{source}", post(receive))
}

fn refused(code: &str, detail: &str) -> ApiError {
    Problem::new(StatusCode::UNAUTHORIZED, code, "Unauthorized").detail(detail.to_owned()).into()
}

/// Checks a delivery's Standard Webhooks headers against the source's secrets at `now`.
pub fn verify(
    source: &StandardSource,
    headers: &HeaderMap,
    body: &[u8],
    now: OffsetDateTime,
) -> Result<String, ApiError> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty());
    let (Some(id), Some(timestamp), Some(signatures)) =
        (header("webhook-id"), header("webhook-timestamp"), header("webhook-signature"))
    else {
        return Err(refused("invalid_signature", "webhook-id, webhook-timestamp and webhook-signature are required"));
    };
    let Ok(timestamp) = timestamp.parse::<i64>() else {
        return Err(refused("invalid_signature", "webhook-timestamp is seconds since the epoch"));
    };
    let tolerance = i64::try_from(source.tolerance_secs).unwrap_or(300);
    if (now.unix_timestamp() - timestamp).abs() > tolerance {
        return Err(refused("stale_timestamp", "webhook-timestamp is too far from now (a replay?)"));
    }
    let given: Vec<&str> = signatures.split(' ').filter(|s| s.starts_with("v1,")).collect();
    let verified = source.secrets.iter().filter_map(|s| standard_webhooks_key(s.expose()).ok()).any(|key| {
        let expected = sign(&key, id, timestamp, body);
        given.iter().any(|g| bool::from(g.as_bytes().ct_eq(expected.as_bytes())))
    });
    if !verified {
        return Err(refused("invalid_signature", "no signature verifies with this source's secrets"));
    }
    Ok(id.to_owned())
}

#[utoipa::path(post, path = "/webhooks/standard/{source}", tag = "webhooks",
    params(("source" = String, Path), ("webhook-id" = String, Header), ("webhook-timestamp" = String, Header),
        ("webhook-signature" = String, Header)),
    request_body(content = serde_json::Value, content_type = "application/json"),
    responses(
        (status = 202, description = "Accepted: the command's id and where to follow it", content_type = "application/json", body = serde_json::Value),
        (status = 400, description = "The payload lacks what the source's mapping needs", content_type = "application/problem+json", body = serde_json::Value),
        (status = 401, description = "Missing or wrong signature, or a stale timestamp", content_type = "application/problem+json", body = serde_json::Value),
        (status = 404, description = "No such source", content_type = "application/problem+json", body = serde_json::Value),
        (status = 503, description = "Storage unavailable; retry", content_type = "application/problem+json", body = serde_json::Value)))]
pub(crate) async fn receive(
    State(state): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let Some(source) = state.config.standard_webhooks.get(&name) else {
        return Err(Problem::for_status(StatusCode::NOT_FOUND).detail(format!("No source `{name}`.")).into());
    };
    let id = verify(source, &headers, &body, OffsetDateTime::now_utc())?;
    let bad = |detail: String| -> ApiError {
        Problem::new(StatusCode::BAD_REQUEST, "invalid_payload", "Bad Request").detail(detail).into()
    };
    let payload: Value = serde_json::from_slice(&body).map_err(|e| bad(format!("The body is not JSON: {e}")))?;
    let mut args = Map::new();
    for (arg, pointer) in &source.args {
        match payload.pointer(pointer) {
            Some(value @ (Value::String(_) | Value::Number(_) | Value::Bool(_))) => {
                args.insert(arg.clone(), value.clone());
            }
            _ => return Err(bad(format!("`{pointer}` is required (a string, a number or a boolean)"))),
        }
    }
    let internal = || -> ApiError { Problem::for_status(StatusCode::INTERNAL_SERVER_ERROR).into() };
    let message = NewInbound {
        channel: Channel::parse("standard").map_err(|_| internal())?,
        provider_message_id: ExternalId::parse(&format!("{name}:{id}"))
            .map_err(|_| bad("webhook-id is visible ASCII".into()))?,
        tenant_id: Some(TenantId::parse(&source.tenant).map_err(|_| internal())?),
        status: "received".into(),
        payload: payload.clone(),
        received_at: OffsetDateTime::now_utc(),
    };
    let submission = Submission {
        tenant: source.tenant.clone(),
        actor: source.actor.clone(),
        channel: "standard",
        conversation: format!("standard:{name}"),
        agent: source.agent.clone(),
        intent: Intent::parse(&source.entity, &source.action, None).map_err(|e| bad(e.to_string()))?,
        args,
        dedupe_window: std::time::Duration::from_secs(86_400),
        authorized_by: "standard webhooks signature",
        message: Some(message),
    };
    let command_id = submit(&state, &headers, submission).await?;
    metrics::counter!("chatgate_webhooks_total", "channel" => "standard", "outcome" => "accepted").increment(1);
    Ok(accepted(command_id))
}
