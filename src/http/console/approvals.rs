//! The Pending approvals page: what waits for people's approval in the operator's tenant — the
//! request, who asked, why (the policy's rules, or the executor's reason), what it still needs and
//! who may give it, until when — with Approve and Deny for an operator whose token may decide.
//! A button decides as the API does (`routes::approvals::decide_as`), as the session's subject,
//! with the step-up token the form carries where a rule asks its approvers to step up.

use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::context;
use serde::Deserialize;
use uuid::Uuid;

use super::frame;
use super::page::{PageError, render};
use super::session::{ApprovalsDecide, ApprovalsRead, Changing, Reading};
use crate::domain::registry::approvals::Vote;
use crate::http::routes::approvals::{Counted, DECIDE, DecisionBody, decide_as};
use crate::service::approvals::view;

/// How many pending approvals the page shows, oldest first.
const SHOWN: i64 = 100;

#[derive(Deserialize)]
pub(super) struct Shown {
    /// What the operator's last decision came to (`approved`, `recorded`, `denied`).
    #[serde(default)]
    decided: Option<String>,
}

/// `GET /console/approvals`.
pub(super) async fn list(
    Reading { state, signed, .. }: Reading<ApprovalsRead>,
    Query(shown): Query<Shown>,
) -> Result<Response, PageError> {
    let approvals = view::pending(&state.engine, &signed.principal().tenant, SHOWN).await?;
    let can_decide = signed.principal().scopes.contains(DECIDE);
    // Anything else in the address is not shown (never an error page for a stale link).
    let decided = shown.decided.and_then(|d| d.parse::<Counted>().ok());
    let vars = context! {
        title => "Pending approvals", nav => "approvals", session => frame(&signed), approvals, can_decide, decided,
    };
    Ok(render(StatusCode::OK, "approvals.html", vars))
}

#[derive(Deserialize)]
pub(super) struct DecisionForm {
    decision: Vote,
    /// The operator's step-up token, where a rule asks its approvers to step up.
    #[serde(default)]
    step_up: String,
}

/// `POST /console/approvals/{id}/decision`: the operator's own decision, counted once.
pub(super) async fn decide(
    Path(id): Path<Uuid>,
    Changing { state, signed, form, .. }: Changing<ApprovalsDecide, DecisionForm>,
) -> Result<Response, PageError> {
    let step_up_token = Some(form.step_up.trim().to_owned()).filter(|t| !t.is_empty());
    let body = DecisionBody { decision: form.decision, reason: None, step_up_token };
    let made = decide_as(&state, signed.principal(), id, body, "console").await?;
    Ok(Redirect::to(&format!("/console/approvals?decided={}", made.outcome)).into_response())
}
