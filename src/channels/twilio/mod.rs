//! Twilio Messaging (WhatsApp and SMS): `POST /webhooks/twilio`, form-encoded and signed with
//! `X-Twilio-Signature` over the public URL and the parameters. The message goes through the same
//! ingress as Meta's; the answer is TwiML carrying the replies due at once (a prompt, a refusal,
//! help), and later replies (outcomes) go through Twilio's Messages API from the outbox.

pub mod client;
pub mod form;
pub mod inline;
pub mod signature;
pub mod twiml;

use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use time::OffsetDateTime;

use crate::http::ApiError;

use crate::http::AppState;
use crate::http::Problem;
use crate::service::intake::Handled;
use crate::service::intake::reply_destination;

/// Where Twilio reports what became of the messages we sent through its Messages API.
pub const STATUS_PATH: &str = "/webhooks/twilio/status";

pub fn router() -> Router<AppState> {
    Router::new().route("/webhooks/twilio", post(receive)).route(STATUS_PATH, post(status))
}

#[utoipa::path(post, path = "/webhooks/twilio", tag = "webhooks", params(("X-Twilio-Signature" = String, Header)),
    request_body(content = String, content_type = "application/x-www-form-urlencoded", description = "Twilio's messaging webhook parameters"),
    responses(
        (status = 200, description = "TwiML: the replies due at once, or an empty `<Response/>`", content_type = "text/xml", body = String),
        (status = 400, description = "Not a Twilio message", content_type = "application/problem+json", body = serde_json::Value),
        (status = 401, description = "Missing or wrong signature", content_type = "application/problem+json", body = serde_json::Value),
        (status = 404, description = "Twilio is not configured", content_type = "application/problem+json", body = serde_json::Value),
        (status = 415, description = "Not a form", content_type = "application/problem+json", body = serde_json::Value),
        (status = 503, description = "Storage unavailable; Twilio may retry", content_type = "application/problem+json", body = serde_json::Value)))]
pub(crate) async fn receive(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    counted(receive_message(&state, &uri, &headers, &body).await)
}

#[utoipa::path(post, path = "/webhooks/twilio/status", tag = "webhooks", params(("X-Twilio-Signature" = String, Header)),
    request_body(content = String, content_type = "application/x-www-form-urlencoded", description = "Twilio's status callback parameters (`MessageSid`, `MessageStatus`, `ErrorCode`, ...)"),
    responses(
        (status = 204, description = "Recorded (or about a message this gateway did not send)"),
        (status = 400, description = "Not a status callback", content_type = "application/problem+json", body = serde_json::Value),
        (status = 401, description = "Missing or wrong signature", content_type = "application/problem+json", body = serde_json::Value),
        (status = 404, description = "Twilio is not configured", content_type = "application/problem+json", body = serde_json::Value),
        (status = 415, description = "Not a form", content_type = "application/problem+json", body = serde_json::Value),
        (status = 503, description = "Storage unavailable; Twilio may retry", content_type = "application/problem+json", body = serde_json::Value)))]
pub(crate) async fn status(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    counted(receive_status(&state, &uri, &headers, &body).await)
}

/// Counts a Twilio webhook in `chatgate_webhooks_total` by how it ended.
fn counted(result: Result<Response, ApiError>) -> Result<Response, ApiError> {
    let outcome = match &result {
        Ok(_) => "accepted",
        Err(ApiError::Problem(p)) if p.code == "invalid_signature" => "bad_signature",
        Err(ApiError::Problem(p)) if (400..500).contains(&p.status) => "malformed",
        Err(_) => "unavailable",
    };
    metrics::counter!("chatgate_webhooks_total", "channel" => "twilio", "outcome" => outcome).increment(1);
    result
}

/// The parameters of a form Twilio signed for this gateway's public URL.
fn verified_form(
    state: &AppState,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Vec<(String, String)>, ApiError> {
    let auth_token = state.config.twilio.auth_token.expose();
    if auth_token.is_empty() {
        return Err(Problem::for_status(StatusCode::NOT_FOUND).detail("Twilio is not configured.").into());
    }
    let is_form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("application/x-www-form-urlencoded"));
    if !is_form {
        return Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "Unsupported Media Type",
        )
        .detail("Twilio posts application/x-www-form-urlencoded.")
        .into());
    }
    let params: Vec<(String, String)> = form_urlencoded::parse(body).into_owned().collect();
    let url = public_url(&state.config.server.public_base_url, uri);
    let given = headers.get(signature::HEADER).map(|v| v.as_bytes());
    signature::verify(auth_token.as_bytes(), &url, &params, given).map_err(|e| {
        ApiError::from(
            Problem::new(StatusCode::UNAUTHORIZED, "invalid_signature", "Invalid signature")
                .detail(format!("{e} (signed URL: the public base URL followed by the request path)")),
        )
    })?;
    Ok(params)
}

fn invalid_payload(error: &form::FormError) -> ApiError {
    Problem::new(StatusCode::BAD_REQUEST, "invalid_payload", "Invalid payload").detail(error.to_string()).into()
}

async fn receive_status(state: &AppState, uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Result<Response, ApiError> {
    let params = verified_form(state, uri, headers, body)?;
    let update = form::status(&params).map_err(|e| invalid_payload(&e))?;
    state.ingress.handle_status(&update, OffsetDateTime::now_utc()).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn receive_message(state: &AppState, uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Result<Response, ApiError> {
    let twilio = &state.config.twilio;
    let params = verified_form(state, uri, headers, body)?;
    let message =
        form::parse(&params, Duration::from_millis(twilio.inline_hold_ms)).map_err(|e| invalid_payload(&e))?;
    let handled = state.ingress.handle(&message, OffsetDateTime::now_utc()).await?;
    // A redelivered webhook wrote nothing, so nothing waits for this answer.
    let replies = if handled == Handled::Redelivered {
        vec![]
    } else {
        let lease = Duration::from_millis(state.config.outbound.lease_ms);
        let destination = reply_destination(&message);
        inline::take(&state.engine, &state.templates, &destination, lease, OffsetDateTime::now_utc()).await
    };
    Ok(([(header::CONTENT_TYPE, "text/xml; charset=utf-8")], twiml::response(&replies)).into_response())
}

/// The URL Twilio called: the configured public base (which may carry a path a proxy strips)
/// followed by the request's path and query.
fn public_url(base: &str, uri: &Uri) -> String {
    let path = uri.path_and_query().map_or(uri.path(), |pq| pq.as_str());
    format!("{}{path}", base.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signed_url_is_the_public_base_and_the_request_path_and_query() {
        let uri: Uri = "/webhooks/twilio?tenant=demo".parse().unwrap();
        assert_eq!(public_url("https://gw.example.com/", &uri), "https://gw.example.com/webhooks/twilio?tenant=demo");
        let uri: Uri = "/webhooks/twilio".parse().unwrap();
        assert_eq!(public_url("https://example.com/chatgate", &uri), "https://example.com/chatgate/webhooks/twilio");
    }
}
