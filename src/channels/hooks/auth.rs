//! Who may call the hook bridge: the hook token, from `Authorization: Bearer` or
//! `x-openclaw-token`, compared in constant time; a token in the query string is refused (it ends
//! up in logs and proxies). As OpenClaw's hook endpoint (openclaw/openclaw
//! `docs/gateway/config-hooks.md` at 256572f, "Hook HTTP contract"): after 20 failed attempts
//! from one client address within 60 seconds, further failures are throttled with 429 and
//! `Retry-After`, and a valid token clears the count.

use axum::http::{HeaderMap, StatusCode, header};
use subtle::ConstantTimeEq;

use crate::channels::hooks::bad;
use crate::channels::{ChannelError, Refusal};
use crate::config::Config;
use crate::service::intake::Ingress;

/// The caller's token checked; `client` is its address (the failures are counted by it).
pub(super) fn authenticate(
    ingress: &Ingress,
    config: &Config,
    headers: &HeaderMap,
    query: Option<&str>,
    client: &str,
) -> Result<(), ChannelError> {
    let expected = config.hooks.token.expose();
    if expected.is_empty() {
        return Err(Refusal::not_configured("The hook bridge is not configured.").into());
    }
    if query.is_some_and(|q| q.split('&').any(|p| p.split('=').next().is_some_and(|k| k.eq_ignore_ascii_case("token"))))
    {
        return Err(bad(
            "token_in_query",
            "The hook token goes in a header (Authorization or x-openclaw-token), never in the URL.",
        ));
    }
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let given = bearer.or_else(|| headers.get("x-openclaw-token").and_then(|v| v.to_str().ok()).map(str::trim));
    let failures = &ingress.policy().security.hook_auth_failures;
    if given.is_some_and(|g| bool::from(g.as_bytes().ct_eq(expected.as_bytes()))) {
        failures.succeeded(client);
        return Ok(());
    }
    if let Err(wait) = failures.failed(client, std::time::Instant::now()) {
        return Err(Refusal::new(StatusCode::TOO_MANY_REQUESTS, "too_many_failed_attempts", "Too Many Requests")
            .detail("Too many failed hook authentications from this address; try again later.")
            .retry_after(wait.as_secs().max(1))
            .into());
    }
    Err(Refusal::new(StatusCode::UNAUTHORIZED, "unauthorized", "Unauthorized")
        .detail("A valid hook token is required.")
        .challenge("Bearer realm=\"chatgate-hooks\"")
        .into())
}
