//! The Agents page: each executor target's state, paused and resumed with the API's own move.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::context;
use serde::Deserialize;

use super::frame;
use super::page::{PageError, render};
use super::session::{AgentsAdmin, AgentsRead, Changing, Reading};
use crate::http::routes::agents::{list as list_agents, pause, resume};
use crate::service::agents::ADMIN_SCOPE;

/// `GET /console/agents`.
pub(super) async fn list(Reading { state, signed, .. }: Reading<AgentsRead>) -> Result<Response, PageError> {
    let agents = list_agents(State(state.clone())).await?.0.agents;
    let can_change = signed.principal().scopes.contains(ADMIN_SCOPE);
    let vars = context! {
        title => "Agents", nav => "agents", session => frame(&signed), agents, can_change,
    };
    Ok(render(StatusCode::OK, "agents.html", vars))
}

#[derive(Deserialize)]
pub(super) struct NoFields {}

/// `POST /console/agents/{agent}/pause` and `.../resume`.
pub(super) async fn change(
    Path((agent, change)): Path<(String, String)>,
    Changing { state, signed, .. }: Changing<AgentsAdmin, NoFields>,
) -> Result<Response, PageError> {
    let caller = signed.caller(&state);
    let path = Path(agent);
    let _moved = match change.as_str() {
        "pause" => pause(caller, path).await?,
        "resume" => resume(caller, path).await?,
        _ => return Err(PageError::NotFound),
    };
    Ok(Redirect::to("/console/agents").into_response())
}
