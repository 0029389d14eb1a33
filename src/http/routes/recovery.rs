//! `POST /v1/commands/{id}/recovery` and `POST /v1/commands/{id}/step-up`: an operator's
//! recovery actions (the same `service::recovery` the chat runs) and a person's step-up proof.

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use super::commands::{CommandPath, invalid_body, not_found};
use crate::domain::lifecycle::recovery::RecoveryAction;
use crate::http::auth::{Caller, Principal, require};
use crate::http::body::{decode_json, read_json};
use crate::http::idempotency::{key_of, once};
use crate::http::responses::{BearerErrors, KeyReused, NoSuchCommand, PROBLEM_JSON, ProblemDocument};
use crate::http::views::{RecoveryLinks, RecoveryStarted, SteppedUp};
use crate::http::{ApiError, AppState, Problem};
use crate::service::recovery::{Operator, RecoveryError, StepUp, recover};
use crate::service::security::{StepUpError, StepUpFailure, complete_step_up};

/// Recovering commands, one (here) or many (`/v1/recovery/bulk`).
pub const WRITE: &str = crate::service::recovery::WRITE_SCOPE;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/commands/{id}/recovery", post(recovery_request).route_layer(require(WRITE)))
        .route("/v1/commands/{id}/step-up", post(step_up).route_layer(require("stepup:verify")))
}

/// A recovery request's body: what to do to the command, and why (kept with its evidence).
#[derive(Deserialize, serde::Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RecoveryBody {
    // What to do to the command. (A doc comment here would wrap the inlined enum in an `allOf`
    // with an object: utoipa's.)
    #[schema(value_type = RecoveryAction, inline)]
    pub(crate) action: String,
    #[serde(default)]
    pub(crate) reason: String,
}

/// A recovery request, read and checked: what the API's body and the console's form both become.
#[derive(Debug, Clone)]
pub(crate) struct RecoveryRequest {
    pub(crate) action: RecoveryAction,
    pub(crate) reason: String,
}

impl RecoveryRequest {
    /// A body that is not a recovery request is refused before anything is stored.
    pub(crate) fn read(body: &[u8]) -> Result<Self, ApiError> {
        let body: RecoveryBody = read_json(body)?;
        Self::checked(body)
    }

    /// A body already read (the console's form), checked as the API checks it.
    pub(crate) fn checked(body: RecoveryBody) -> Result<Self, ApiError> {
        let action = body
            .action
            .parse()
            .map_err(|_| invalid_body("`action` is `retry`, `cancel`, `compensate` or `reprocess`"))?;
        Ok(Self { action, reason: body.reason })
    }
}

/// `POST /v1/commands/{id}/recovery`, honouring `Idempotency-Key` (IETF httpapi draft).
#[utoipa::path(post, path = "/v1/commands/{id}/recovery", tag = "recovery", security(("bearer" = ["recovery:write"])),
    params(CommandPath, ("Idempotency-Key" = Option<String>, Header),
        ("Step-Up" = Option<String>, Header, description = "A step-up JWT, for actions on high-risk commands")),
    request_body(content = inline(RecoveryBody), content_type = "application/json"),
    responses((status = 201, description = "The recovery command", body = RecoveryStarted),
    (status = 400, description = "A bad body", content_type = PROBLEM_JSON, body = ProblemDocument), NoSuchCommand,
    (status = 409, description = "Not allowed in this state, or a request with this key is running",
        content_type = PROBLEM_JSON, body = ProblemDocument), KeyReused, BearerErrors))]
pub(crate) async fn recovery_request(
    Caller { state, principal }: Caller,
    CommandPath(id): CommandPath,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let key = key_of(&headers)?;
    let step_up = headers.get("step-up").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let fingerprint = [id.as_bytes().as_slice(), &crate::http::idempotency::body_fingerprint(&body)].concat();
    let request = RecoveryRequest::read(&body)?;
    let run = run_recovery(&state, &principal, id, &request, step_up.as_deref());
    once(&state.database, principal.tenant.as_str(), key.as_deref(), &fingerprint, run).await?.into_response()
}

