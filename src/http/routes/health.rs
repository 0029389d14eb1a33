//! Liveness and readiness.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use crate::http::AppState;
use crate::http::problem::Problem;
use crate::http::responses::{PROBLEM_JSON, ProblemDocument};
use crate::http::views::{Health, Ready};
use crate::service::database::Database;

/// A readiness probe that waits longer than this is itself a failure.
const READINESS_DEADLINE: Duration = Duration::from_secs(2);

pub fn router() -> Router<AppState> {
    Router::new().route("/healthz", get(healthz)).route("/readyz", get(readyz))
}

/// Alive: the process answers. It does not touch the database, so an orchestrator does not
/// restart a healthy process because its database is down.
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "The process runs", body = Health)))]
pub(crate) async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// Ready: the database answers and can write, within the deadline.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses((status = 200, description = "The database answers and can write", body = Ready),
    (status = 503, description = "The database does not answer, or cannot write", content_type = PROBLEM_JSON,
        body = ProblemDocument)))]
pub(crate) async fn readyz(State(database): State<Database>) -> Response {
    match tokio::time::timeout(READINESS_DEADLINE, database.can_write()).await {
        Ok(Ok(())) => Json(Ready { status: "ready", database: database.backend_name() }).into_response(),
        Ok(Err(error)) => not_ready(&error.to_string()),
        Err(_) => not_ready("the database did not answer in time"),
    }
}

fn not_ready(detail: &str) -> Response {
    tracing::warn!(detail, "not ready");
    Problem::new(StatusCode::SERVICE_UNAVAILABLE, "not_ready", "Not ready")
        .detail(format!("database unavailable: {detail}"))
        .retry_after(5)
        .into_response()
}
