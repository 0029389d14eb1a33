//! Which recovery actions a command's state allows (SMCL §VIII, §X "next allowed recovery
//! options"), derived from the transition table rather than kept as a list.

use crate::domain::lifecycle::Event;

use crate::domain::lifecycle::State;

use crate::domain::lifecycle::lookup;
use crate::domain::names::named_enum;

named_enum! {
    /// What an operator may ask for a command.
    RecoveryAction {
        Retry => "retry",
        Cancel => "cancel",
        Compensate => "compensate",
        Reprocess => "reprocess",
    }
}

/// The actions `state` allows: `cancel` wherever the table lets a command be canceled, `retry`
/// for a failed command (a new command with the same intent and key; the failed one stays failed),
/// `compensate` wherever the table allows compensation and the registry declares how (`compensable`),
/// `reprocess` for a command from a stored message that ended without doing anything (rejected,
/// failed, canceled: after a registry or directory fix, say).
pub fn allowed(state: State, compensable: bool, from_message: bool) -> Vec<RecoveryAction> {
    let mut actions = vec![];
    if state == State::Failed {
        actions.push(RecoveryAction::Retry);
    }
    if lookup(state, Event::Cancel).is_some() {
        actions.push(RecoveryAction::Cancel);
    }
    if compensable && lookup(state, Event::Compensate).is_some() {
        actions.push(RecoveryAction::Compensate);
    }
    if from_message && matches!(state, State::Rejected | State::Failed | State::Canceled) {
        actions.push(RecoveryAction::Reprocess);
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_offers_what_the_table_allows() {
        for state in State::ALL {
            for compensable in [false, true] {
                let actions = allowed(*state, compensable, false);
                assert_eq!(
                    actions.contains(&RecoveryAction::Cancel),
                    lookup(*state, Event::Cancel).is_some(),
                    "{state}"
                );
                assert_eq!(actions.contains(&RecoveryAction::Retry), *state == State::Failed, "{state}");
                let compensates = compensable && lookup(*state, Event::Compensate).is_some();
                assert_eq!(actions.contains(&RecoveryAction::Compensate), compensates, "{state}");
            }
        }
        assert_eq!(allowed(State::Executed, false, true), vec![]);
        assert_eq!(allowed(State::Executed, true, true), vec![RecoveryAction::Compensate]);
        assert_eq!(allowed(State::Started, true, true), vec![RecoveryAction::Cancel]);
        assert_eq!(allowed(State::Rejected, false, true), vec![RecoveryAction::Reprocess]);
        assert_eq!(allowed(State::Rejected, false, false), vec![]);
    }
}
