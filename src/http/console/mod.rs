//! `/console`: the operator console, server-rendered from `templates/console/` with plain CSS and
//! a little plain JavaScript (live updates from `/v1/events`). Every page reads and changes
//! through the same functions as the API (`routes::commands::list`, `routes::recovery::
//! run_recovery`, `routes::bulk::run_bulk`, `service::agents`, `service::directory`), under the
//! same scopes and tenant.

mod agents;
mod approvals;
mod commands;
mod directory;
mod insight;
mod locks;
pub mod page;
mod recover;
pub mod session;
mod sign_in;

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use minijinja::Value;
use serde::Serialize;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::ShortRef;
use crate::http::AppState;
use crate::service::ooc::view::CommandStatus;
use session::Signed;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/console", get(insight::overview))
        .route("/console/sign-in", get(sign_in::form).post(sign_in::submit))
        .route("/console/sign-out", post(sign_in::sign_out))
        .route("/console/commands", get(commands::list))
        .route("/console/commands/{id}", get(commands::one))
        .route("/console/commands/{id}/row", get(commands::row))
        .route("/console/commands/{id}/recover", post(recover::one))
        .route("/console/attention", get(recover::attention))
        .route("/console/attention/bulk", post(recover::bulk))
        .route("/console/approvals", get(approvals::list))
        .route("/console/approvals/{id}/decision", post(approvals::decide))
        .route("/console/locks", get(locks::list))
        .route("/console/locks/release", post(locks::release))
        .route("/console/agents", get(agents::list))
        .route("/console/agents/{agent}/{change}", post(agents::change))
        .route("/console/directory", get(directory::find))
        .route("/console/directory/{id}", get(directory::person))
        .route("/console/directory/{id}/roles", post(directory::roles))
        .route("/console/directory/{id}/active", post(directory::active))
        .route("/console/directory/{id}/erase", post(directory::erase))
        .route("/console/directory/{id}/link-code", post(directory::link_code))
        .route("/console/audit", get(insight::audit))
        .route("/console/static/console.css", get(stylesheet))
        .route("/console/static/console.js", get(script))
}

async fn stylesheet() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], include_str!("../../../templates/console/console.css"))
}

async fn script() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], include_str!("../../../templates/console/console.js"))
}

/// What every signed-in page's frame shows: who, which tenant, and the form token.
fn frame(signed: &Signed) -> Value {
    let p = signed.principal();
    minijinja::context! { subject => p.subject, tenant => p.tenant.as_str(), csrf => signed.0.csrf_token }
}

/// A fresh key for a form that changes something: sent twice (a double click, a reload), the
/// change is made once.
fn form_key() -> String {
    format!("console-{}", Uuid::now_v7())
}

/// One command as a row of a list.
#[derive(Debug, Serialize)]
struct Row {
    command_id: Uuid,
    #[serde(rename = "ref")]
    short_ref: String,
    name: String,
    state: String,
    created_at: String,
    age: String,
    outcome: String,
    actor: String,
}

impl Row {
    fn of(state: &AppState, status: &CommandStatus, now: OffsetDateTime) -> Self {
        let intent = &status.envelope.intent;
        let name = state
            .policy
            .registry
            .current()
            .by_intent(&intent.entity, &intent.action)
            .map_or_else(|| format!("{} {}", intent.action, intent.entity), |spec| spec.name.clone());
        let created = OffsetDateTime::parse(&status.created_at, &time::format_description::well_known::Rfc3339);
        let outcome = match (&status.outcome, &status.reason_code) {
            (Some(outcome), Some(reason)) if reason != outcome.as_str() => format!("{} · {reason}", outcome.as_str()),
            (Some(outcome), _) => outcome.as_str().to_owned(),
            (None, Some(reason)) => reason.clone(),
            (None, None) => String::new(),
        };
        Self {
            command_id: status.command_id,
            short_ref: ShortRef::of(status.command_id).to_string(),
            name,
            state: status.state.as_str().to_owned(),
            created_at: status.created_at.clone(),
            age: created.map(|at| age(now - at)).unwrap_or_default(),
            outcome,
            actor: status.envelope.actor_id.clone(),
        }
    }
}

/// "12 s", "5 min", "3 h", "2 d".
fn age(elapsed: time::Duration) -> String {
    let s = elapsed.whole_seconds().max(0);
    match s {
        0..60 => format!("{s} s"),
        60..3_600 => format!("{} min", s / 60),
        3_600..86_400 => format!("{} h", s / 3_600),
        _ => format!("{} d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ages_read_at_a_glance() {
        let age = |s| super::age(time::Duration::seconds(s));
        assert_eq!(
            (age(5).as_str(), age(300).as_str(), age(7_200).as_str(), age(172_800).as_str()),
            ("5 s", "5 min", "2 h", "2 d")
        );
    }
}
