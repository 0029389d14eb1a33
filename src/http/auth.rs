//! API authentication and scopes as tower layers: a route says which scope it needs with
//! `.route_layer(require("commands:read"))`, and its handler receives the caller as a
//! [`Principal`] extension, or both with the state as a [`Caller`]. Nothing inside a handler
//! decides who may call it.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{FromFnLayer, Next};
use axum::response::{IntoResponse, Response};
use cookie::Cookie;

use crate::http::{ApiError, AppState, Problem};
use crate::service::security::{Security, TokenError};

pub use crate::service::security::Principal;

/// What the scope layer's function returns.
type Admitted = std::pin::Pin<Box<dyn Future<Output = Response> + Send>>;

/// The layer that admits a request only with a valid token carrying `scope`, within the
/// caller's rate limit.
pub fn require(scope: &'static str) -> FromFnLayer<impl Fn(Request, Next) -> Admitted + Clone, (), (Request,)> {
    axum::middleware::from_fn(move |request: Request, next: Next| Box::pin(admit(scope, request, next)) as Admitted)
}

async fn admit(scope: &'static str, mut request: Request, next: Next) -> Response {
    let Some(security) = request.extensions().get::<Arc<Security>>().cloned() else {
        tracing::error!("the security extension is missing; refusing");
        return Problem::for_status(StatusCode::INTERNAL_SERVER_ERROR).into_response();
    };
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(|t| t.trim().to_owned());
    let principal = match bearer {
        Some(token) => match security.authenticator.authenticate(&token) {
            Ok(principal) => principal,
            Err(error) => return unauthorized(Some(&error), &error.to_string()),
        },
        // A console session reads (the console's live updates come from `/v1/events`); it never
        // changes anything through the API: changes go through the console's CSRF-checked forms.
        None => match console_reader(request.method(), request.headers(), request.extensions().get()).await {
            Some(principal) => principal,
            None => return unauthorized(None, "A bearer token is required."),
        },
    };
    if let Err(wait) = security.limits.api_client(&format!("{}|{}", principal.issuer, principal.subject)) {
        return too_many(wait, "Too many requests from this client.");
    }
    if !principal.scopes.contains(scope) {
        let challenge = format!("Bearer realm=\"chatgate\", error=\"insufficient_scope\", scope=\"{scope}\"");
        return Problem::new(StatusCode::FORBIDDEN, "insufficient_scope", "Forbidden")
            .detail(format!("This operation needs the scope `{scope}`."))
            .with("required_scope", scope)
            .challenge(challenge)
            .into_response();
    }
    request.extensions_mut().insert(principal);
    next.run(request).await
}

/// A handler's caller, admitted by [`require`]: the gateway's state and the principal the token
/// (or console session) names. Behind no [`require`] it is a 500: a route wired without its scope.
pub(crate) struct Caller {
    pub state: AppState,
    pub principal: Principal,
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Some(principal) = parts.extensions.get::<Principal>().cloned() else {
            tracing::error!(path = parts.uri.path(), "a route reads its caller without the scope layer; refusing");
            return Err(Problem::for_status(StatusCode::INTERNAL_SERVER_ERROR).into());
        };
        Ok(Caller { state: state.clone(), principal })
    }
}

/// The console's session cookie's name: a console session is the other way a caller proves who
/// they are.
pub const COOKIE: &str = "chatgate_session";

/// The session cookie a request carries, if any.
pub fn cookie_value(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == COOKIE)
        .map(|c| c.value().to_owned())
}

/// The principal of the console session a safe (GET) request carries, if it is open.
async fn console_reader(
    method: &axum::http::Method,
    headers: &axum::http::HeaderMap,
    database: Option<&crate::service::database::Database>,
) -> Option<Principal> {
    if method != axum::http::Method::GET {
        return None;
    }
    let value = cookie_value(headers)?;
    let database = database?;
    match crate::service::security::sessions::signed_in(database, &value, time::OffsetDateTime::now_utc()).await {
        Ok(session) => session.map(|s| s.principal),
        Err(error) => {
            tracing::warn!(%error, "cannot read console sessions");
            None
        }
    }
}

fn unauthorized(error: Option<&TokenError>, detail: &str) -> Response {
    let challenge = match error {
        None => "Bearer realm=\"chatgate\"".to_owned(),
        Some(e) => format!("Bearer realm=\"chatgate\", error=\"invalid_token\", error_description=\"{e}\""),
    };
    Problem::new(StatusCode::UNAUTHORIZED, "unauthorized", "Unauthorized")
        .detail(detail)
        .challenge(challenge)
        .into_response()
}

/// The 429 problem with `Retry-After` (whole seconds, rounded up).
pub fn too_many(wait: Duration, detail: &str) -> Response {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    Problem::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", "Too Many Requests")
        .detail(detail)
        .retry_after(secs.max(1))
        .into_response()
}
