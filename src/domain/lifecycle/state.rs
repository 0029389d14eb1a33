//! The vocabulary of the lifecycle: states, events, command kinds and the confirmation gate,
//! each with the stable snake_case name that the store, the API and the evidence use.

use crate::domain::names::named_enum;

named_enum! {
    /// The twelve SMCL states (§V.A).
    State {
        Received => "received",
        Canonicalized => "canonicalized",
        ConfirmationRequired => "confirmation_required",
        Confirmed => "confirmed",
        AuthzPending => "authz_pending",
        Authorized => "authorized",
        Rejected => "rejected",
        Started => "started",
        Executed => "executed",
        Failed => "failed",
        Canceled => "canceled",
        Compensated => "compensated",
    }
}

impl State {
    /// Terminal for primary execution. `failed` is one: recovery happens through recovery
    /// commands, never by moving the failed command back into execution.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Rejected | Self::Executed | Self::Failed | Self::Canceled | Self::Compensated)
    }
}

named_enum! {
    /// What happened to a command; each allowed `(State, Event)` pair is a row of the table.
    Event {
        Canonicalize => "canonicalize",
        RequestConfirmation => "request_confirmation",
        Confirm => "confirm",
        AutoConfirm => "auto_confirm",
        SubmitForAuthorization => "submit_for_authorization",
        Allow => "allow",
        Deny => "deny",
        Start => "start",
        Succeed => "succeed",
        Fail => "fail",
        Cancel => "cancel",
        Compensate => "compensate",
    }
}

named_enum! {
    /// Whether a command changes something (DESIGN §4 `command_kind`).
    CommandKind {
        Read => "read",
        Mutation => "mutation",
    }
}

named_enum! {
    /// How far a command got through the human confirmation gate.
    ConfirmationGate {
        Pending => "pending",
        Satisfied => "satisfied",
        AutoConfirmed => "auto_confirmed",
    }
}

impl ConfirmationGate {
    pub fn is_passed(self) -> bool {
        matches!(self, Self::Satisfied | Self::AutoConfirmed)
    }
}
