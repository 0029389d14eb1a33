//! `POST /webhooks/standard/{source}`: Standard Webhooks senders.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};

use super::ProviderPost;
use super::hooks::{CommandAccepted, accepted};
use crate::channels::standard::{self, Delivered};
use crate::http::responses::StandardErrors;
use crate::http::views::MessageHandled;
use crate::http::{ApiError, AppState};

pub fn router() -> Router<AppState> {
    Router::new().route("/webhooks/standard/{source}", post(receive))
}

/// Its part of the OpenAPI document (`webhooks::WEBHOOKS`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(receive))]
pub struct Doc;

#[utoipa::path(
    post,
    path = "/webhooks/standard/{source}",
    operation_id = "receive_standard_webhook",
    tag = "webhooks",
    params(
        ("source" = String, Path),
        ("webhook-id" = String, Header),
        ("webhook-timestamp" = String, Header),
        ("webhook-signature" = String, Header)
    ),
    request_body(content = standard::SenderEvent, content_type = "application/json"),
    responses(
        (status = 200,
            description = "A chat message (a source with a `message` mapping), stored (`accepted`) or handled: \
                           its outcome",
            body = MessageHandled),
        (status = 202, description = "Accepted: the command's id and where to follow it",
            body = CommandAccepted, headers(("Location" = String, description = "The command's status"))),
        StandardErrors
    )
)]
pub(crate) async fn receive(
    State(state): State<AppState>,
    Path(name): Path<String>,
    post: ProviderPost,
) -> Result<Response, ApiError> {
    Ok(match standard::receive(&state.ingress, &state.config, &name, post.posted()).await? {
        Delivered::Handled { outcome, command_id } => Json(MessageHandled { outcome, command_id }).into_response(),
        Delivered::Accepted(command_id) => accepted(command_id),
    })
}
