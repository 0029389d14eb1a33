//! `/v1/agents`: the dispatch targets as agents, and pausing and resuming them. A paused agent's
//! commands wait (their dispatch rows are not claimed) and go out on resume, or expire by TTL.
//! Agents are the deployment's, shared by every tenant: changing one takes `agents:admin`
//! (`service::agents::ADMIN_SCOPE`).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use time::OffsetDateTime;

use crate::http::ApiError;

use crate::domain::agent::Agent;
use crate::domain::agent::AgentEvent;
use crate::http::AppState;
use crate::http::Problem;
use crate::http::auth::require;
use crate::http::auth::{Caller, Principal};
use crate::http::responses::{BearerErrors, NoSuchAgent, PROBLEM_JSON, ProblemDocument};
use crate::http::views::{AgentList, AgentView};
use crate::service::agents::{ADMIN_SCOPE, AgentChangeError};

/// Reading the agents and their states.
pub const READ: &str = "agents:read";

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/agents", get(list).route_layer(require(READ)))
        .route("/v1/agents/{agent}/pause", post(pause).route_layer(require(ADMIN_SCOPE)))
        .route("/v1/agents/{agent}/resume", post(resume).route_layer(require(ADMIN_SCOPE)))
}

fn describe(name: &str, agent: &Agent) -> AgentView {
    AgentView { agent: name.to_owned(), state: agent.state, version: agent.version, pre_pause_state: agent.pre_pause }
}

#[utoipa::path(get, path = "/v1/agents", operation_id = "list_agents", tag = "agents",
    security(("bearer" = ["agents:read"])), responses((status = 200, description = "Every agent", body = AgentList),
    BearerErrors))]
pub(crate) async fn list(State(state): State<AppState>) -> Result<Json<AgentList>, ApiError> {
    let agents = crate::service::agents::list(&state.database, &state.policy.agents)
        .await?
        .iter()
        .map(|(name, agent)| describe(name, agent))
        .collect();
    Ok(Json(AgentList { agents }))
}

#[utoipa::path(post, path = "/v1/agents/{agent}/pause", tag = "agents", security(("bearer" = ["agents:admin"])),
    params(("agent" = String, Path)), responses((status = 200, description = "Paused", body = AgentView), NoSuchAgent,
    (status = 409, description = "Already paused, or moved concurrently", content_type = PROBLEM_JSON,
        body = ProblemDocument), BearerErrors))]
pub(crate) async fn pause(
    Caller { state, principal }: Caller,
    Path(name): Path<String>,
) -> Result<Json<AgentView>, ApiError> {
    change(&state, &principal, &name, AgentEvent::Pause).await
}

#[utoipa::path(post, path = "/v1/agents/{agent}/resume", tag = "agents", security(("bearer" = ["agents:admin"])),
    params(("agent" = String, Path)), responses((status = 200, description = "Resumed", body = AgentView), NoSuchAgent,
    (status = 409, description = "Not paused, or moved concurrently", content_type = PROBLEM_JSON,
        body = ProblemDocument), BearerErrors))]
pub(crate) async fn resume(
    Caller { state, principal }: Caller,
    Path(name): Path<String>,
) -> Result<Json<AgentView>, ApiError> {
    change(&state, &principal, &name, AgentEvent::Resume).await
}

/// One versioned move; a concurrent one makes this a 409, never a lost update.
async fn change(
    state: &AppState,
    principal: &Principal,
    name: &str,
    event: AgentEvent,
) -> Result<Json<AgentView>, ApiError> {
    let by = format!("{}|{}", principal.issuer, principal.subject);
    match crate::service::agents::change(
        &state.database,
        &state.policy.agents,
        name,
        event,
        &by,
        OffsetDateTime::now_utc(),
    )
    .await
    {
        Ok(next) => Ok(Json(describe(name, &next))),
        Err(AgentChangeError::Unknown(_)) => {
            Err(Problem::for_status(StatusCode::NOT_FOUND).detail(format!("No agent `{name}`.")).into())
        }
        Err(AgentChangeError::NotAllowed { state, reason }) => {
            Err(Problem::new(StatusCode::CONFLICT, "invalid_agent_transition", "Agent transition not allowed")
                .detail(reason)
                .with("state", state.as_str())
                .into())
        }
        Err(AgentChangeError::Concurrent) => {
            Err(Problem::new(StatusCode::CONFLICT, "concurrent_update", "The agent changed concurrently")
                .detail("Read it again and retry.")
                .into())
        }
        Err(AgentChangeError::Store(error)) => Err(error.into()),
    }
}
