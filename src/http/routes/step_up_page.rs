//! The page the step-up link opens (`stepup.link`, by default this gateway's `/step-up`): the
//! person sees which request waits for them and hands in the step-up token their identity
//! provider issued (an identity provider that redirects back can post the same form). The link's
//! nonce must be the one sent with that request; the token is the proof, checked by
//! `complete_step_up` exactly as `POST /v1/commands/{id}/step-up` checks it.

use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Form, Router};
use minijinja::{Environment, context};
use serde::Deserialize;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::ShortRef;
use crate::domain::lifecycle::State as CommandState;
use crate::http::AppState;
use crate::http::responses::{PROBLEM_JSON, ProblemDocument};
use crate::service::database::StoreError;
use crate::service::reads::StoredCommand;
use crate::service::security::StepUpFailure;
use crate::service::security::complete_step_up;

const PAGE: &str = include_str!("../../../templates/console/step_up.html");

pub fn router() -> Router<AppState> {
    Router::new().route("/step-up", get(show).post(submit)).route("/step-up/style.css", get(stylesheet))
}

/// The page's stylesheet: a file of its own, as its Content-Security-Policy allows no inline style.
async fn stylesheet() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], include_str!("../../../templates/console/step_up.css"))
}

#[derive(Debug, Deserialize)]
pub(crate) struct Link {
    command: String,
    nonce: String,
}

/// The step-up page's form.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub(crate) struct Proof {
    /// The command id, from the link.
    command: String,
    /// The nonce, from the link.
    nonce: String,
    /// The step-up JWT.
    token: String,
}

/// `GET /step-up?command=…&nonce=…`: the request waiting for the person, and the form.
#[utoipa::path(get, path = "/step-up", tag = "security",
    params(("command" = String, Query, description = "The command id from the link"),
        ("nonce" = String, Query, description = "The nonce from the link")),
    responses((status = 200, description = "The page: which request waits, and the form for the step-up token",
            content_type = "text/html", body = String),
    (status = 400, description = "The link lacks its command or nonce", content_type = PROBLEM_JSON,
        body = ProblemDocument),
    (status = 404, description = "No request waits for this link (a page for a browser that asks for HTML)",
        content((ProblemDocument = "application/problem+json"), (String = "text/html"))),
    (status = 503, description = "Storage unavailable; try again",
        content((ProblemDocument = "application/problem+json"), (String = "text/html")))))]
pub(crate) async fn show(State(state): State<AppState>, Query(link): Query<Link>) -> Response {
    match waiting(&state, &link.command, &link.nonce).await {
        Ok(Some(command)) => {
            let spec = state.policy.known_spec_of(&command);
            let name = spec.as_ref().map_or("request", |spec| spec.name.as_str());
            let id = command.envelope.command_id;
            let vars = context! {
                form => true, command => name, command_id => id.to_string(), nonce => link.nonce,
                ref => ShortRef::of(id).to_string(), action => "step-up",
            };
            page(StatusCode::OK, "Prove it's you", "This request waits for you to prove who you are.", vars)
        }
        Ok(None) => not_waiting(),
        Err(error) => unavailable(&error),
    }
}

/// `POST /step-up` (a form: `command`, `nonce`, `token`).
#[utoipa::path(post, path = "/step-up", tag = "security",
    request_body(content = inline(Proof), content_type = "application/x-www-form-urlencoded"),
    responses((status = 200, description = "Accepted: the request goes on", content_type = "text/html", body = String),
    (status = 401, description = "The token is not a proof for this person and request",
        content((ProblemDocument = "application/problem+json"), (String = "text/html"))),
    (status = 403, description = "Proved, but the person may no longer run the request",
        content((ProblemDocument = "application/problem+json"), (String = "text/html"))),
    (status = 404, description = "No request waits for this link",
        content((ProblemDocument = "application/problem+json"), (String = "text/html"))),
    (status = 409, description = "The token was used before",
        content((ProblemDocument = "application/problem+json"), (String = "text/html"))),
    (status = 415, description = "Not a form", content_type = PROBLEM_JSON, body = ProblemDocument),
    (status = 422, description = "The form lacks a field", content_type = PROBLEM_JSON, body = ProblemDocument),
    (status = 503, description = "Storage unavailable; try again",
        content((ProblemDocument = "application/problem+json"), (String = "text/html")))))]
pub(crate) async fn submit(State(state): State<AppState>, Form(proof): Form<Proof>) -> Response {
    let command = match waiting(&state, &proof.command, &proof.nonce).await {
        Ok(Some(command)) => command,
        Ok(None) => return not_waiting(),
        Err(error) => return unavailable(&error),
    };
    let e = &command.envelope;
    let now = OffsetDateTime::now_utc();
    let token = proof.token.trim();
    match complete_step_up(&state.engine, &state.policy, &e.tenant_id, e.command_id, token, now).await {
        Ok(CommandState::Rejected) => page(
            StatusCode::FORBIDDEN,
            "Not allowed",
            "You proved who you are, but you may no longer run this request; the chat says why.",
            context! {},
        ),
        Ok(_) => {
            page(StatusCode::OK, "Thank you", "Done: the request goes on. You can return to the chat.", context! {})
        }
        Err(StepUpFailure::Proof(error)) => page(
            StatusCode::UNAUTHORIZED,
            "Not accepted",
            &format!(
                "This token does not prove it is you for this request ({error}). Sign in again and use the new token."
            ),
            context! {},
        ),
        Err(StepUpFailure::Used) => page(
            StatusCode::CONFLICT,
            "Already used",
            "This token was used before; each token works once.",
            context! {},
        ),
        Err(StepUpFailure::NotFound | StepUpFailure::NotAwaiting(_)) => not_waiting(),
        Err(StepUpFailure::Engine(error)) => {
            tracing::warn!(%error, "a step-up from the page could not be recorded");
            page(
                StatusCode::SERVICE_UNAVAILABLE,
                "Try again",
                "Something on our side failed; try again in a moment.",
                context! {},
            )
        }
    }
}

/// The command `command_id` names when it waits for a step-up and `nonce` is the one its link
/// was sent with.
async fn waiting(state: &AppState, command_id: &str, nonce: &str) -> Result<Option<StoredCommand>, StoreError> {
    let Ok(id) = command_id.parse::<Uuid>() else { return Ok(None) };
    crate::service::confirmations::step_up::waiting_for(state.engine.reads(), id, nonce).await
}

fn not_waiting() -> Response {
    page(
        StatusCode::NOT_FOUND,
        "Nothing to prove",
        "This link is not for a request that waits for you (it was done, it expired, or the link is wrong).",
        context! {},
    )
}

fn unavailable(error: &StoreError) -> Response {
    tracing::warn!(%error, "the step-up page cannot read the store");
    page(
        StatusCode::SERVICE_UNAVAILABLE,
        "Try again",
        "Something on our side failed; try again in a moment.",
        context! {},
    )
}

fn page(status: StatusCode, title: &str, message: &str, vars: minijinja::Value) -> Response {
    let mut env = Environment::new();
    let rendered = env
        .add_template("step_up.html", PAGE)
        .and_then(|()| env.get_template("step_up.html"))
        .and_then(|t| t.render(context! { title, message, ..vars }));
    match rendered {
        Ok(html) => (status, Html(html)).into_response(),
        Err(error) => {
            tracing::error!(%error, "the step-up page does not render");
            (StatusCode::INTERNAL_SERVER_ERROR, "the step-up page does not render").into_response()
        }
    }
}
