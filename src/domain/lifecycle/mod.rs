//! The command lifecycle (SMCL, RFC-WF-0018) as a pure state machine.
//!
//! Nothing here does I/O: the store persists what [`apply`] decides, and nothing else may
//! decide a state. The allowed moves are one table, [`TRANSITIONS`], so that the tests can walk
//! every `(State, Event)` pair and prove the table is exactly the seed's plus our documented
//! extensions.

mod evidence_kind;
pub mod recovery;
mod state;

pub use evidence_kind::EvidenceKind;
pub use state::{CommandKind, ConfirmationGate, Event, State};

/// One allowed move of the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub from: State,
    pub event: Event,
    pub to: State,
    /// Whether this row is ours rather than the seed's (SMCL §VI.A); kept so the docs and the
    /// exhaustive test can tell the two apart.
    pub extension: bool,
}

const fn seed(from: State, event: Event, to: State) -> Rule {
    Rule { from, event, to, extension: false }
}

const fn ext(from: State, event: Event, to: State) -> Rule {
    Rule { from, event, to, extension: true }
}

use Event as E;
use State as S;

/// SMCL §VI.A, row by row, then chatgate's deliberate extensions.
pub const TRANSITIONS: &[Rule] = &[
    seed(S::Received, E::Canonicalize, S::Canonicalized),
    seed(S::Canonicalized, E::RequestConfirmation, S::ConfirmationRequired),
    seed(S::ConfirmationRequired, E::Confirm, S::Confirmed),
    // "read-only or pre-confirm validation path": a read goes straight to authorization, and a
    // mutation whose actor lacks the scope is refused here before anyone is asked to confirm.
    seed(S::Canonicalized, E::SubmitForAuthorization, S::AuthzPending),
    // The policy-declared "safe auto-confirm" of §VI.C: the same edge, a distinct event so that
    // it is recorded and auditable as such.
    seed(S::Canonicalized, E::AutoConfirm, S::AuthzPending),
    seed(S::Confirmed, E::SubmitForAuthorization, S::AuthzPending),
    seed(S::AuthzPending, E::Allow, S::Authorized),
    seed(S::AuthzPending, E::Deny, S::Rejected),
    seed(S::Authorized, E::Start, S::Started),
    seed(S::Started, E::Succeed, S::Executed),
    seed(S::Started, E::Fail, S::Failed),
    seed(S::Started, E::Cancel, S::Canceled),
    seed(S::Failed, E::Compensate, S::Compensated),
    seed(S::Executed, E::Compensate, S::Compensated),
    // Extensions: a prompt that is declined or expires, an operator cancel, or a TTL that runs
    // out before dispatch all end the command without it ever starting.
    ext(S::ConfirmationRequired, E::Cancel, S::Canceled),
    ext(S::AuthzPending, E::Cancel, S::Canceled),
    ext(S::Authorized, E::Cancel, S::Canceled),
];

/// What the machine needs to know besides the state: the ordering invariants (§VI.C, §VI.D)
/// depend on the kind of command and on whether its confirmation gate was passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifecycle {
    pub state: State,
    pub kind: CommandKind,
    pub confirmation: ConfirmationGate,
}

/// A decided, valid move: what the store must persist, with the evidence it must write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    pub from: State,
    pub event: Event,
    pub to: State,
    pub confirmation: ConfirmationGate,
}

impl Transition {
    /// The evidence kinds SMCL §IX requires for the new state, in the order they are written.
    pub fn evidence_kinds(&self) -> &'static [EvidenceKind] {
        EvidenceKind::for_state(self.to)
    }

    pub fn after(&self, kind: CommandKind) -> Lifecycle {
        Lifecycle { state: self.to, kind, confirmation: self.confirmation }
    }
}

/// Why a move was refused. The store records it as `invalid_transition_attempt` evidence and
/// leaves the command as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InvalidTransition {
    #[error("{event} is not allowed from {from}")]
    NotInTable { from: State, event: Event },
    #[error("a mutating command cannot be {event} before its confirmation gate is passed")]
    ConfirmationMissing { from: State, event: Event },
    #[error("a read-only command has no confirmation step ({event} from {from})")]
    NotAMutation { from: State, event: Event },
}

impl InvalidTransition {
    pub fn reason_code(&self) -> &'static str {
        match self {
            Self::NotInTable { .. } => "transition_not_allowed",
            Self::ConfirmationMissing { .. } => "confirmation_required",
            Self::NotAMutation { .. } => "not_a_mutation",
        }
    }
}

/// The table lookup alone, without the ordering guards.
pub fn lookup(from: State, event: Event) -> Option<&'static Rule> {
    TRANSITIONS.iter().find(|r| r.from == from && r.event == event)
}

/// Decide a move. This is the only function in chatgate that says what state comes next.
pub fn apply(current: Lifecycle, event: Event) -> Result<Transition, InvalidTransition> {
    let from = current.state;
    let rule = lookup(from, event).ok_or(InvalidTransition::NotInTable { from, event })?;
    let mutation = current.kind == CommandKind::Mutation;

    let confirmation = match event {
        E::RequestConfirmation | E::AutoConfirm if !mutation => {
            return Err(InvalidTransition::NotAMutation { from, event });
        }
        E::Confirm => ConfirmationGate::Satisfied,
        E::AutoConfirm => ConfirmationGate::AutoConfirmed,
        // §VI.C: authorization is only granted, and execution only started, once a mutation has
        // passed its confirmation gate; checking at both keeps the invariant local to each edge.
        E::Allow | E::Start if mutation && !current.confirmation.is_passed() => {
            return Err(InvalidTransition::ConfirmationMissing { from, event });
        }
        _ => current.confirmation,
    };

    Ok(Transition { from, event, to: rule.to, confirmation })
}

/// The states a command may still reach from `state` through the table; used to tell what can
/// be done next without keeping a hand-written list.
pub fn events_from(state: State) -> impl Iterator<Item = Event> {
    TRANSITIONS.iter().filter(move |r| r.from == state).map(|r| r.event)
}

#[cfg(test)]
mod tests;
