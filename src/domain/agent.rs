//! The agent state machine (Bloodbank FSM-1): `idle, acknowledging, working, blocked, error,
//! paused`. Pure: a table of moves, with pause from anywhere and resume to the state before it.

use crate::domain::names::named_enum;

named_enum! {
    AgentState {
        Idle => "idle",
        Acknowledging => "acknowledging",
        Working => "working",
        Blocked => "blocked",
        Error => "error",
        Paused => "paused",
    }
}

named_enum! {
    AgentEvent {
        CommandReceived => "command_received",
        AckSent => "ack_sent",
        ResultProduced => "result",
        Failed => "error",
        BlockedOn => "blocked",
        Unblocked => "unblocked",
        Reset => "reset",
        Pause => "pause",
        Resume => "resume",
    }
}

use AgentEvent as E;
use AgentState as S;

/// The seed's transition matrix (§4.2), pause and resume aside.
pub const TRANSITIONS: &[(AgentState, AgentEvent, AgentState)] = &[
    (S::Idle, E::CommandReceived, S::Acknowledging),
    (S::Acknowledging, E::AckSent, S::Working),
    (S::Working, E::ResultProduced, S::Idle),
    (S::Working, E::Failed, S::Error),
    (S::Working, E::BlockedOn, S::Blocked),
    (S::Blocked, E::Unblocked, S::Working),
    (S::Blocked, E::Failed, S::Error),
    (S::Error, E::Reset, S::Idle),
];

/// The Bloodbank routing key of a command for `agent`: `command.{agent}.{action}`.
pub fn command_routing_key(agent: &str, action: &str) -> String {
    format!("command.{agent}.{action}")
}

/// An agent as stored: its state, the version its next move must name, and where a resume goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    pub state: AgentState,
    pub version: i64,
    pub pre_pause: Option<AgentState>,
}

impl Default for Agent {
    fn default() -> Self {
        Self { state: S::Idle, version: 0, pre_pause: None }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("an agent that is {state} cannot {event}")]
pub struct InvalidAgentMove {
    pub state: AgentState,
    pub event: AgentEvent,
}

/// The agent after `event`, or why not.
pub fn apply(agent: &Agent, event: AgentEvent) -> Result<Agent, InvalidAgentMove> {
    let refused = InvalidAgentMove { state: agent.state, event };
    let (state, pre_pause) = match event {
        E::Pause if agent.state != S::Paused => (S::Paused, Some(agent.state)),
        E::Resume if agent.state == S::Paused => (agent.pre_pause.unwrap_or(S::Idle), None),
        E::Pause | E::Resume => return Err(refused),
        _ => {
            let (_, _, to) = TRANSITIONS.iter().find(|(f, e, _)| *f == agent.state && *e == event).ok_or(refused)?;
            (*to, None)
        }
    };
    Ok(Agent { state, version: agent.version + 1, pre_pause })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_and_event_pair_follows_the_seed() {
        for state in AgentState::ALL {
            for event in AgentEvent::ALL {
                let agent = Agent { state: *state, version: 3, pre_pause: None };
                let result = apply(&agent, *event);
                let expected = match event {
                    E::Pause => (*state != S::Paused).then_some(S::Paused),
                    // Paused with nothing remembered: back to idle.
                    E::Resume => (*state == S::Paused).then_some(S::Idle),
                    _ => TRANSITIONS.iter().find(|(f, e, _)| f == state && e == event).map(|(_, _, t)| *t),
                };
                assert_eq!(result.as_ref().ok().map(|a| a.state), expected, "{state} + {event}");
                if let Ok(moved) = result {
                    assert_eq!(moved.version, 4, "every move takes the next version");
                }
            }
        }
    }

    #[test]
    fn resume_returns_to_the_state_before_the_pause() {
        let working = Agent { state: S::Working, version: 1, pre_pause: None };
        let paused = apply(&working, E::Pause).expect("pause");
        assert_eq!((paused.state, paused.pre_pause), (S::Paused, Some(S::Working)));
        assert_eq!(apply(&paused, E::Pause), Err(InvalidAgentMove { state: S::Paused, event: E::Pause }));
        let resumed = apply(&paused, E::Resume).expect("resume");
        assert_eq!((resumed.state, resumed.version, resumed.pre_pause), (S::Working, 3, None));
    }
}
