//! `POST /v1/recovery/bulk`: retry or cancel, in one request, the commands that need attention
//! (failed, timed out, stuck — the chat's `failures`), narrowed by a filter, up to a limit. Each
//! command is recovered exactly as `POST /v1/commands/{id}/recovery` would (its own recovery
//! command and evidence); the answer sums up what was done and what was refused. The request
//! must carry an `Idempotency-Key`: sent again, it acts on nothing twice.

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use serde::Deserialize;
use time::OffsetDateTime;

use super::commands::{given, invalid_body};
use crate::domain::lifecycle::State as CommandState;
use crate::domain::lifecycle::recovery::RecoveryAction;
use crate::http::auth::{Caller, Principal, require};
use crate::http::body::read_json;
use crate::http::idempotency::{key_of, once};
use crate::http::responses::{BearerErrors, KeyReused, PROBLEM_JSON, ProblemDocument};
use crate::http::{ApiError, AppState};
use crate::service::recovery::bulk::{BulkFilter, BulkRequest, BulkSummary, MAX_BULK, recover_many};
use crate::service::recovery::{Operator, StepUp};

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/recovery/bulk", post(bulk).route_layer(require(super::recovery::WRITE)))
}

/// Which commands needing attention to act on; every field narrows, none is required.
#[derive(Debug, Default, Deserialize, serde::Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkSelection {
    /// The state the commands are in (those needing attention are `failed`, `started` or
    /// `authorized`).
    #[schema(value_type = Option<CommandState>, inline)]
    pub state: Option<String>,
    /// A command of the registry, by name (`refund`).
    pub command: Option<String>,
    pub actor: Option<String>,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub since: Option<String>,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub until: Option<String>,
}

crate::domain::names::named_enum! {
    /// What a bulk recovery does to each command (the other actions are one command at a time).
    BulkAction {
        Retry => "retry",
        Cancel => "cancel",
    }
}

/// A bulk recovery request.
#[derive(Debug, Deserialize, serde::Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkBody {
    #[schema(value_type = BulkAction, inline)]
    pub action: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    #[schema(inline)]
    pub filter: BulkSelection,
    /// At most this many commands (50 when left out). A JSON number: `50` and `50.0` are the
    /// same integer.
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 200)]
    pub limit: Option<serde_json::Number>,
}

// The schema's `maximum` above is this limit.
const _: () = assert!(MAX_BULK == 200);

#[utoipa::path(post, path = "/v1/recovery/bulk", tag = "recovery", security(("bearer" = ["recovery:write"])),
    params(("Idempotency-Key" = String, Header, description = "Required: the same request again does nothing twice")),
    request_body(content = inline(BulkBody), content_type = "application/json"),
    responses((status = 200, description = "What was done and what was refused", body = BulkSummary),
    (status = 400, description = "A bad body, or no Idempotency-Key", content_type = PROBLEM_JSON,
        body = ProblemDocument),
    (status = 409, description = "A request with this key is running", content_type = PROBLEM_JSON,
        body = ProblemDocument), KeyReused, BearerErrors))]
pub(crate) async fn bulk(
    Caller { state, principal }: Caller,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let Some(key) = key_of(&headers)? else {
        return Err(invalid_body("A bulk recovery needs an `Idempotency-Key` header."));
    };
    let request = BulkBody::read(&state, &body)?;
    let run = run_bulk(&state, &principal, &request);
    let fingerprint = crate::http::idempotency::body_fingerprint(&body);
    once(&state.database, principal.tenant.as_str(), Some(&key), &fingerprint, run).await?.into_response()
}

impl BulkBody {
    /// The bulk recovery a body asks for, checked; a bad one is refused before anything is stored.
    pub(crate) fn read(state: &AppState, body: &[u8]) -> Result<(BulkRequest, String), ApiError> {
        let body: BulkBody = read_json(body)?;
        body.checked(state)
    }

    /// A body already read (the console's form), checked as the API checks it.
    pub(crate) fn checked(self, state: &AppState) -> Result<(BulkRequest, String), ApiError> {
        Ok((bulk_request(state, &self)?, self.reason))
    }
}

/// A bulk recovery (and why) run for `principal`: the API's and the console's.
pub(crate) async fn run_bulk(
    state: &AppState,
    principal: &Principal,
    (request, reason): &(BulkRequest, String),
) -> Result<(StatusCode, BulkSummary), ApiError> {
    let operator_id = format!("{}|{}", principal.issuer, principal.subject);
    let operator = Operator {
        tenant: &principal.tenant,
        id: &operator_id,
        subject: &principal.subject,
        reason,
        step_up: StepUp::None,
    };
    let now = OffsetDateTime::now_utc();
    let summary = recover_many(&state.ingress, &state.engine, &state.policy, &operator, request, now).await?;
    Ok((StatusCode::OK, summary))
}

fn bulk_request(state: &AppState, body: &BulkBody) -> Result<BulkRequest, ApiError> {
    let action = match body.action.parse() {
        Ok(BulkAction::Retry) => RecoveryAction::Retry,
        Ok(BulkAction::Cancel) => RecoveryAction::Cancel,
        Err(_) => {
            return Err(invalid_body("`action` is `retry` or `cancel` (other actions are one command at a time)"));
        }
    };
    let limit = match &body.limit {
        None => 50.0,
        Some(n) => n.as_f64().filter(|n| n.fract() == 0.0).unwrap_or(0.0),
    };
    if !(1.0..=MAX_BULK as f64).contains(&limit) {
        return Err(invalid_body("`limit` is an integer between 1 and 200"));
    }
    let f = &body.filter;
    // A time is an RFC 3339 time or left out (null): an empty one is refused, as in the list.
    let time = |raw: &Option<String>, what: &str| {
        raw.as_deref()
            .map(|t| OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339))
            .transpose()
            .map_err(|_| invalid_body(&format!("`filter.{what}` is an RFC 3339 time")))
    };
    // A state is one of the states or left out: an empty one is refused (the schema's enum).
    let state_filter = (f.state.as_deref())
        .map(|s| s.parse().map_err(|_| invalid_body("`filter.state` is a command state (`failed`, ...)")))
        .transpose()?;
    // As in `GET /v1/commands`, a command the registry does not know matches nothing.
    let intent = given(&f.command).map(|name| state.policy.intent_named(&name));
    let filter = BulkFilter {
        state: state_filter,
        intent,
        actor: given(&f.actor),
        since: time(&f.since, "since")?,
        until: time(&f.until, "until")?,
    };
    Ok(BulkRequest { action, filter, limit: limit as usize })
}
