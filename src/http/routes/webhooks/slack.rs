//! `POST /webhooks/slack/{events,commands,interactivity}`: a Slack app's signed requests.

use axum::extract::State;
use axum::http::StatusCode;
use axum::{Json, Router, routing::post};

use super::ProviderPost;
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

/// The headers Slack signs a request with, as the document lists them (the channel reads them).
#[derive(utoipa::IntoParams)]
#[into_params(names("X-Slack-Signature", "X-Slack-Request-Timestamp"), parameter_in = Header)]
#[allow(dead_code)] // Read by the document only.
pub(crate) struct SlackSignature(String, String);

#[utoipa::path(post, path = "/webhooks/slack/events", operation_id = "receive_slack_event", tag = "webhooks",
    params(SlackSignature),
    request_body(content = slack::payload::EventsBody, content_type = "application/json",
        description = "An Events API request"),
    responses((status = 200, description = "Stored (or seen before); a handshake's challenge", body = EventAnswer),
    ProviderErrors))]
pub(crate) async fn events(State(state): State<AppState>, post: ProviderPost) -> Result<Json<EventAnswer>, ApiError> {
    Ok(Json(slack::receive_event(&state.ingress, &state.config, post.posted()).await?))
}

#[utoipa::path(post, path = "/webhooks/slack/commands", operation_id = "receive_slack_command", tag = "webhooks",
    params(SlackSignature),
    request_body(content = slack::payload::SlashCommandForm, content_type = "application/x-www-form-urlencoded",
        description = "A slash command"),
    responses((status = 200, description = "Stored; the replies follow in the channel. Slack's certificate check \
            (`ssl_check=1`) is answered 200 too, before the signature, and stores nothing"), ProviderErrors))]
pub(crate) async fn commands(State(state): State<AppState>, post: ProviderPost) -> Result<StatusCode, ApiError> {
    slack::receive_form(&state.ingress, &state.config, post.posted(), Form::Command).await?;
    Ok(StatusCode::OK)
}

#[utoipa::path(post, path = "/webhooks/slack/interactivity", operation_id = "receive_slack_interaction",
    tag = "webhooks", params(SlackSignature),
    request_body(content = slack::payload::InteractionForm, content_type = "application/x-www-form-urlencoded",
        description = "An interaction: `payload`, a `block_actions` JSON"),
    responses((status = 200, description = "The button tap stored"), ProviderErrors))]
pub(crate) async fn interactivity(State(state): State<AppState>, post: ProviderPost) -> Result<StatusCode, ApiError> {
    slack::receive_form(&state.ingress, &state.config, post.posted(), Form::Interaction).await?;
    Ok(StatusCode::OK)
}
