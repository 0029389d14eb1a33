//! Which recovery actions a command's state allows (SMCL §VIII, §X "next allowed recovery
//! options"), derived from the transition table rather than kept as a list.

use super::{Event, State, lookup};
use crate::names::named_enum;

named_enum! {
    /// What an operator may ask for a command.
    RecoveryAction {
        Retry => "retry",
        Cancel => "cancel",
    }
}

/// The actions `state` allows: `cancel` wherever the table lets a command be canceled, `retry`
/// for a failed command (a new command with the same intent and key; the failed one stays failed).
pub fn allowed(state: State) -> Vec<RecoveryAction> {
    let mut actions = vec![];
    if state == State::Failed {
        actions.push(RecoveryAction::Retry);
    }
    if lookup(state, Event::Cancel).is_some() {
        actions.push(RecoveryAction::Cancel);
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_offers_what_the_table_allows() {
        for state in State::ALL {
            let actions = allowed(*state);
            assert_eq!(actions.contains(&RecoveryAction::Cancel), lookup(*state, Event::Cancel).is_some(), "{state}");
            assert_eq!(actions.contains(&RecoveryAction::Retry), *state == State::Failed, "{state}");
        }
        assert_eq!(allowed(State::Executed), vec![]);
        assert_eq!(allowed(State::Started), vec![RecoveryAction::Cancel]);
    }
}
