//! The hook bridge's routes (`/hooks/wake`, `/hooks/agent`, `/hooks/{name}` under
//! `hooks.base_path`). One answer body serves both families of callers (docs/REFERENCE.md, "The
//! hook bridge's answers"): OpenClaw's `ok` and `runId`, hookd's `status`, `queued`, `command_id`,
//! `routing_key` and `outbox_id`, chatgate's `status_url` and `Location`. The status is 202 for an
//! agent run or a mapped hook taken (Bloodbank's hookd bridge, MIG-1 step 4, and OpenClaw's hooks at
//! 013c24e7 `docs/automation/webhook.md` answer so; `hooks.accepted_status = 200` answers as newest
//! OpenClaw does), 200 for a wake and for a run waited for until it ended (`waitForCompletion`), 204
//! for a hookd text with nothing in it. Refusals are problem documents that also carry OpenClaw's
//! `{"ok": false, "error": ...}`, for callers that read `error`.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::channels::hooks::{self, Accepted, CompletionStatus, HookOutcome, HookRequest};
use crate::config::AcceptedStatus;
use crate::http::listen::PeerAddr;
use crate::http::responses::HookErrors;
use crate::http::{ApiError, AppState};

/// The bridge's routes under `base` (`hooks.base_path`, `/hooks` by default; the configuration
/// check keeps it clear of every other route).
pub fn router(base: &str) -> Router<AppState> {
    let base = base.trim_end_matches('/');
    Router::new()
        .route(&format!("{base}/wake"), post(wake))
        .route(&format!("{base}/agent"), post(agent))
        .route(&format!("{base}/{{name}}"), post(mapped))
        .route_layer(axum::middleware::from_fn(openclaw_refusals))
}

/// Every refusal of the bridge's routes also says `ok: false` and, in `error`, why (the problem's
/// detail, else its title), as OpenClaw's hook callers read it (`{ ok: false, error }`,
/// `docs/gateway/config-hooks.md` at 256572f, "Hook HTTP contract"); the problem document's own
/// members stay as they are.
async fn openclaw_refusals(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let (mut parts, mut document) = crate::http::problem::problem_members(response).await;
    let error = document.get("detail").or_else(|| document.get("title")).cloned().unwrap_or_default();
    document.insert("ok".into(), false.into());
    document.insert("error".into(), error);
    parts.headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static(crate::http::responses::PROBLEM_JSON));
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(serde_json::to_vec(&document).unwrap_or_default()))
}

/// What the bridge answers a call it took.
#[derive(Debug, Serialize, ToSchema)]
pub struct HookAnswer {
    /// OpenClaw's success flag: always `true` here (a refusal is a problem document).
    pub ok: bool,
    /// OpenClaw's run id: the command's id.
    #[serde(rename = "runId")]
    pub run_id: Uuid,
    /// A wake's mode (`now` or `next-heartbeat`); absent for other calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// A wake's outcome: `queued`, or `coalesced` into the same wake still waiting.
    #[serde(rename = "eventOutcome", skip_serializing_if = "Option::is_none")]
    #[schema(example = "queued")]
    pub event_outcome: Option<String>,
    /// With `waitForCompletion`: how the command ended (`ok`, `error`), or `pending` when it had
    /// not ended within the wait, and its state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion: Option<HookCompletion>,
    /// hookd's `accepted`.
    #[schema(example = "accepted")]
    pub status: String,
    /// hookd's `queued`: the command and its dispatch are stored.
    pub queued: bool,
    pub command_id: Uuid,
    /// `command.{agent}.{action}`.
    #[schema(example = "command.orders.hook_dispatch")]
    pub routing_key: String,
    /// The command's dispatch row (a UUID here, where hookd's own bridge counts rows).
    pub outbox_id: Option<Uuid>,
    /// Where to follow the command (`GET`, with an operator token); also the `Location` header.
    pub status_url: String,
}

/// What a caller that waited is told of its command.
#[derive(Debug, Serialize, ToSchema)]
pub struct HookCompletion {
    #[schema(example = "ok")]
    pub status: String,
    #[schema(example = "executed")]
    pub state: String,
}

impl HookAnswer {
    fn new(accepted: Accepted) -> Self {
        Self {
            ok: true,
            run_id: accepted.command_id,
            mode: None,
            event_outcome: None,
            completion: None,
            status: "accepted".into(),
            queued: true,
            command_id: accepted.command_id,
            routing_key: accepted.routing_key,
            outbox_id: accepted.outbox_id,
            status_url: status_url(accepted.command_id),
        }
    }
}

fn status_url(command_id: Uuid) -> String {
    format!("/v1/commands/{command_id}")
}

/// The answer to a call the bridge took: a wake and a run that ended while the caller waited are
/// done (200); a run or mapped hook only taken is accepted (`hooks.accepted_status`, 202 unless
/// set to 200).
fn answer(outcome: HookOutcome, taken: AcceptedStatus) -> Response {
    let taken = StatusCode::from_u16(u16::from(taken)).unwrap_or(StatusCode::ACCEPTED);
    let (status, body) = match outcome {
        HookOutcome::NothingToDo => return StatusCode::NO_CONTENT.into_response(),
        HookOutcome::Woken { accepted, mode, event } => (
            StatusCode::OK,
            HookAnswer {
                mode: Some(mode),
                event_outcome: Some(event.as_str().to_owned()),
                ..HookAnswer::new(accepted)
            },
        ),
        HookOutcome::Queued(accepted) => (taken, HookAnswer::new(accepted)),
        HookOutcome::Completed { accepted, completion } => {
            let ended = completion.status != CompletionStatus::Pending;
            let completion = HookCompletion {
                status: completion.status.as_str().to_owned(),
                state: completion.state.as_str().to_owned(),
            };
            (
                if ended { StatusCode::OK } else { taken },
                HookAnswer { completion: Some(completion), ..HookAnswer::new(accepted) },
            )
        }
    };
    (status, [(header::LOCATION, body.status_url.clone())], Json(body)).into_response()
}

