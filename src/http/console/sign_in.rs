//! Signing in with the API's own bearer token, and signing out (the session ends server-side).

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use cookie::{Cookie, SameSite};
use minijinja::context;
use serde::Deserialize;
use subtle::ConstantTimeEq;
use time::OffsetDateTime;

use super::page::{PageError, render};
use super::session::{AnyScope, Changing, cleared_cookie, cookie_value, over_https, session_cookie, session_of};
use crate::http::AppState;
use crate::http::auth::too_many;
use crate::http::listen::PeerAddr;
use crate::service::security::ratelimit::Budget;
use crate::service::security::sessions::{self, SignInError, sign_in, sign_out as end_session};

#[derive(Deserialize)]
pub(super) struct Token {
    token: String,
    /// The sign-in form's own token: the same as its cookie, or the sign-in came from elsewhere.
    #[serde(default)]
    sign_in: String,
}

#[derive(Deserialize)]
pub(super) struct Nothing {}

/// The cookie that binds a sign-in to the form this console served (login CSRF): a page on
/// another site can post a token to `/console/sign-in`, but cannot send this SameSite=Strict
/// cookie nor read the form's copy of it, so it cannot sign a victim's browser into the
/// attacker's tenant.
const FORM_COOKIE: &str = "chatgate_sign_in";

fn sign_in_page(state: &AppState, status: StatusCode, error: Option<&str>, secure: bool) -> Response {
    let form_token = sessions::random_token();
    let cookie = Cookie::build((FORM_COOKIE, form_token.clone()))
        .path("/console/sign-in")
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(secure)
        .max_age(cookie::time::Duration::hours(1))
        .build()
        .to_string();
    let minutes = state.config.console.session_minutes;
    let vars = context! { title => "Sign in", error, session_minutes => minutes, sign_in => form_token };
    ([(header::SET_COOKIE, cookie)], render(status, "sign_in.html", vars)).into_response()
}

/// `GET /console/sign-in`; an operator already signed in goes on to the console.
pub(super) async fn form(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, PageError> {
    if let Some(value) = cookie_value(&headers)
        && session_of(&state.database, &value).await?.is_some()
    {
        return Ok(Redirect::to("/console").into_response());
    }
    Ok(sign_in_page(&state, StatusCode::OK, None, over_https(&state, &headers)))
}

/// `POST /console/sign-in`: from this console's own form (its cookie and field agree), within the
/// client address's budget of attempts; the token is checked exactly as the API checks it.
pub(super) async fn submit(
    State(state): State<AppState>,
    peer: Option<Extension<PeerAddr>>,
    headers: HeaderMap,
    Form(Token { token, sign_in: offered }): Form<Token>,
) -> Result<Response, PageError> {
    let now = OffsetDateTime::now_utc();
    let secure = over_https(&state, &headers);
    let client = peer.map_or_else(|| "unknown".to_owned(), |Extension(PeerAddr(addr))| addr.ip().to_string());
    if let Err(wait) = state.policy.security.limits.take(&state.database, Budget::SignIn, &client, now).await? {
        return Ok(too_many(wait, "Too many sign-ins from this address; try again later."));
    }
    if !from_our_form(&headers, &offered) {
        let text = "Sign in from this console's own page (the form was not this console's, or it expired).";
        return Ok(sign_in_page(&state, StatusCode::FORBIDDEN, Some(text), secure));
    }
    let console = &state.config.console;
    let ttl = time::Duration::minutes(i64::try_from(console.session_minutes).unwrap_or(480));
    let authenticator = &state.policy.security.authenticator;
    match sign_in(&state.database, authenticator, &token, (ttl, console.max_sessions_per_operator), now).await {
        Ok(opened) => {
            let cookie = session_cookie(&opened.cookie_value, opened.expires_at, now, secure);
            Ok(([(header::SET_COOKIE, cookie)], Redirect::to("/console/commands")).into_response())
        }
        Err(SignInError::Token(error)) => {
            let text = format!("This token does not sign you in: {error}.");
            Ok(sign_in_page(&state, StatusCode::UNAUTHORIZED, Some(&text), secure))
        }
        Err(SignInError::Store(error)) => Err(error.into()),
    }
}

/// Whether the sign-in form's token is the one its cookie holds (compared in constant time).
fn from_our_form(headers: &HeaderMap, offered: &str) -> bool {
    let cookies = headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).flat_map(Cookie::split_parse);
    let expected = cookies.filter_map(Result::ok).find(|c| c.name() == FORM_COOKIE).map(|c| c.value().to_owned());
    expected.is_some_and(|expected| !offered.is_empty() && bool::from(offered.as_bytes().ct_eq(expected.as_bytes())))
}

/// `POST /console/sign-out`: the session row goes, so the cookie opens nothing wherever it is.
pub(super) async fn sign_out(
    State(state): State<AppState>,
    headers: HeaderMap,
    _change: Changing<AnyScope, Nothing>,
) -> Result<Response, PageError> {
    if let Some(value) = cookie_value(&headers) {
        end_session(&state.database, &value).await?;
        // The event streams the session opened end with it.
        state.streams.session_ended();
    }
    let cookie = cleared_cookie(over_https(&state, &headers));
    Ok(([(header::SET_COOKIE, cookie)], Redirect::to("/console/sign-in")).into_response())
}
