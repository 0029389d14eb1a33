//! `POST /webhooks/twilio` and its status callbacks: signed forms in, TwiML out.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use super::ProviderPost;
use crate::channels::twilio::{self, STATUS_PATH};
use crate::http::responses::TwilioErrors;
use crate::http::{ApiError, AppState};

pub fn router() -> Router<AppState> {
    Router::new().route("/webhooks/twilio", post(receive)).route(STATUS_PATH, post(status))
}

/// Its part of the OpenAPI document (`webhooks::WEBHOOKS`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(receive, status))]
pub struct Doc;

/// The header Twilio signs a request with, as the document lists it (the channel reads it).
#[derive(utoipa::IntoParams)]
#[into_params(names("X-Twilio-Signature"), parameter_in = Header)]
#[allow(dead_code)] // Read by the document only.
pub(crate) struct TwilioSignature(String);

#[utoipa::path(post, path = "/webhooks/twilio", operation_id = "receive_twilio_message", tag = "webhooks",
    params(TwilioSignature),
    request_body(content = twilio::form::MessageForm, content_type = "application/x-www-form-urlencoded",
        description = "Twilio's messaging webhook parameters"),
    responses((status = 200, description = "TwiML: the replies due at once, or an empty `<Response/>`",
            content_type = "text/xml", body = String), TwilioErrors))]
pub(crate) async fn receive(State(state): State<AppState>, post: ProviderPost) -> Result<Response, ApiError> {
    let twiml = twilio::receive_message(&state.ingress, &state.config, post.posted()).await?;
    Ok(([(header::CONTENT_TYPE, "text/xml; charset=utf-8")], twiml).into_response())
}

#[utoipa::path(post, path = "/webhooks/twilio/status", operation_id = "receive_twilio_status", tag = "webhooks",
    params(TwilioSignature),
    request_body(content = twilio::form::StatusForm, content_type = "application/x-www-form-urlencoded",
        description = "Twilio's status callback parameters"),
    responses((status = 204, description = "Recorded (or about a message this gateway did not send)"), TwilioErrors))]
pub(crate) async fn status(State(state): State<AppState>, post: ProviderPost) -> Result<StatusCode, ApiError> {
    twilio::receive_status(&state.ingress, &state.config, post.posted()).await?;
    Ok(StatusCode::NO_CONTENT)
}
