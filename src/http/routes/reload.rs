//! The two ways to reload the registry, the templates and the directory file without a restart:
//! `POST /v1/reload` (the deployment's `config:reload` scope) and `SIGHUP`. Either reads the
//! files again and swaps them in whole, or refuses and keeps what runs (`service::reload`).
//! Each instance reads its own files: reload every instance.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::http::auth::require;
use crate::http::responses::{BearerErrors, PROBLEM_JSON, ProblemDocument};
use crate::http::{ApiError, AppState, Problem};
use crate::service::Services;
use crate::service::reload::{ReloadError, Reloaded};
use crate::service::scopes::RELOAD_SCOPE;

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/reload", post(reload).route_layer(require(RELOAD_SCOPE)))
}

#[utoipa::path(
    post,
    path = "/v1/reload",
    operation_id = "reload",
    tag = "operations",
    security(("bearer" = ["config:reload"])),
    responses(
        (status = 200, description = "Read again and in place", body = Reloaded),
        (status = 409, description = "This gateway's files were given as text: nothing to read",
            content_type = PROBLEM_JSON, body = ProblemDocument),
        (status = 422, description = "A file is broken (each problem names its line); what runs stays",
            content_type = PROBLEM_JSON, body = ProblemDocument),
        BearerErrors
    )
)]
pub(crate) async fn reload(State(state): State<AppState>) -> Result<Json<Reloaded>, ApiError> {
    match state.services.reload(OffsetDateTime::now_utc()).await {
        Ok(reloaded) => Ok(Json(reloaded)),
        Err(ReloadError::Store(error)) => Err(error.into()),
        Err(error @ ReloadError::NotFromFiles) => {
            Err(Problem::new(StatusCode::CONFLICT, "not_reloadable", "Nothing to reload")
                .detail(error.to_string())
                .into())
        }
        Err(error @ ReloadError::Invalid(_)) => Err(Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_configuration",
            "The files were refused; the running configuration stays",
        )
        .detail(error.to_string())
        .into()),
    }
}

/// Reloads on every `SIGHUP` until `stopping`, logging what came of it.
pub fn reload_on_hangup(services: Services, stopping: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            let mut hangups = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
                Ok(signal) => signal,
                Err(error) => {
                    tracing::error!(%error, "cannot listen for SIGHUP; reload through POST /v1/reload");
                    return;
                }
            };
            loop {
                tokio::select! {
                    () = stopping.cancelled() => return,
                    _ = hangups.recv() => match services.reload(OffsetDateTime::now_utc()).await {
                        Ok(done) => tracing::info!(registry_version = %done.registry_version, "SIGHUP: reloaded"),
                        Err(error) => tracing::error!(%error, "SIGHUP: files refused; the running configuration stays"),
                    },
                }
            }
        }
        #[cfg(not(unix))]
        stopping.cancelled().await;
    })
}
