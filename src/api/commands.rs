//! `/v1/commands`: a command's status for its tenant's callers, and the step-up endpoint. Each
//! route declares its scope with a layer; another tenant's command is a 404, never a 403.

use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{ApiError, Problem};
use crate::app::AppState;
use crate::delivery::acks::{AckError, AckOutcome, AckRequest, apply_ack};
use crate::engine::Engine;
use crate::security::{Principal, StepUpError, StepUpFailure, complete_step_up, require};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/commands/{id}", get(status).route_layer(require("commands:read")))
        .route("/v1/commands/{id}/step-up", post(step_up).route_layer(require("stepup:verify")))
        .route("/v1/commands/{id}/acks", post(ack).route_layer(require("executions:write")))
}

/// A path id that is not a UUID names no command.
fn command_id(raw: &str) -> Result<Uuid, ApiError> {
    raw.parse().map_err(|_| Problem::for_status(StatusCode::NOT_FOUND).detail("No command has this id.").into())
}

async fn status(
    State(engine): State<Engine>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = command_id(&id)?;
    let command = engine.store().command(&principal.tenant, id).await?.ok_or_else(|| not_found(id))?;
    let transitions = engine.store().transitions(id).await?;
    Ok(Json(json!({
        "command_id": id,
        "state": command.lifecycle.state,
        "confirmation": command.lifecycle.confirmation,
        "reason_code": command.reason_code,
        "version": command.version,
        "terminal": command.lifecycle.state.is_terminal(),
        "envelope": command.envelope,
        "transitions": transitions,
        "created_at": rfc3339(command.created_at),
        "updated_at": rfc3339(command.updated_at),
    })))
}

#[derive(Deserialize)]
struct StepUpBody {
    token: String,
}

async fn step_up(
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

/// An executor's delivery or execution ACK.
async fn ack(
    State(engine): State<Engine>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let id = command_id(&id)?;
    let request: AckRequest = serde_json::from_slice(&body).map_err(|e| invalid_body(&e.to_string()))?;
    match apply_ack(&engine, &principal.tenant, id, &request, OffsetDateTime::now_utc()).await {
        Ok(AckOutcome::Applied { state }) => {
            Ok(Json(json!({"command_id": id, "delivery_state": state, "duplicate": false})))
        }
        Ok(AckOutcome::Duplicate { state }) => {
            Ok(Json(json!({"command_id": id, "delivery_state": state, "duplicate": true})))
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

fn invalid_body(detail: &str) -> ApiError {
    Problem::new(StatusCode::BAD_REQUEST, "invalid_body", "Bad Request").detail(detail.to_owned()).into()
}

fn not_found(id: Uuid) -> ApiError {
    Problem::for_status(StatusCode::NOT_FOUND).detail(format!("No command {id} in your tenant.")).into()
}

fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}