pub(crate) async fn run_recovery(
    state: &AppState,
    principal: &Principal,
    id: Uuid,
    request: &RecoveryRequest,
    step_up: Option<&str>,
) -> Result<(StatusCode, RecoveryStarted), ApiError> {
    let action = request.action;
    let operator_id = format!("{}|{}", principal.issuer, principal.subject);
    let operator = Operator {
        tenant: &principal.tenant,
        id: &operator_id,
        subject: &principal.subject,
        reason: &request.reason,
        step_up: step_up.map_or(StepUp::None, StepUp::Token),
    };
    match recover(&state.ingress, &state.engine, &state.policy, &operator, id, action, OffsetDateTime::now_utc()).await
    {
        Ok(done) => Ok((
            StatusCode::CREATED,
            RecoveryStarted {
                recovery_command_id: done.recovery_command_id,
                action,
                state: done.state,
                target_command_id: id,
                target_state: done.target_state,
                links: RecoveryLinks { recovery_command: format!("/v1/commands/{}", done.recovery_command_id) },
            },
        )),
        Err(RecoveryError::NotFound) => Err(not_found(id)),
        Err(RecoveryError::NotAllowed { action, state, allowed }) => {
            Err(Problem::new(StatusCode::CONFLICT, "recovery_not_allowed", "Recovery action not allowed")
                .detail(format!("{action} is not allowed while the command is {state}."))
                .with("state", state.as_str())
                .with("allowed", serde_json::to_value(allowed).unwrap_or(Value::Null))
                .into())
        }
        Err(RecoveryError::Conflict(detail)) => {
            Err(Problem::new(StatusCode::CONFLICT, "recovery_conflict", "Recovery not possible now")
                .detail(detail)
                .into())
        }
        Err(RecoveryError::StepUpRequired(detail)) => {
            Err(Problem::new(StatusCode::UNAUTHORIZED, "insufficient_user_authentication", "Step-up required")
                .detail(format!("{detail}; send a step-up token for this command in the `Step-Up` header."))
                .challenge(state.policy.security.stepup.challenge(&detail))
                .into())
        }
        Err(RecoveryError::Engine(error)) => Err(error.into()),
    }
}

/// A step-up proof for a command that waits for one.
#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct StepUpBody {
    /// The step-up JWT.
    token: String,
}

#[utoipa::path(post, path = "/v1/commands/{id}/step-up", tag = "security", security(("bearer" = ["stepup:verify"])),
    params(CommandPath), request_body(content = inline(StepUpBody), content_type = "application/json"),
    responses((status = 200, description = "Authorized and started", body = SteppedUp),
    (status = 400, description = "A bad body", content_type = PROBLEM_JSON, body = ProblemDocument), NoSuchCommand,
    (status = 409, description = "Used token, or not waiting for a step-up", content_type = PROBLEM_JSON,
        body = ProblemDocument), BearerErrors))]
pub(crate) async fn step_up(
    Caller { state, principal }: Caller,
    CommandPath(id): CommandPath,
    body: Bytes,
) -> Result<Json<SteppedUp>, ApiError> {
    let body: StepUpBody =
        decode_json(&body).map_err(|e| invalid_body(&format!("Expected {{\"token\": \"<step-up JWT>\"}}: {e}")))?;
    let now = OffsetDateTime::now_utc();
    match complete_step_up(&state.engine, &state.policy, &principal.tenant, id, &body.token, now).await {
        Ok(after) => Ok(Json(SteppedUp { command_id: id, state: after })),
        Err(failure) => Err(step_up_problem(&state, id, failure)),
    }
}

pub(crate) fn step_up_problem(state: &AppState, id: Uuid, failure: StepUpFailure) -> ApiError {
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
