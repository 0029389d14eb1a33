//! `POST /webhooks/telegram`: a bot's updates, with the webhook's secret token.

use axum::extract::State;
use axum::{Json, Router, routing::post};

use super::ProviderPost;
use crate::channels::telegram::{self, WebhookAnswer};
use crate::http::responses::ProviderErrors;
use crate::http::{ApiError, AppState};

pub fn router() -> Router<AppState> {
    Router::new().route("/webhooks/telegram", post(receive))
}

/// Its part of the OpenAPI document (`webhooks::WEBHOOKS`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(receive))]
pub struct Doc;

#[utoipa::path(post, path = "/webhooks/telegram", operation_id = "receive_telegram_update", tag = "webhooks",
    params(("X-Telegram-Bot-Api-Secret-Token" = String, Header)),
    request_body(content = telegram::update::UpdateBody, content_type = "application/json",
        description = "A Telegram `Update`"),
    responses((status = 200, description = "Its message stored (or seen before); a button tap's query answered with it",
            body = WebhookAnswer), ProviderErrors))]
pub(crate) async fn receive(
    State(state): State<AppState>,
    post: ProviderPost,
) -> Result<Json<WebhookAnswer>, ApiError> {
    Ok(Json(telegram::receive(&state.ingress, &state.config, post.posted()).await?))
}
