//! The transport state machine of one dispatch to one target (CMB seed): `received, validated,
//! routed, delivered, executed, closed`. Pure: the transition table is data, and the store
//! persists what `apply` decides. Duplicate ACKs change nothing; ACKs out of order are refused.

use std::time::Duration;

use serde_json::Value;

use crate::domain::names::named_enum;

named_enum! {
    /// Where one dispatch to one target stands.
    DeliveryState {
        Received => "received",
        Validated => "validated",
        Routed => "routed",
        Delivered => "delivered",
        // The executor said the execution waits for people's approval (workflow seed §6.10,
        // `RUNNING → WAITING`); a decision moves it back to `delivered` or closes it.
        Waiting => "waiting",
        Executed => "executed",
        Closed => "closed",
    }
}

named_enum! {
    /// What happens to a dispatch (the seed's EVT_* events).
    DeliveryEvent {
        ValidateOk => "validate_ok",
        ValidateFail => "validate_fail",
        RouteOk => "route_ok",
        RouteFail => "route_fail",
        DeliveryAck => "delivery_ack",
        DeliveryTimeout => "delivery_timeout",
        ExecutionSucceeded => "execution_ack_success",
        ExecutionFailed => "execution_ack_failure",
        ExecutionInProgress => "execution_ack_in_progress",
        ExecutionTimeout => "execution_timeout",
        ExecutionWaiting => "execution_ack_waiting",
        ApprovalGranted => "approval_granted",
        ApprovalRejected => "approval_rejected",
        TtlExpired => "ttl_expired",
        ForceClose => "force_close",
    }
}

named_enum! {
    /// Why a dispatch closed without an execution result (the seed's §10).
    FailureClass {
        ValidationFailure => "VALIDATION_FAILURE",
        RouteFailure => "ROUTE_FAILURE",
        DeliveryTimeout => "DELIVERY_TIMEOUT",
        ExecutionTimeout => "EXECUTION_TIMEOUT",
        TtlExpired => "TTL_EXPIRED",
        Unknown => "UNKNOWN_TRANSPORT_ERROR",
    }
}

named_enum! {
    /// How a delivery ended: what its executor said, or `failed` when the transport closed it.
    DeliveryOutcome {
        Succeeded => "succeeded",
        Failed => "failed",
    }
}

named_enum! {
    /// What one event did to a delivery, as the delivery's log keeps it.
    LogOutcome {
        Moved => "moved",
        Duplicate => "duplicate",
        Refused => "refused",
    }
}

named_enum! {
    /// The acknowledgements a transition emits or records.
    Ack {
        Router => "ROUTER_ACK",
        Delivery => "DELIVERY_ACK",
        Execution => "EXECUTION_ACK",
        Failure => "FAILURE_ACK",
    }
}

use DeliveryEvent as E;
use DeliveryState as S;

/// One row of the seed's table (§5.1): from, event, to, the ACK it carries.
pub const TRANSITIONS: &[(DeliveryState, DeliveryEvent, DeliveryState, Option<Ack>)] = &[
    (S::Received, E::ValidateOk, S::Validated, Some(Ack::Router)),
    (S::Received, E::ValidateFail, S::Closed, Some(Ack::Failure)),
    (S::Validated, E::RouteOk, S::Routed, None),
    (S::Validated, E::RouteFail, S::Closed, Some(Ack::Failure)),
    (S::Routed, E::DeliveryAck, S::Delivered, Some(Ack::Delivery)),
    (S::Routed, E::DeliveryTimeout, S::Closed, Some(Ack::Failure)),
    (S::Delivered, E::ExecutionSucceeded, S::Executed, Some(Ack::Execution)),
    (S::Delivered, E::ExecutionFailed, S::Executed, Some(Ack::Execution)),
    (S::Delivered, E::ExecutionInProgress, S::Delivered, Some(Ack::Execution)),
    (S::Delivered, E::ExecutionTimeout, S::Closed, Some(Ack::Failure)),
    // The seed's human in the loop (workflow §6.6): WAITING → RUNNING on HUMAN_APPROVED, → FAILED on
    // HUMAN_REJECTED. No execution timer runs while it waits: the approval's own wait bounds it.
    (S::Delivered, E::ExecutionWaiting, S::Waiting, Some(Ack::Execution)),
    (S::Waiting, E::ApprovalGranted, S::Delivered, None),
    (S::Waiting, E::ApprovalRejected, S::Closed, Some(Ack::Failure)),
    // An executor may give up on its own while it waits; it may not succeed without the decision.
    (S::Waiting, E::ExecutionFailed, S::Executed, Some(Ack::Execution)),
    (S::Executed, E::ForceClose, S::Closed, None),
];

