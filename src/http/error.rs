//! The API layer's one error type, mapped to a problem document once, here.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::channels::ChannelError;
use crate::domain::standard_webhooks::SignatureRefusal;
use crate::http::problem::Problem;
use crate::service::database::StoreError;
use crate::service::engine::EngineError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Channel(#[from] ChannelError),
    /// A refusal the handler phrased itself (bad signature, bad payload, ...).
    #[error("{}", .0.title)]
    Problem(Box<Problem>),
}

impl ApiError {
    pub fn problem(&self) -> Problem {
        match self {
            Self::Store(error) => store_problem(error),
            Self::Engine(error) => engine_problem(error),
            Self::Problem(problem) => (**problem).clone(),
            Self::Channel(error) => channel_problem(error),
        }
    }
}

fn engine_problem(error: &EngineError) -> Problem {
    match error {
        EngineError::Store(error) => store_problem(error),
        EngineError::NotFound(_) => Problem::for_status(StatusCode::NOT_FOUND),
        EngineError::InvalidTransition { error, state, evidence_id } => {
            Problem::new(StatusCode::CONFLICT, "invalid_transition", "Transition not allowed")
                .detail(error.to_string())
                .with("state", state.as_str())
                .with("reason_code", error.reason_code())
                .with("evidence_id", evidence_id.to_string())
        }
        EngineError::InvalidPlan(error) => internal(&error.to_string()),
    }
}

fn channel_problem(error: &ChannelError) -> Problem {
    match error {
        ChannelError::Refused(refusal) => {
            let problem = Problem::new(refusal.status, refusal.code, refusal.title);
            let problem = match &refusal.detail {
                Some(detail) => problem.detail(detail.clone()),
                None => problem,
            };
            let problem = match refusal.retry_after {
                Some(secs) => problem.retry_after(secs),
                None => problem,
            };
            match refusal.challenge {
                Some(challenge) => problem.challenge(challenge),
                None => problem,
            }
        }
        ChannelError::Misconfigured(what) => internal(&format!("misconfigured: {what}")),
        ChannelError::Engine(error) => engine_problem(error),
        ChannelError::Store(error) => store_problem(error),
    }
}

fn store_problem(error: &StoreError) -> Problem {
    match error {
        // The caller should come back: the database is down or busy, or the command moved.
        StoreError::Unavailable(_) | StoreError::CannotWrite(_) | StoreError::Contention(_) => {
            Problem::new(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", "Storage unavailable")
                .detail("The database cannot be reached right now; nothing was stored. Retry later.")
                .retry_after(1)
        }
        StoreError::StaleVersion { state, .. } => {
            Problem::new(StatusCode::CONFLICT, "concurrent_update", "The command changed concurrently")
                .detail("The command moved on while this request was decided; read it again and retry.")
                .with("state", state.as_str())
        }
        StoreError::CommandNotFound(_) => Problem::for_status(StatusCode::NOT_FOUND),
        StoreError::InvalidValue(_) => Problem::new(StatusCode::BAD_REQUEST, "invalid_character", "Bad Request")
            .detail("A value holds a character that cannot be stored (a NUL); nothing was stored."),
        other => internal(&other.to_string()),
    }
}

fn internal(detail: &str) -> Problem {
    // The detail goes to the log, not to the caller.
    tracing::error!(detail, "internal error");
    Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "Internal Server Error")
}

impl From<Problem> for ApiError {
    fn from(problem: Problem) -> Self {
        Self::Problem(Box::new(problem))
    }
}

impl From<SignatureRefusal> for ApiError {
    fn from(refusal: SignatureRefusal) -> Self {
        Problem::new(StatusCode::UNAUTHORIZED, refusal.code(), "Unauthorized").detail(refusal.to_string()).into()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.problem().into_response()
    }
}

/// A request whose body (or a header it needs) is not what the route takes: 400, nothing stored.
pub(crate) fn invalid_body(detail: &str) -> ApiError {
    Problem::new(StatusCode::BAD_REQUEST, "invalid_body", "Bad Request").detail(detail.to_owned()).into()
}
