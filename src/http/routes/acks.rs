//! Executors' ACKs (the CMB delivery machine's DELIVERY and EXECUTION ACKs), two ways in:
//!
//! - `POST /v1/commands/{id}/acks` with a bearer token holding `executions:write` (the token's
//!   tenant is the command's);
//! - `POST /v1/executors/{executor}/commands/{id}/acks` signed with the executor's own Standard
//!   Webhooks secret, the one its dispatches are signed with, so that an executor needs no token
//!   issuer to answer: it acknowledges only its own deliveries, in any tenant it serves.
//!
//! Both apply the ACK through `delivery::acks::apply_ack` and answer alike.

use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::http::body::read_json;
use crate::http::routes::commands::CommandPath;

use crate::http::routes::commands::invalid_body;

use crate::channels::standard::signed;
use crate::domain::standard_webhooks;
use crate::executors::acks::AckError;
use crate::executors::acks::AckOutcome;
use crate::executors::acks::AckRequest;
use crate::executors::acks::apply_ack;
use crate::http::ApiError;
use crate::http::AppState;
use crate::http::Problem;
use crate::http::auth::Principal;
use crate::http::auth::require;
use crate::http::responses::{BearerErrors, NoSuchCommand, PROBLEM_JSON, ProblemDocument};
use crate::http::routes::commands::not_found;
use crate::http::views::AckApplied;
use crate::service::intake::Ingress;

/// How far an executor's `webhook-timestamp` may be from now.
const TOLERANCE_SECS: u64 = 300;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/commands/{id}/acks", post(ack).route_layer(require("executions:write")))
        .route("/v1/executors/{executor}/commands/{id}/acks", post(signed_ack))
}

/// An executor's delivery or execution ACK, with a token.
#[utoipa::path(post, path = "/v1/commands/{id}/acks", tag = "execution", security(("bearer" = ["executions:write"])),
    params(CommandPath),
    request_body(content = inline(AckRequest), content_type = "application/json",
        description = "A delivery or execution ACK"),
    responses((status = 200, description = "Applied, or a duplicate", body = AckApplied),
    (status = 400, description = "A bad body", content_type = PROBLEM_JSON, body = ProblemDocument), NoSuchCommand,
    (status = 409, description = "Out of order, or nothing routed yet", content_type = PROBLEM_JSON,
        body = ProblemDocument), BearerErrors))]
pub(crate) async fn ack(
    State(ingress): State<Ingress>,
    Extension(principal): Extension<Principal>,
    CommandPath(id): CommandPath,
    body: Bytes,
) -> Result<Json<AckApplied>, ApiError> {
    let request: AckRequest = read_json(&body)?;
    let deciders = (ingress.engine(), ingress.policy());
    answer(id, apply_ack(deciders, &principal.tenant, id, &request, OffsetDateTime::now_utc()).await)
}

/// An executor's delivery or execution ACK, signed with its secret.
#[utoipa::path(
    post,
    path = "/v1/executors/{executor}/commands/{id}/acks",
    tag = "execution",
    params(
        ("executor" = String, Path, description = "The executor's name in the configuration"),
        CommandPath,
        ("webhook-id" = String, Header),
        ("webhook-timestamp" = String, Header),
        ("webhook-signature" = String, Header)
    ),
    request_body(
        content = inline(AckRequest),
        content_type = "application/json",
        description = "A delivery or execution ACK; `target`, if given, is the executor"
    ),
    responses(
        (status = 200, description = "Applied, or a duplicate", body = AckApplied),
        (status = 400, description = "A bad body", content_type = PROBLEM_JSON, body = ProblemDocument),
        (status = 401, description = "Missing or wrong signature, or a stale timestamp", content_type = PROBLEM_JSON,
            body = ProblemDocument),
        (status = 404, description = "No such executor with a secret, or no such command", content_type = PROBLEM_JSON,
            body = ProblemDocument),
        (status = 409, description = "Out of order, or nothing routed to this executor", content_type = PROBLEM_JSON,
            body = ProblemDocument),
        (status = 429, description = "Over the executor's rate limit", content_type = PROBLEM_JSON,
            body = ProblemDocument),
        (status = 503, description = "Storage unavailable; retry", content_type = PROBLEM_JSON, body = ProblemDocument)
    )
)]
pub(crate) async fn signed_ack(
    State(state): State<AppState>,
    Path((executor, _)): Path<(String, String)>,
    CommandPath(id): CommandPath,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let Some(secret) = state.config.executors.get(&executor).and_then(|e| e.secret.as_ref()) else {
        let detail = format!("No executor `{executor}` with a signing secret.");
        return Err(Problem::for_status(StatusCode::NOT_FOUND).detail(detail).into());
    };
    let now = OffsetDateTime::now_utc();
    standard_webhooks::verify([secret.expose()], TOLERANCE_SECS, signed(&headers), &body, now.unix_timestamp())?;
    if let Err(wait) = state.policy.security.limits.api_client(&format!("executor|{executor}")) {
        return Ok(crate::http::auth::too_many(wait, "Too many ACKs from this executor."));
    }
    let mut request: AckRequest = read_json(&body)?;
    if request.target.as_ref().is_some_and(|target| *target != executor) {
        return Err(invalid_body("An executor acknowledges its own deliveries: `target` is the executor or left out."));
    }
    request.target = Some(executor);
    let command = state.engine.reads().command_of_any_tenant(id).await?.ok_or_else(|| not_found(id))?;
    let tenant = command.envelope.tenant_id;
    Ok(answer(id, apply_ack((&state.engine, &state.policy), &tenant, id, &request, now).await)?.into_response())
}

/// The answer to an ACK, whichever way it came.
fn answer(id: Uuid, outcome: Result<AckOutcome, AckError>) -> Result<Json<AckApplied>, ApiError> {
    match outcome {
        Ok(AckOutcome::Applied { state }) => {
            Ok(Json(AckApplied { command_id: id, delivery_state: state, duplicate: false }))
        }
        Ok(AckOutcome::Duplicate { state }) => {
            Ok(Json(AckApplied { command_id: id, delivery_state: state, duplicate: true }))
        }
        Err(AckError::NotFound) => Err(not_found(id)),
        Err(AckError::Invalid(message)) => Err(invalid_body(&message)),
        Err(AckError::Engine(error)) => Err(error.into()),
        Err(error @ AckError::NoDelivery(_)) => {
            Err(Problem::new(StatusCode::CONFLICT, "no_delivery", "No delivery to acknowledge")
                .detail(error.to_string())
                .into())
        }
        Err(AckError::OutOfOrder(refused)) => {
            Err(Problem::new(StatusCode::CONFLICT, "ack_out_of_order", "ACK out of order")
                .detail(refused.to_string())
                .with("delivery_state", refused.state.as_str())
                .into())
        }
    }
}
