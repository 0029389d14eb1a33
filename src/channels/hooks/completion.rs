//! `waitForCompletion`: the `/hooks/agent` request held open after admission until its command
//! ends, then answered with the outcome (OpenClaw's `completion`: `status` `ok` or `error`), or,
//! when it has not ended within the call's `timeoutSeconds` (at most `MOST_WAIT`) or its agent is
//! paused (it holds the command until resumed), with `pending` and the state it is in — the
//! command goes on, and a retry with the same key replays it. Read from the database, so that the
//! answer is the same whichever instance runs it.

use std::time::Duration;

use uuid::Uuid;

use crate::channels::ChannelError;
use crate::config::Config;
use crate::domain::agent::AgentState;
use crate::domain::command::TenantId;
use crate::domain::lifecycle::State;
use crate::service::intake::Ingress;

/// The longest a request is held open, whatever the call asks.
const MOST_WAIT: Duration = Duration::from_secs(120);
/// How often the command is read while waiting.
const POLL: Duration = Duration::from_millis(50);

crate::domain::names::named_enum! {
    /// How a waited-for command ended: `ok` (executed), `error` (failed, refused, expired or
    /// canceled), or `pending` (not ended within the wait).
    CompletionStatus {
        Ok => "ok",
        Error => "error",
        Pending => "pending",
    }
}

/// What a waiting caller is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub status: CompletionStatus,
    /// The command's state when the answer was made.
    pub state: State,
}

/// Waits for `command_id`, dispatched to `agent`, to end, at most `timeout_secs` (or `MOST_WAIT`).
pub(super) async fn wait_for(
    ingress: &Ingress,
    config: &Config,
    command_id: Uuid,
    agent: &str,
    timeout_secs: Option<u64>,
) -> Result<Completion, ChannelError> {
    let tenant = TenantId::parse(&config.hooks.tenant).map_err(|_| ChannelError::Misconfigured("tenant"))?;
    let wait = timeout_secs.map_or(MOST_WAIT, Duration::from_secs).min(MOST_WAIT);
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let current = ingress.engine().reads().command(&tenant, command_id).await?;
        let now_in = current.map(|c| c.lifecycle.state).ok_or(ChannelError::Misconfigured("a command not found"))?;
        if now_in.is_terminal() {
            let status = if now_in == State::Executed { CompletionStatus::Ok } else { CompletionStatus::Error };
            return Ok(Completion { status, state: now_in });
        }
        let held = ingress.engine().reads().agent(agent).await?.state == AgentState::Paused;
        if held || tokio::time::Instant::now() >= deadline {
            return Ok(Completion { status: CompletionStatus::Pending, state: now_in });
        }
        tokio::time::sleep(POLL).await;
    }
}
