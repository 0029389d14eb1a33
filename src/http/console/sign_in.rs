//! Signing in with the API's own bearer token, and signing out (the session ends server-side).

use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::context;
use serde::Deserialize;
use time::OffsetDateTime;

use super::page::{PageError, render};
use super::session::{Changing, cleared_cookie, cookie_value, over_https, session_cookie, session_of};
use crate::http::AppState;
use crate::service::security::sessions::{SignInError, sign_in, sign_out as end_session};

#[derive(Deserialize)]
pub(super) struct Token {
    token: String,
}

#[derive(Deserialize)]
pub(super) struct Nothing {}

fn sign_in_page(state: &AppState, status: StatusCode, error: Option<&str>) -> Response {
    let vars = context! { title => "Sign in", error, session_minutes => state.config.console.session_minutes };
    render(status, "sign_in.html", vars)
}

/// `GET /console/sign-in`; an operator already signed in goes on to the console.
pub(super) async fn form(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, PageError> {
    if let Some(value) = cookie_value(&headers)
        && session_of(&state.store, &value).await?.is_some()
    {
        return Ok(Redirect::to("/console").into_response());
    }
    Ok(sign_in_page(&state, StatusCode::OK, None))
}

/// `POST /console/sign-in`: the token is checked exactly as the API checks it.
pub(super) async fn submit(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(Token { token }): Form<Token>,
) -> Result<Response, PageError> {
    let now = OffsetDateTime::now_utc();
    let ttl = time::Duration::minutes(i64::try_from(state.config.console.session_minutes).unwrap_or(480));
    match sign_in(&state.store, &state.policy.security.authenticator, &token, ttl, now).await {
        Ok(opened) => {
            let cookie = session_cookie(&opened.cookie_value, opened.expires_at, now, over_https(&state, &headers));
            Ok(([(header::SET_COOKIE, cookie)], Redirect::to("/console/commands")).into_response())
        }
        Err(SignInError::Token(error)) => {
            let text = format!("This token does not sign you in: {error}.");
            Ok(sign_in_page(&state, StatusCode::UNAUTHORIZED, Some(&text)))
        }
        Err(SignInError::Store(error)) => Err(error.into()),
    }
}

/// `POST /console/sign-out`: the session row goes, so the cookie opens nothing wherever it is.
pub(super) async fn sign_out(
    State(state): State<AppState>,
    headers: HeaderMap,
    _change: Changing<Nothing>,
) -> Result<Response, PageError> {
    if let Some(value) = cookie_value(&headers) {
        end_session(&state.store, &value).await?;
    }
    let cookie = cleared_cookie(over_https(&state, &headers));
    Ok(([(header::SET_COOKIE, cookie)], Redirect::to("/console/sign-in")).into_response())
}