/// What a command submitted by a machine caller is answered: 202, the id and where to follow it.
#[derive(Debug, Serialize, ToSchema)]
pub struct CommandAccepted {
    pub command_id: Uuid,
    pub status_url: String,
}

/// 202 with the command's id and where to follow it (`Location` too).
pub(crate) fn accepted(command_id: Uuid) -> Response {
    let body = CommandAccepted { command_id, status_url: status_url(command_id) };
    (StatusCode::ACCEPTED, [(header::LOCATION, body.status_url.clone())], Json(body)).into_response()
}

/// `POST /hooks/wake`: `{"text": "...", "mode": "now" | "next-heartbeat"}`.
#[utoipa::path(post, path = "/hooks/wake", tag = "hooks", security(("hooks_token" = []), ("hooks_header" = [])),
    params(HookHeaders), request_body(content = serde_json::Value, content_type = "application/json"),
    responses((status = 200, description = "Woken: the command is stored and queued for the default agent",
            body = HookAnswer, headers(("Location" = String, description = "The command's status"))), HookErrors))]
pub(crate) async fn wake(State(state): State<AppState>, call: HookPost) -> Result<Response, ApiError> {
    Ok(answer(hooks::wake(&state.ingress, &state.config, &call.request()).await?, state.config.hooks.accepted_status))
}

/// `POST /hooks/agent`: OpenClaw's `{"message": "..."}` or hookd's `{"text": "...", "sessionKey":
/// "agent:<name>:main"}`, with the optional OpenClaw fields, each checked.
#[utoipa::path(
    post,
    path = "/hooks/agent",
    tag = "hooks",
    security(("hooks_token" = []), ("hooks_header" = [])),
    params(HookHeaders),
    request_body(content = serde_json::Value, content_type = "application/json"),
    responses(
        (status = 202, description = "Admitted: the command is stored and queued for the agent (200 instead \
            with `hooks.accepted_status = 200`); with `waitForCompletion`, answered once the wait is over and \
            the command had not ended",
            body = HookAnswer, headers(("Location" = String, description = "The command's status"))),
        (status = 200, description = "With `waitForCompletion`: the command ended within the wait (`completion`)",
            body = HookAnswer, headers(("Location" = String, description = "The command's status"))),
        (status = 204, description = "A hookd `text` with nothing in it: nothing stored"),
        HookErrors
    )
)]
pub(crate) async fn agent(State(state): State<AppState>, call: HookPost) -> Result<Response, ApiError> {
    Ok(answer(hooks::agent(&state.ingress, &state.config, &call.request()).await?, state.config.hooks.accepted_status))
}

/// `POST /hooks/{name}`: a mapped hook; its fields become the command's arguments.
#[utoipa::path(
    post,
    path = "/hooks/{name}",
    tag = "hooks",
    security(("hooks_token" = []), ("hooks_header" = [])),
    params(("name" = String, Path), HookHeaders),
    request_body(content = serde_json::Value, content_type = "application/json"),
    responses(
        (status = 202, description = "Admitted: the command is stored and queued for the mapping's agent \
            (200 instead with `hooks.accepted_status = 200`)",
            body = HookAnswer, headers(("Location" = String, description = "The command's status"))),
        HookErrors
    )
)]
pub(crate) async fn mapped(
    State(state): State<AppState>,
    Path(name): Path<String>,
    call: HookPost,
) -> Result<Response, ApiError> {
    let outcome = hooks::mapped(&state.ingress, &state.config, &name, &call.request()).await?;
    Ok(answer(outcome, state.config.hooks.accepted_status))
}

/// The headers a hook call may carry, as the document lists them (the channel reads them).
#[derive(utoipa::IntoParams)]
#[into_params(
    names("Idempotency-Key", "X-OpenClaw-Idempotency-Key", "X-Correlation-Id", "x-openclaw-token"),
    parameter_in = Header
)]
#[allow(dead_code)] // Read by the document only: the channel takes the headers by name.
pub(crate) struct HookHeaders(Option<String>, Option<String>, Option<String>, Option<String>);

/// A call to the bridge as its routes take it: the query, the headers, the body and the caller's
/// address (by which failed authentications are counted).
pub(crate) struct HookPost {
    query: Option<String>,
    headers: HeaderMap,
    body: Bytes,
    client: String,
}

impl HookPost {
    fn request(&self) -> HookRequest<'_> {
        HookRequest { query: self.query.as_deref(), headers: &self.headers, body: &self.body, client: &self.client }
    }
}

impl<S: Send + Sync> FromRequest<S> for HookPost {
    type Rejection = BytesRejection;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let query = request.uri().query().map(str::to_owned);
        let headers = request.headers().clone();
        let peer = request.extensions().get::<PeerAddr>();
        let client = peer.map_or_else(|| "unknown".to_owned(), |PeerAddr(addr)| addr.ip().to_string());
        let body = Bytes::from_request(request, state).await?;
        Ok(Self { query, headers, body, client })
    }
}
