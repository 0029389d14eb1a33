//! Pausing and resuming agents (the executors, seen as agents): one versioned move, for the
//! operator API, the console and the chat's `pause` and `resume` alike.
//!
//! Agents are the deployment's: every tenant's commands for `orders` go to the one `orders`
//! executor, so pausing it holds every tenant's. Changing one therefore takes a deployment-level
//! scope, [`ADMIN_SCOPE`], not a tenant's `agents:write`; reading their states (`agents:read`)
//! shows each tenant the executors its own commands wait on.

use std::collections::BTreeSet;

use time::OffsetDateTime;

use crate::domain::agent;
use crate::service::database::Database;

use crate::domain::agent::Agent;

use crate::domain::agent::AgentEvent;
use crate::domain::agent::AgentState;
use crate::store::StoreError;

/// The scope that pauses and resumes the deployment's agents. Granting it in a tenant's directory
/// role makes that tenant's people operators of the whole deployment.
pub const ADMIN_SCOPE: &str = "agents:admin";

#[derive(Debug, thiserror::Error)]
pub enum AgentChangeError {
    #[error("no agent `{0}`")]
    Unknown(String),
    /// The machine refuses the move in this state (pausing a paused agent).
    #[error("{reason}")]
    NotAllowed { state: String, reason: String },
    /// Another move won the race; read again and retry.
    #[error("the agent changed concurrently")]
    Concurrent,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Every agent in `agents` (the configured ones, `Policy::agents`) and its state, by name.
pub async fn list(database: &Database, agents: &BTreeSet<String>) -> Result<Vec<(String, Agent)>, StoreError> {
    let store = database.store();
    let mut states = vec![];
    for name in agents {
        states.push((name.clone(), store.agents().get(name).await?));
    }
    Ok(states)
}

/// Whether `event` may move agent `name`, one of `agents`, now: its current state and the
/// state it would move to. The chat asks this before it prompts for confirmation and `change`
/// when it moves the agent.
pub async fn admissible(
    database: &Database,
    agents: &BTreeSet<String>,
    name: &str,
    event: AgentEvent,
) -> Result<(Agent, Agent), AgentChangeError> {
    let store = database.store();
    if !agents.contains(name) {
        return Err(AgentChangeError::Unknown(name.to_owned()));
    }
    let current = store.agents().get(name).await?;
    let next = agent::apply(&current, event).map_err(|refused| AgentChangeError::NotAllowed {
        state: current.state.as_str().to_owned(),
        reason: refused.to_string(),
    })?;
    Ok((current, next))
}

/// Applies `event` to agent `name` on behalf of `by`.
pub async fn change(
    database: &Database,
    agents: &BTreeSet<String>,
    name: &str,
    event: AgentEvent,
    by: &str,
    now: OffsetDateTime,
) -> Result<Agent, AgentChangeError> {
    let store = database.store();
    let (current, next) = admissible(database, agents, name, event).await?;
    if !store.agents().commit_move(name, &current, &next, by, now).await? {
        return Err(AgentChangeError::Concurrent);
    }
    tracing::info!(agent = name, state = %next.state, by, "agent moved");
    Ok(next)
}

/// Agent `name`'s own report of its state, mirrored with the same compare-and-swap as an
/// operator's move: an operator's pause wins, and the report becomes where a resume returns.
/// False when a concurrent move won.
pub async fn mirror(
    database: &Database,
    name: &str,
    reported: AgentState,
    now: OffsetDateTime,
) -> Result<bool, StoreError> {
    let agents = database.store().agents();
    let current = agents.get(name).await?;
    let next = match current.state {
        AgentState::Paused => Agent { version: current.version + 1, pre_pause: Some(reported), ..current.clone() },
        _ if reported == AgentState::Paused => {
            Agent { state: reported, version: current.version + 1, pre_pause: Some(current.state) }
        }
        _ => Agent { state: reported, version: current.version + 1, pre_pause: None },
    };
    agents.commit_move(name, &current, &next, "bus", now).await
}
