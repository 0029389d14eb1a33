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

use crate::domain::command::TenantId;
use crate::http::AppState;
use crate::http::Problem;
use crate::http::auth::Principal;
use crate::http::auth::require;
use crate::http::responses::{BearerErrors, PROBLEM_JSON, ProblemDocument};
use crate::http::views::TransitionEvent;
use crate::service::events::MoveCursor;
use crate::store::Store;

/// How often a stream reads when nothing wakes it (a listener reconnecting may miss a commit).
const FALLBACK_POLL: Duration = Duration::from_secs(10);
/// How often a stream waiting for a gap in the ids reads again.
const GAP_POLL: Duration = Duration::from_millis(250);
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
    let moved = store.moves_feed();
    // (where the stream is, events still to send, what wakes it)
    let start = (MoveCursor::new(after), Vec::<Event>::new(), moved);
    let stream = futures_util::stream::unfold(start, move |(mut cursor, mut pending, mut moved)| {
        let (store, tenant, stopping) = (store.clone(), tenant.clone(), stopping.clone());
        async move {
            loop {
                if let Some(event) = pending.pop() {
                    return Some((Ok(event), (cursor, pending, moved)));
                }
                if stopping.is_cancelled() {
                    return None;
                }
                // Marks what this read covers: a move committed after it wakes the stream again.
                moved.mark_unchanged();
                let waiting = read(&store, &tenant, &mut cursor, &mut pending).await;
                if pending.is_empty() {
                    // Woken by a commit of moves (any instance's on PostgreSQL); a gap is
                    // looked at again soon, and a lost wake-up costs at most the fallback.
                    let wait = if waiting { GAP_POLL } else { FALLBACK_POLL };
                    tokio::select! {
                        () = stopping.cancelled() => return None,
                        _ = moved.changed() => {}
                        () = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// Reads the moves after `cursor` into `pending`, newest first (it is popped from the end);
/// returns whether the stream waits for a gap in the ids.
async fn read(store: &Store, tenant: &TenantId, cursor: &mut MoveCursor, pending: &mut Vec<Event>) -> bool {
    match store.commands().moves_after(tenant, cursor.after(), BATCH).await {
        Ok(moves) => {
            let (ready, waiting) = cursor.take(moves, std::time::Instant::now());
            for (id, (command_id, record)) in ready.into_iter().rev() {
                let data = TransitionEvent { command_id, transition: record.into() };
                let data = serde_json::to_string(&data).unwrap_or_default();
                pending.push(Event::default().id(id.to_string()).event("transition").data(data));
            }
            waiting
        }
        Err(error) => {
            tracing::warn!(%error, "event stream cannot read the database");
            false
        }
    }
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
