//! Rendering the console: the templates of `templates/console/`, compiled into the binary and
//! loaded once, and the one error type of its pages, which becomes a page (or, before sign-in, a
//! redirect to it) with the status the API would have answered.

use std::sync::OnceLock;
use std::time::Duration;

use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use minijinja::{Environment, Value, context};

use crate::http::ApiError;
use crate::service::database::StoreError;

/// Every console template, by name.
const TEMPLATES: &[(&str, &str)] = &[
    ("base.html", include_str!("../../../templates/console/base.html")),
    ("sign_in.html", include_str!("../../../templates/console/sign_in.html")),
    ("overview.html", include_str!("../../../templates/console/overview.html")),
    ("commands.html", include_str!("../../../templates/console/commands.html")),
    ("row.html", include_str!("../../../templates/console/row.html")),
    ("command.html", include_str!("../../../templates/console/command.html")),
    ("prove.html", include_str!("../../../templates/console/prove.html")),
    ("attention.html", include_str!("../../../templates/console/attention.html")),
    ("bulk_done.html", include_str!("../../../templates/console/bulk_done.html")),
    ("agents.html", include_str!("../../../templates/console/agents.html")),
    ("approvals.html", include_str!("../../../templates/console/approvals.html")),
    ("locks.html", include_str!("../../../templates/console/locks.html")),
    ("audit.html", include_str!("../../../templates/console/audit.html")),
    ("message.html", include_str!("../../../templates/console/message.html")),
    ("directory.html", include_str!("../../../templates/console/directory.html")),
    ("person.html", include_str!("../../../templates/console/person.html")),
];

fn environment() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::Html);
        for (name, source) in TEMPLATES {
            if let Err(error) = env.add_template(name, source) {
                tracing::error!(%error, name, "a console template does not compile");
            }
        }
        env
    })
}

/// The template `name` rendered with `vars`, as a page with `status`.
pub fn render(status: StatusCode, name: &str, vars: Value) -> Response {
    match environment().get_template(name).and_then(|t| t.render(vars)) {
        Ok(html) => (status, [(header::CACHE_CONTROL, "no-store")], Html(html)).into_response(),
        Err(error) => {
            tracing::error!(%error, name, "a console page does not render");
            (StatusCode::INTERNAL_SERVER_ERROR, "this console page does not render").into_response()
        }
    }
}

/// A page that only says something (a refusal, a failure), with the status it stands for.
pub fn message(status: StatusCode, title: &str, text: &str, session: Value) -> Response {
    render(status, "message.html", context! { title, text, session })
}

/// Why a console page is not shown.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    #[error("not signed in")]
    SignIn,
    #[error("the token lacks the scope {0}")]
    Scope(&'static str),
    #[error("the form's token is not this session's")]
    Csrf,
    #[error("{0}")]
    BadForm(String),
    #[error("not found")]
    NotFound,
    #[error("too many requests")]
    TooMany(Duration),
    #[error(transparent)]
    Api(#[from] ApiError),
}

impl From<StoreError> for PageError {
    fn from(error: StoreError) -> Self {
        Self::Api(error.into())
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let none = Value::UNDEFINED;
        match self {
            Self::SignIn => Redirect::to("/console/sign-in").into_response(),
            Self::Scope(scope) => message(
                StatusCode::FORBIDDEN,
                "Not allowed",
                &format!("Your token does not carry the scope `{scope}` this needs."),
                none,
            ),
            Self::Csrf => message(
                StatusCode::FORBIDDEN,
                "Refused",
                "This form did not come from your console session (its form token is wrong or missing). \
                 Nothing was changed. Reload the page and try again.",
                none,
            ),
            Self::BadForm(detail) => message(StatusCode::BAD_REQUEST, "Bad form", &detail, none),
            Self::NotFound => message(StatusCode::NOT_FOUND, "Not found", "Nothing here in your tenant.", none),
            Self::TooMany(wait) => {
                let mut page = message(StatusCode::TOO_MANY_REQUESTS, "Slow down", "Too many requests.", none);
                let secs = wait.as_secs().max(1).to_string();
                if let Ok(value) = secs.parse() {
                    page.headers_mut().insert(header::RETRY_AFTER, value);
                }
                page
            }
            Self::Api(error) => {
                let problem = error.problem();
                let status = StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let text = problem.detail.clone().unwrap_or_else(|| problem.title.clone());
                message(status, &problem.title, &text, none)
            }
        }
    }
}