/// What applying an event to a dispatch means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// A move (possibly to the same state, for `in_progress`), with the ACK it records.
    Moved { from: DeliveryState, to: DeliveryState, ack: Option<Ack> },
    /// The same ACK again: nothing changes (§8.1).
    Duplicate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{event} is not valid in {state}")]
pub struct OutOfOrder {
    pub state: DeliveryState,
    pub event: DeliveryEvent,
}

/// Decides an event for a dispatch in `state`. TTL expiry and a forced close apply in every
/// state but `closed`; an ACK repeated after it moved the dispatch is a duplicate; anything else
/// not in the table is out of order and changes nothing.
pub fn apply(state: DeliveryState, event: DeliveryEvent) -> Result<Applied, OutOfOrder> {
    if let Some((from, _, to, ack)) = TRANSITIONS.iter().find(|(f, e, _, _)| *f == state && *e == event) {
        return Ok(Applied::Moved { from: *from, to: *to, ack: *ack });
    }
    match (state, event) {
        (S::Closed, _) => {}
        (_, E::TtlExpired) => return Ok(Applied::Moved { from: state, to: S::Closed, ack: Some(Ack::Failure) }),
        (_, E::ForceClose) => return Ok(Applied::Moved { from: state, to: S::Closed, ack: None }),
        _ => {}
    }
    if is_duplicate(state, event) {
        return Ok(Applied::Duplicate);
    }
    Err(OutOfOrder { state, event })
}

/// An ACK that already moved the dispatch past it (a delivery ACK once delivered, a terminal
/// execution ACK once executed).
fn is_duplicate(state: DeliveryState, event: DeliveryEvent) -> bool {
    match event {
        E::DeliveryAck => matches!(state, S::Delivered | S::Executed),
        E::ExecutionSucceeded | E::ExecutionFailed | E::ExecutionInProgress => state == S::Executed,
        E::ExecutionWaiting => matches!(state, S::Waiting | S::Executed),
        _ => false,
    }
}

impl DeliveryEvent {
    /// The failure class of an event that closes a dispatch without a result.
    pub fn failure_class(self) -> Option<FailureClass> {
        Some(match self {
            E::ValidateFail => FailureClass::ValidationFailure,
            E::RouteFail => FailureClass::RouteFailure,
            E::DeliveryTimeout => FailureClass::DeliveryTimeout,
            E::ExecutionTimeout => FailureClass::ExecutionTimeout,
            E::TtlExpired => FailureClass::TtlExpired,
            _ => return None,
        })
    }
}

/// The seed's default multi-target policy (§7.2): every target must deliver and execute; the
/// whole closes when all are terminal or any fails non-recoverably.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overall {
    Pending,
    Succeeded,
    /// At least one target failed or closed without a result.
    Failed,
}

/// Aggregates per-target outcomes: `Some(true)` succeeded, `Some(false)` failed or closed without
/// a result, `None` still under way.
pub fn aggregate(targets: &[Option<bool>]) -> Overall {
    if targets.contains(&Some(false)) {
        Overall::Failed
    } else if !targets.is_empty() && targets.iter().all(|t| *t == Some(true)) {
        Overall::Succeeded
    } else {
        Overall::Pending
    }
}

