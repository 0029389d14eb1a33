//! `GET /v1/events`: the caller's tenant's transitions as Server-Sent Events. Each event's id is
//! the move's id, which only grows, so a client that reconnects with `Last-Event-ID` misses
//! nothing and sees nothing twice. Streams are capped per client and per instance (429 with
//! `Retry-After` past either) and end with the token or console session that opened them; one
//! reader serves them all (`service::events`).

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::http::ApiError;
use crate::http::AppState;
use crate::http::Problem;
use crate::http::auth::{Caller, require, too_many};
use crate::http::responses::{BearerErrors, PROBLEM_JSON, ProblemDocument};
use crate::http::views::TransitionEvent;
use crate::service::events::{TenantStream, TooManyStreams};
use crate::service::reads::StoredMove;

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/events", get(events).route_layer(require(super::commands::READ)))
}

#[utoipa::path(get, path = "/v1/events", tag = "commands", security(("bearer" = ["commands:read"])),
    params(("Last-Event-ID" = Option<String>, Header,
            description = "The id of the last event received (digits): the stream resumes after it")),
    responses((status = 200, description = "Transitions as Server-Sent Events, until the token or the console session \
            that opened the stream ends", content_type = "text/event-stream", body = String),
    (status = 400, description = "A bad Last-Event-ID", content_type = PROBLEM_JSON, body = ProblemDocument),
    BearerErrors))]
pub(crate) async fn events(Caller { state, principal }: Caller, headers: HeaderMap) -> Result<Response, ApiError> {
    let after = match headers.get("last-event-id").map(|v| v.to_str().ok().and_then(event_id)) {
        None => None,
        Some(Some(id)) => Some(id),
        Some(None) => {
            return Err(Problem::new(StatusCode::BAD_REQUEST, "invalid_last_event_id", "Bad Request")
                .detail("Last-Event-ID is the id of an event this stream sent.")
                .into());
        }
    };
    let client = format!("{}|{}", principal.issuer, principal.subject);
    let slot = match state.streams.slots.take(&client) {
        Ok(slot) => slot,
        Err(TooManyStreams(detail, wait)) => return Ok(too_many(wait, detail)),
    };
    let stream = TenantStream::open(&state.streams, &principal, after, slot, state.stop_signal()).await?;
    let events = futures_util::stream::unfold(stream, |mut stream| async move {
        let next = stream.next().await?;
        Some((Ok::<_, Infallible>(event(&next)), stream))
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response())
}

/// One move as the stream sends it: its id, which `Last-Event-ID` gives back.
fn event(moved: &StoredMove) -> Event {
    let data = TransitionEvent { command_id: moved.command_id, transition: moved.record.clone().into() };
    let data = serde_json::to_string(&data).unwrap_or_default();
    Event::default().id(moved.id.to_string()).event("transition").data(data)
}

/// An event id as `Last-Event-ID` gives it back: the digits this stream sent.
fn event_id(raw: &str) -> Option<i64> {
    let digits = !raw.is_empty() && raw.len() <= 18 && raw.bytes().all(|b| b.is_ascii_digit());
    digits.then(|| raw.parse().ok()).flatten()
}

/// `Last-Event-ID` as the document describes it, the form `event_id` accepts.
pub(crate) fn last_event_id_schema() -> Value {
    json!({"type": "string", "pattern": "^[0-9]{1,18}$", "examples": ["0"]})
}

/// One event of the stream as the document describes it (schemathesis and OpenAPI 3.1 read a
/// `text/event-stream` schema as the schema of each event): a `transition` with its id, whose
/// `data` is a `TransitionEvent` in JSON.
pub(crate) fn event_schema() -> Value {
    json!({
        "type": "object",
        "required": ["event", "data", "id"],
        "properties": {
            "event": {"type": "string", "const": "transition"},
            "id": {"type": "string", "pattern": "^[0-9]+$"},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": {"$ref": "#/components/schemas/TransitionEvent"},
            },
            "retry": {"type": "integer"},
        },
    })
}
