//! Pausing and resuming agents (the executors, seen as agents): one versioned move, for the
//! operator API and the chat's `pause` and `resume` alike.

use time::OffsetDateTime;

use crate::config::Config;
use crate::delivery::agent::{self, Agent, AgentEvent};
use crate::store::{Store, StoreError};

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

/// Every configured agent and its state, by name.
pub async fn list(store: &Store, config: &Config) -> Result<Vec<(String, Agent)>, StoreError> {
    let mut agents = vec![];
    for name in config.executors.keys() {
        agents.push((name.clone(), store.agent(name).await?));
    }
    Ok(agents)
}

/// Whether `event` may move agent `name` now (`known`: the configuration declares it): its
/// current state and the state it would move to. The chat asks this before it prompts for
/// confirmation and `change` when it moves the agent.
pub async fn admissible(
    store: &Store,
    known: bool,
    name: &str,
    event: AgentEvent,
) -> Result<(Agent, Agent), AgentChangeError> {
    if !known {
        return Err(AgentChangeError::Unknown(name.to_owned()));
    }
    let current = store.agent(name).await?;
    let next = agent::apply(&current, event).map_err(|refused| AgentChangeError::NotAllowed {
        state: current.state.as_str().to_owned(),
        reason: refused.to_string(),
    })?;
    Ok((current, next))
}

/// Applies `event` to agent `name` on behalf of `by`.
pub async fn change(
    store: &Store,
    config: &Config,
    name: &str,
    event: AgentEvent,
    by: &str,
    now: OffsetDateTime,
) -> Result<Agent, AgentChangeError> {
    let (current, next) = admissible(store, config.executors.contains_key(name), name, event).await?;
    if !store.move_agent(name, &current, &next, by, now).await? {
        return Err(AgentChangeError::Concurrent);
    }
    tracing::info!(agent = name, state = %next.state, by, "agent moved");
    Ok(next)
}
