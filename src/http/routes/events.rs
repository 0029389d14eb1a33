//! `GET /v1/events`: the caller's tenant's transitions as Server-Sent Events. Each event's id is
//! the move's id, which only grows, so a client that reconnects with `Last-Event-ID` misses
//! nothing and sees nothing twice.

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use futures_util::Stream;
use serde_json::{Value, json};

use crate::http::ApiError;

use crate::http::AppState;
use crate::http::Problem;
use crate::http::auth::Principal;
use crate::http::auth::require;
use crate::http::responses::{BearerErrors, PROBLEM_JSON, ProblemDocument};
use crate::http::views::TransitionEvent;

const POLL: Duration = Duration::from_millis(250);
const BATCH: i64 = 100;

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/events", get(events).route_layer(require("commands:read")))
}

#[utoipa::path(
    get,
    path = "/v1/events",
    tag = "commands",
    security(("bearer" = ["commands:read"])),
    params(("Last-Event-ID" = Option<String>, Header,
        description = "The id of the last event received (digits): the stream resumes after it")),
    responses(
        (status = 200, description = "Transitions as Server-Sent Events", content_type = "text/event-stream",
            body = String),
        (status = 400, description = "A bad Last-Event-ID", content_type = PROBLEM_JSON, body = ProblemDocument),
        BearerErrors
    )
)]
pub(crate) async fn events(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let resume = headers.get("last-event-id").map(|v| v.to_str().ok().and_then(event_id));
    let after = match resume {
        Some(Some(id)) => id,
        Some(None) => {
            return Err(Problem::new(StatusCode::BAD_REQUEST, "invalid_last_event_id", "Bad Request")
                .detail("Last-Event-ID is the id of an event this stream sent.")
                .into());
        }
        None => state.store.commands().last_move_id().await?,
    };
    let tenant = principal.tenant.clone();
    let store = state.store.clone();
    let stopping = state.stopping.clone();
    // (position, events still to send)
    let stream = futures_util::stream::unfold((after, Vec::<Event>::new()), move |(mut after, mut pending)| {
        let (store, tenant, stopping) = (store.clone(), tenant.clone(), stopping.clone());
        async move {
            loop {
                if let Some(event) = pending.pop() {
                    return Some((Ok(event), (after, pending)));
                }
                if stopping.is_cancelled() {
                    return None;
                }
                match store.commands().moves_after(&tenant, after, BATCH).await {
                    Ok(moves) if !moves.is_empty() => {
                        // Sent oldest first: `pending` is popped from the end.
                        for (id, command_id, record) in moves.into_iter().rev() {
                            after = after.max(id);
                            let data = TransitionEvent { command_id, transition: record.into() };
                            let data = serde_json::to_string(&data).unwrap_or_default();
                            pending.push(Event::default().id(id.to_string()).event("transition").data(data));
                        }
                    }
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%error, "event stream cannot read the database"),
                }
                if pending.is_empty() {
                    tokio::select! {
                        () = stopping.cancelled() => return None,
                        () = tokio::time::sleep(POLL) => {}
                    }
                }
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
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
