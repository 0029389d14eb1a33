use crate::domain::lifecycle::*;
use proptest::prelude::*;

/// SMCL §VI.A written out independently of `TRANSITIONS`, so a change to the table must be a
/// change to this list too.
const SEED_TABLE: &[(&str, &str, &str)] = &[
    ("received", "canonicalize", "canonicalized"),
    ("canonicalized", "request_confirmation", "confirmation_required"),
    ("confirmation_required", "confirm", "confirmed"),
    ("canonicalized", "submit_for_authorization", "authz_pending"),
    ("canonicalized", "auto_confirm", "authz_pending"),
    ("confirmed", "submit_for_authorization", "authz_pending"),
    ("authz_pending", "allow", "authorized"),
    ("authz_pending", "deny", "rejected"),
    ("authorized", "start", "started"),
    ("started", "succeed", "executed"),
    ("started", "fail", "failed"),
    ("started", "cancel", "canceled"),
    ("failed", "compensate", "compensated"),
    ("executed", "compensate", "compensated"),
];

const EXTENSIONS: &[(&str, &str, &str)] = &[
    ("confirmation_required", "cancel", "canceled"),
    ("authz_pending", "cancel", "canceled"),
    ("authorized", "cancel", "canceled"),
];

fn expected(from: State, event: Event) -> Option<(State, bool)> {
    let find = |rows: &[(&str, &str, &str)]| {
        rows.iter()
            .find(|(f, e, _)| *f == from.as_str() && *e == event.as_str())
            .map(|(_, _, to)| to.parse::<State>().expect("test table names a real state"))
    };
    find(SEED_TABLE).map(|to| (to, false)).or_else(|| find(EXTENSIONS).map(|to| (to, true)))
}

fn passed(kind: CommandKind) -> Lifecycle {
    Lifecycle { state: State::Received, kind, confirmation: ConfirmationGate::Satisfied }
}

#[test]
fn every_state_event_pair_matches_the_seed_table_plus_extensions() {
    let mut allowed = 0;
    for &from in State::ALL {
        for &event in Event::ALL {
            let rule = lookup(from, event);
            match expected(from, event) {
                Some((to, extension)) => {
                    allowed += 1;
                    let rule = rule.unwrap_or_else(|| panic!("{from} -{event}-> missing"));
                    assert_eq!((rule.to, rule.extension), (to, extension), "{from} -{event}->");
                }
                None => assert!(rule.is_none(), "{from} -{event}-> must not be allowed"),
            }
        }
    }
    assert_eq!(allowed, SEED_TABLE.len() + EXTENSIONS.len());
    assert_eq!(allowed, TRANSITIONS.len(), "no duplicate rows in the table");
}

#[test]
fn apply_refuses_every_pair_outside_the_table() {
    for &from in State::ALL {
        for &event in Event::ALL {
            if lookup(from, event).is_some() {
                continue;
            }
            for &kind in CommandKind::ALL {
                let current = Lifecycle { state: from, ..passed(kind) };
                assert_eq!(apply(current, event), Err(InvalidTransition::NotInTable { from, event }));
            }
        }
    }
}

#[test]
fn terminal_states_admit_nothing_but_compensation() {
    for &state in State::ALL.iter().filter(|s| s.is_terminal()) {
        let events: Vec<Event> = events_from(state).collect();
        let compensable = matches!(state, State::Executed | State::Failed);
        assert_eq!(events, if compensable { vec![Event::Compensate] } else { vec![] });
    }
}

#[test]
fn a_mutation_cannot_be_authorized_or_started_before_confirmation() {
    let pending = |state| Lifecycle { state, kind: CommandKind::Mutation, confirmation: ConfirmationGate::Pending };
    assert!(matches!(
        apply(pending(State::AuthzPending), Event::Allow),
        Err(InvalidTransition::ConfirmationMissing { .. })
    ));
    assert!(matches!(
        apply(pending(State::Authorized), Event::Start),
        Err(InvalidTransition::ConfirmationMissing { .. })
    ));
    // The pre-confirm authorization path may still refuse it.
    assert_eq!(apply(pending(State::AuthzPending), Event::Deny).map(|t| t.to), Ok(State::Rejected));
}

#[test]
fn a_read_has_no_confirmation_step_and_needs_none() {
    let read = |state| Lifecycle { state, kind: CommandKind::Read, confirmation: ConfirmationGate::Pending };
    assert!(matches!(
        apply(read(State::Canonicalized), Event::RequestConfirmation),
        Err(InvalidTransition::NotAMutation { .. })
    ));
    assert_eq!(apply(read(State::AuthzPending), Event::Allow).map(|t| t.to), Ok(State::Authorized));
}

#[test]
fn confirm_and_auto_confirm_set_the_gate() {
    let m = |state| Lifecycle { state, kind: CommandKind::Mutation, confirmation: ConfirmationGate::Pending };
    let confirmed = apply(m(State::ConfirmationRequired), Event::Confirm).expect("allowed");
    assert_eq!(confirmed.confirmation, ConfirmationGate::Satisfied);
    let auto = apply(m(State::Canonicalized), Event::AutoConfirm).expect("allowed");
    assert_eq!(auto.confirmation, ConfirmationGate::AutoConfirmed);
}

#[test]
fn every_state_but_received_requires_evidence_and_rejected_writes_both_kinds() {
    for &state in State::ALL {
        assert_eq!(EvidenceKind::for_state(state).is_empty(), state == State::Received);
    }
    assert_eq!(
        EvidenceKind::for_state(State::Rejected),
        &[EvidenceKind::AuthzDecided, EvidenceKind::ExecutionRejected]
    );
}

#[test]
fn names_round_trip() {
    for &s in State::ALL {
        assert_eq!(s.as_str().parse::<State>(), Ok(s));
    }
    for &e in Event::ALL {
        assert_eq!(e.as_str().parse::<Event>(), Ok(e));
    }
    assert!("started ".parse::<State>().is_err());
}

fn any_event() -> impl Strategy<Value = Event> {
    proptest::sample::select(Event::ALL)
}

fn any_kind() -> impl Strategy<Value = CommandKind> {
    proptest::sample::select(CommandKind::ALL)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// SMCL §VI.C/§VI.D and §VII.B over arbitrary event sequences, invalid ones included.
    #[test]
    fn no_history_starts_a_mutation_without_confirmation_and_authorization(
        kind in any_kind(),
        events in proptest::collection::vec(any_event(), 0..40),
    ) {
        let mut current = Lifecycle { state: State::Received, kind, confirmation: ConfirmationGate::Pending };
        let mut history = vec![current.state];
        let mut gate_events = vec![];
        for event in events {
            let before = current;
            match apply(current, event) {
                Ok(t) => {
                    prop_assert_eq!(t.from, before.state);
                    current = t.after(kind);
                    history.push(current.state);
                    gate_events.push(event);
                }
                Err(_) => prop_assert_eq!(current, before, "a refused event changes nothing"),
            }
        }
        let started_at = history.iter().position(|s| *s == State::Started);
        if let Some(at) = started_at {
            let before = &history[..at];
            prop_assert!(before.contains(&State::Authorized));
            if kind == CommandKind::Mutation {
                prop_assert!(
                    before.contains(&State::Confirmed) || gate_events.contains(&Event::AutoConfirm),
                    "mutation started without confirmation: {:?}", history
                );
            }
        }
        prop_assert!(history.iter().filter(|s| **s == State::Started).count() <= 1);
    }
}
