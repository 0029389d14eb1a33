//! Which built-in chat operation a command asks for, read once from its intent (the registry's
//! `entity` and `action`) and then matched as a type.

use crate::domain::agent::AgentEvent;
use crate::domain::lifecycle::recovery::RecoveryAction;

/// A built-in chat operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    /// `status`: the asker's latest requests.
    Requests,
    /// `agents`: every executor and its state.
    Agents,
    /// `more`: the next page of the last list.
    More,
    Status,
    Why,
    Failures,
    Trace,
    Evidence,
    /// `pause`, `resume <agent>`.
    Agent(AgentEvent),
    /// `retry`, `cancel`, `reprocess`, `compensate <ref>`.
    Recover(RecoveryAction),
}

impl Operation {
    /// The operation of `entity`.`action`, if it is a built-in one.
    pub(crate) fn of(entity: &str, action: &str) -> Option<Self> {
        Some(match action {
            "list" if entity == "agent" => Self::Agents,
            "list" => Self::Requests,
            "more" => Self::More,
            "status" => Self::Status,
            "why" => Self::Why,
            "failures" => Self::Failures,
            "trace" => Self::Trace,
            "evidence" => Self::Evidence,
            "pause" => Self::Agent(AgentEvent::Pause),
            "resume" => Self::Agent(AgentEvent::Resume),
            other => Self::Recover(other.parse().ok()?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_builtin_action_reads_as_its_operation_and_others_as_none() {
        assert_eq!(Operation::of("agent", "list"), Some(Operation::Agents));
        assert_eq!(Operation::of("request", "list"), Some(Operation::Requests));
        assert_eq!(Operation::of("agent", "resume"), Some(Operation::Agent(AgentEvent::Resume)));
        assert_eq!(Operation::of("command", "compensate"), Some(Operation::Recover(RecoveryAction::Compensate)));
        assert_eq!(Operation::of("order", "refund"), None);
    }
}