/// What an executor says when its execution waits for people's approval (workflow seed §6.10,
/// `ExecutionResult.waiting("approval_required")`): why, and, when it knows, by whom and how many.
/// The same on every transport: an HTTP answer's or ACK's `waiting`, a bus agent's `.waiting`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalWait {
    /// Why, as a code (`approval_required` when left out, or the executor's own).
    #[serde(default = "approval_required")]
    pub reason: String,
    /// Why, in words an approver reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The roles whose holders may approve; the command's own approval rules' when left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<String>,
    /// How many distinct people must approve (1 when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub quorum: Option<u32>,
    /// How long the execution may wait, in seconds, before it is rejected as expired; the
    /// command's approval rules' longest wait (else an hour) when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub within_secs: Option<u64>,
}

fn approval_required() -> String {
    "approval_required".into()
}

impl ApprovalWait {
    /// The seed's `waiting("approval_required")`: by the command's own approvers.
    pub fn required() -> Self {
        Self { reason: approval_required(), message: None, roles: vec![], quorum: None, within_secs: None }
    }

    /// The wait's fields picked out of a bus agent's message, which carries others beside them.
    pub fn picked_from(fields: &Value) -> Result<Self, serde_json::Error> {
        let picked: serde_json::Map<String, Value> = ["reason", "message", "roles", "quorum", "within_secs"]
            .into_iter()
            .filter_map(|key| fields.get(key).filter(|v| !v.is_null()).map(|v| (key.to_owned(), v.clone())))
            .collect();
        serde_json::from_value(Value::Object(picked))
    }
}

/// What a waiting executor is told when its approval is given: the execution goes on under the
/// same delivery and idempotency key (seed §6.10, "without replaying side effects"). A denial or
/// an expiry fails the execution instead (`approval_rejected`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize, utoipa::ToSchema)]
pub struct ApprovalGrant {
    pub approval_id: uuid::Uuid,
    /// `approved`.
    pub decision: String,
    /// The executor's reason, as it asked.
    pub reason: String,
    /// Who approved, in the order they did.
    pub approvers: Vec<GrantedBy>,
    /// Where the evidence is read: the command's evidence, whose `approval.decided` artifacts
    /// name `approval_id`.
    pub evidence: String,
}

/// One approver of a grant.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize, utoipa::ToSchema)]
pub struct GrantedBy {
    /// The person, as the tenant's directory names them.
    pub approver: String,
    /// The roles they held when they approved.
    pub roles: Vec<String>,
    /// When (RFC 3339).
    pub decided_at: String,
    /// Where: `api`, or the channel they tapped on.
    pub via: String,
}

/// What one call to an executor came to.
#[derive(Debug, Clone, PartialEq)]
pub enum CallOutcome {
    /// Delivered and executed: the result (or the error) is known.
    Executed { succeeded: bool, detail: Value },
    /// Delivered; the execution ACK comes later (`POST /v1/commands/{id}/acks`). `working` says
    /// the executor reported it in progress.
    Delivered { working: bool },
    /// Not delivered, worth another attempt (408, 429, 5xx, a timeout, a broken connection).
    Retry { error: String, retry_after: Option<Duration> },
    /// Delivered and refused for good (another 4xx): the command fails without a retry.
    Refused { status: u16, error: Value },
    /// Handed to the bus (the broker confirmed it); the agent's ACKs come back over the bus.
    Handed,
    /// Delivered; the execution waits for people's approval, and resumes when they give it.
    Waiting(ApprovalWait),
}

