//! Fixing things from the console: a recovery action on one command (through step-up when the
//! action is high-risk), and the Needs attention page with its bulk retry and cancel. Each goes
//! through the API's own code (`run_recovery`, `run_bulk`) under the form's idempotency key.

use axum::extract::Path;
use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::context;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use uuid::Uuid;

use super::page::{PageError, render};
use super::session::{Changing, CommandsRead, Reading, RecoveryWrite};
use super::{Row, form_key, frame};
use crate::domain::command::ShortRef;
use crate::domain::lifecycle::State as CommandState;
use crate::http::AppState;
use crate::http::idempotency::once;
use crate::http::routes::bulk::{BulkBody, BulkSelection, run_bulk};
use crate::http::routes::commands::{given, status_document};
use crate::http::routes::recovery::{RecoveryBody, RecoveryRequest, run_recovery};
use crate::http::views::RecoveryStarted;
use crate::service::recovery::bulk::{BulkFilter, BulkSummary, MAX_BULK, needs_attention};

/// The recovery form: the action, why, the form's key, and a step-up proof when one was asked for.
#[derive(Deserialize)]
pub(super) struct RecoverForm {
    action: String,
    #[serde(default)]
    reason: String,
    key: String,
    #[serde(default)]
    step_up: String,
}

/// `POST /console/commands/{id}/recover`: on success, the recovery command's page.
pub(super) async fn one(
    Path(id): Path<String>,
    Changing { state, signed, form, .. }: Changing<RecoveryWrite, RecoverForm>,
) -> Result<Response, PageError> {
    let id: Uuid = id.parse().map_err(|_| PageError::NotFound)?;
    let step_up = Some(form.step_up.trim()).filter(|t| !t.is_empty()).map(str::to_owned);
    let body = RecoveryBody { action: form.action.clone(), reason: form.reason.clone() };
    // What makes a retry of the form the same request: the body the API would have been sent.
    let fingerprint = [id.as_bytes().as_slice(), &serde_json::to_vec(&body).unwrap_or_default()].concat();
    let principal = signed.principal();
    let request = RecoveryRequest::checked(body)?;
    let step_up = step_up.as_deref();
    let run = run_recovery(&state, principal, id, &request, step_up);
    let key = Some(form.key.as_str()).filter(|k| !k.is_empty());
    let done = once(&state.database, principal.tenant.as_str(), key, &fingerprint, run).await?.into_result();
    match done {
        Ok(started) => Ok(started_page(&started)),
        Err(error) if error.problem().code == "insufficient_user_authentication" => {
            let detail = error.problem().detail.unwrap_or_default();
            let vars = context! {
                title => "Prove it's you", nav => "commands", session => frame(&signed), command_id => id,
                ref => ShortRef::of(id).to_string(), action => form.action, reason => form.reason,
                detail, key => form_key(),
            };
            Ok(render(StatusCode::UNAUTHORIZED, "prove.html", vars))
        }
        Err(error) => Err(error.into()),
    }
}

fn started_page(started: &RecoveryStarted) -> Response {
    Redirect::to(&format!("/console/commands/{}", started.recovery_command_id)).into_response()
}

/// The Needs attention page's filters.
#[derive(Debug, Default, Deserialize, Serialize)]
pub(super) struct AttentionFilter {
    state: Option<String>,
    command: Option<String>,
}

/// `GET /console/attention`: failed, timed-out and stuck commands (the chat's `failures`).
pub(super) async fn attention(
    Reading { state, signed, .. }: Reading<CommandsRead>,
    Query(filter): Query<AttentionFilter>,
) -> Result<Response, PageError> {
    let now = OffsetDateTime::now_utc();
    let tenant = &signed.principal().tenant;
    let selection = selection(&state, &filter);
    let mut commands = vec![];
    for command in needs_attention(&state.engine, tenant, now, 200).await?.iter().filter(|c| selection.admits(c)) {
        commands.push(Row::of(&state, &status_document(&state, command, false).await?, now));
    }
    let registry = state.policy.registry.current();
    let command_names: Vec<&str> = registry.commands().iter().map(|c| c.name.as_str()).collect();
    let vars = context! {
        title => "Needs attention", nav => "attention", live => "refresh", session => frame(&signed),
        commands, command_names, filter, key => form_key(),
    };
    Ok(render(StatusCode::OK, "attention.html", vars))
}

/// The page's filters as the bulk recovery reads them: a state or command nothing has matches nothing.
fn selection(state: &AppState, filter: &AttentionFilter) -> BulkFilter {
    BulkFilter {
        // No command needing attention is `received`: an unknown state selects nothing.
        state: given(&filter.state).map(|s| s.parse().unwrap_or(CommandState::Received)),
        intent: given(&filter.command).map(|name| state.policy.intent_named(&name)),
        ..BulkFilter::default()
    }
}

#[derive(Deserialize)]
pub(super) struct BulkForm {
    action: String,
    #[serde(default)]
    reason: String,
    key: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    command: String,
}

/// `POST /console/attention/bulk`: the API's bulk recovery over the filters shown.
pub(super) async fn bulk(
    Changing { state, signed, form, .. }: Changing<RecoveryWrite, BulkForm>,
) -> Result<Response, PageError> {
    let given = |text: String| Some(text).filter(|t| !t.is_empty());
    let filter = BulkSelection { state: given(form.state), command: given(form.command), ..BulkSelection::default() };
    let body = BulkBody { action: form.action, reason: form.reason, filter, limit: Some(MAX_BULK.into()) };
    // What makes a retry of the form the same request: the body the API would have been sent.
    let fingerprint = serde_json::to_vec(&body).unwrap_or_default();
    let principal = signed.principal();
    let request = body.checked(&state)?;
    let run = run_bulk(&state, principal, &request);
    let key = Some(form.key.as_str()).filter(|k| !k.is_empty());
    let summary: BulkSummary =
        once(&state.database, principal.tenant.as_str(), key, &fingerprint, run).await?.into_result()?;
    let vars = context! { title => "Bulk recovery", nav => "attention", session => frame(&signed), summary };
    Ok(render(StatusCode::OK, "bulk_done.html", vars))
}
