//! `POST /webhooks/slack/{events,commands,interactivity}`: a Slack app's signed requests.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::{Json, Router, routing::post};

use crate::channels::slack::{self, EventAnswer, Form};
use crate::http::responses::ProviderErrors;
use crate::http::{ApiError, AppState};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/webhooks/slack/events", post(events))
        .route("/webhooks/slack/commands", post(commands))
        .route("/webhooks/slack/interactivity", post(interactivity))
}

/// Its part of the OpenAPI document (`webhooks::WEBHOOKS`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(events, commands, interactivity))]
pub struct Doc;

#[utoipa::path(
    post,
    path = "/webhooks/slack/events",
    operation_id = "receive_slack_event",
    tag = "webhooks",
    params(("X-Slack-Signature" = String, Header), ("X-Slack-Request-Timestamp" = String, Header)),
    request_body(content = slack::payload::EventsBody, content_type = "application/json",
        description = "An Events API request"),
    responses(
        (status = 200, description = "Stored (or seen before); a handshake's challenge", body = EventAnswer),
        ProviderErrors
    )
)]
pub(crate) async fn events(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<EventAnswer>, ApiError> {
    Ok(Json(slack::receive_event(&state.ingress, &state.config, &headers, &body).await?))
}

#[utoipa::path(
    post,
    path = "/webhooks/slack/commands",
    operation_id = "receive_slack_command",
    tag = "webhooks",
    params(("X-Slack-Signature" = String, Header), ("X-Slack-Request-Timestamp" = String, Header)),
    request_body(content = slack::payload::SlashCommandForm, content_type = "application/x-www-form-urlencoded",
        description = "A slash command"),
    responses(
        (status = 200, description = "Stored; the replies follow in the channel. Slack's certificate check \
            (`ssl_check=1`) is answered 200 too, before the signature, and stores nothing"),
        ProviderErrors
    )
)]
pub(crate) async fn commands(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    slack::receive_form(&state.ingress, &state.config, (&headers, &body), Form::Command).await?;
    Ok(StatusCode::OK)
}

#[utoipa::path(
    post,
    path = "/webhooks/slack/interactivity",
    operation_id = "receive_slack_interaction",
    tag = "webhooks",
    params(("X-Slack-Signature" = String, Header), ("X-Slack-Request-Timestamp" = String, Header)),
    request_body(
        content = slack::payload::InteractionForm,
        content_type = "application/x-www-form-urlencoded",
        description = "An interaction: `payload`, a `block_actions` JSON"
    ),
    responses((status = 200, description = "The button tap stored"), ProviderErrors)
)]
pub(crate) async fn interactivity(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    slack::receive_form(&state.ingress, &state.config, (&headers, &body), Form::Interaction).await?;
    Ok(StatusCode::OK)
}