impl CallOutcome {
    /// The `outcome` label of `chatgate_dispatch_attempts_total`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Executed { succeeded: true, .. } => "executed",
            Self::Executed { succeeded: false, .. } => "failed",
            Self::Delivered { .. } => "delivered",
            Self::Handed => "handed",
            Self::Waiting(_) => "waiting",
            Self::Retry { .. } => "retry",
            Self::Refused { .. } => "refused",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed's table, written out again independently, to walk every pair against.
    fn seed(state: DeliveryState, event: DeliveryEvent) -> Option<DeliveryState> {
        Some(match (state, event) {
            (S::Received, E::ValidateOk) => S::Validated,
            (S::Received, E::ValidateFail) => S::Closed,
            (S::Validated, E::RouteOk) => S::Routed,
            (S::Validated, E::RouteFail) => S::Closed,
            (S::Routed, E::DeliveryAck) => S::Delivered,
            (S::Routed, E::DeliveryTimeout) => S::Closed,
            (S::Delivered, E::ExecutionSucceeded | E::ExecutionFailed) => S::Executed,
            (S::Delivered, E::ExecutionInProgress) => S::Delivered,
            (S::Delivered, E::ExecutionTimeout) => S::Closed,
            (S::Delivered, E::ExecutionWaiting) => S::Waiting,
            (S::Waiting, E::ApprovalGranted) => S::Delivered,
            (S::Waiting, E::ApprovalRejected) => S::Closed,
            (S::Waiting, E::ExecutionFailed) => S::Executed,
            (S::Closed, _) => return None,
            (_, E::TtlExpired | E::ForceClose) => S::Closed,
            _ => return None,
        })
    }

    #[test]
    fn every_state_and_event_pair_follows_the_seed() {
        for state in DeliveryState::ALL {
            for event in DeliveryEvent::ALL {
                match (apply(*state, *event), seed(*state, *event)) {
                    (Ok(Applied::Moved { to, .. }), Some(expected)) => assert_eq!(to, expected, "{state} {event}"),
                    (Ok(Applied::Duplicate), None) | (Err(_), None) => {}
                    (got, expected) => panic!("{state} + {event}: got {got:?}, the seed says {expected:?}"),
                }
            }
        }
    }

    #[test]
    fn nothing_moves_backwards_and_closed_is_final() {
        let order = |s: DeliveryState| DeliveryState::ALL.iter().position(|x| *x == s).unwrap_or(usize::MAX);
        for state in DeliveryState::ALL {
            for event in DeliveryEvent::ALL {
                if let Ok(Applied::Moved { from, to, .. }) = apply(*state, *event) {
                    // The one way back: an approval resumes the waiting execution (seed §6.6).
                    let resumed = (from, event, to) == (S::Waiting, &E::ApprovalGranted, S::Delivered);
                    assert!(resumed || order(to) >= order(from), "{from} -> {to} on {event}");
                }
            }
            assert!(apply(S::Closed, E::TtlExpired).is_err());
        }
    }

    #[test]
    fn duplicate_acks_change_nothing_and_early_ones_are_refused() {
        assert_eq!(apply(S::Delivered, E::DeliveryAck), Ok(Applied::Duplicate));
        assert_eq!(apply(S::Executed, E::ExecutionSucceeded), Ok(Applied::Duplicate));
        assert_eq!(apply(S::Executed, E::ExecutionInProgress), Ok(Applied::Duplicate));
        assert_eq!(
            apply(S::Delivered, E::ExecutionInProgress),
            Ok(Applied::Moved { from: S::Delivered, to: S::Delivered, ack: Some(Ack::Execution) })
        );
        assert_eq!(
            apply(S::Routed, E::ExecutionSucceeded),
            Err(OutOfOrder { state: S::Routed, event: E::ExecutionSucceeded })
        );
        assert!(apply(S::Validated, E::DeliveryAck).is_err(), "a delivery ACK before routing");
        assert!(apply(S::Closed, E::DeliveryAck).is_err(), "any ACK for a closed delivery");
    }

    #[test]
    fn targets_aggregate_by_the_default_policy() {
        assert_eq!(aggregate(&[Some(true), Some(true)]), Overall::Succeeded);
        assert_eq!(aggregate(&[Some(true), None]), Overall::Pending);
        assert_eq!(aggregate(&[None, Some(false)]), Overall::Failed);
        assert_eq!(aggregate(&[]), Overall::Pending);
        assert_eq!(E::ExecutionTimeout.failure_class(), Some(FailureClass::ExecutionTimeout));
        assert_eq!(E::DeliveryAck.failure_class(), None);
    }
}
