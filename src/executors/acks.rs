//! ACKs from executors (`POST /v1/commands/{id}/acks`) and the durable timers (delivery,
//! execution, TTL): both are events of a delivery, applied by the machine, written with the
//! command's move when they end it. Duplicates change nothing; out-of-order ACKs are refused;
//! both are kept in the delivery's log.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::evidence::decision::{Decision, Ttl};
use crate::service::dispatch::DeliveryPlan;

use crate::domain::command::TenantId;
use crate::domain::delivery::Applied;
use crate::domain::delivery::ApprovalWait;
use crate::domain::delivery::DeliveryEvent;
use crate::domain::delivery::DeliveryState;
use crate::domain::delivery::LogOutcome;
use crate::domain::delivery::OutOfOrder;
use crate::service::approvals::execution;
use crate::service::dispatch::conclude;
use crate::service::dispatch::dispatch_rows;
use crate::service::dispatch::handover::{Delivery, DeliveryLogEntry, StepOutcome, StepWrite};
use crate::service::engine::Engine;
use crate::service::engine::EngineError;
use crate::service::security::Policy;

crate::domain::names::named_enum! {
    /// What an ACK reports: the command reached the executor, or how its execution went.
    AckKind {
        Delivery => "delivery",
        Execution => "execution",
    }
}

crate::domain::names::named_enum! {
    /// How an execution went, as an execution ACK says.
    AckStatus {
        InProgress => "in_progress",
        Waiting => "waiting",
        Succeeded => "succeeded",
        Failed => "failed",
    }
}

/// An executor's report; an execution ACK has a `status`.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AckRequest {
    /// The target it is about; may be left out when the command has one.
    #[serde(default)]
    pub target: Option<String>,
    // What the ACK reports. (A doc comment here would wrap the inlined enum in an `allOf` with an
    // object: utoipa's.)
    #[serde(rename = "type")]
    #[schema(value_type = AckKind, inline)]
    pub kind: String,
    /// For an execution ACK.
    #[serde(default)]
    #[schema(value_type = Option<AckStatus>, inline)]
    pub status: Option<String>,
    /// What a succeeded execution produced.
    #[serde(default)]
    #[schema(value_type = Value)]
    pub result: Option<Value>,
    /// For a failure: `{code, message, retryable}`.
    #[serde(default)]
    #[schema(value_type = Value)]
    pub error: Option<Value>,
    /// For `waiting`: what the execution waits for (the command's own approvers when left out).
    #[serde(default)]
    pub waiting: Option<ApprovalWait>,
    /// A terminal execution ACK that proves the delivery too, when no delivery ACK came before
    /// it (a bus agent's answer to a replay, say). Never read from a request: an HTTP executor
    /// acknowledges the delivery by answering the call.
    #[serde(skip)]
    pub implies_delivery: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum AckOutcome {
    Applied { state: DeliveryState },
    Duplicate { state: DeliveryState },
}

#[derive(Debug, thiserror::Error)]
pub enum AckError {
    #[error("command not found")]
    NotFound,
    #[error("{0}")]
    Invalid(String),
    /// No dispatch of this command (to this target) has been routed yet.
    #[error("no delivery of this command to `{0}` exists yet")]
    NoDelivery(String),
    #[error(transparent)]
    OutOfOrder(OutOfOrder),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl From<crate::service::database::StoreError> for AckError {
    fn from(error: crate::service::database::StoreError) -> Self {
        Self::Engine(error.into())
    }
}

impl AckRequest {
    /// A delivery ACK from `target`.
    pub fn delivery(target: &str) -> Self {
        Self::from(target, "delivery", None, None, None)
    }

    /// `target` executed the command; `result` becomes the command's result.
    pub fn succeeded(target: &str, result: Value) -> Self {
        Self::from(target, "execution", Some("succeeded"), Some(result), None)
    }

    /// `target`'s execution waits for people's approval.
    pub fn waiting(target: &str, wait: ApprovalWait) -> Self {
        Self { waiting: Some(wait), ..Self::from(target, "execution", Some("waiting"), None, None) }
    }

    /// `target` could not execute the command; `error` is `{code, message, retryable}`.
    pub fn failed(target: &str, error: Value) -> Self {
        Self::from(target, "execution", Some("failed"), None, Some(error))
    }

    fn from(target: &str, kind: &str, status: Option<&str>, result: Option<Value>, error: Option<Value>) -> Self {
        Self {
            target: Some(target.to_owned()),
            kind: kind.to_owned(),
            status: status.map(str::to_owned),
            result,
            error,
            waiting: None,
            implies_delivery: kind == "execution",
        }
    }

    fn event(&self) -> Result<(DeliveryEvent, Option<Value>), AckError> {
        let invalid = |m: &str| AckError::Invalid(m.to_owned());
        let status = self.status.as_deref().map(str::parse::<AckStatus>).transpose();
        let status = status.map_err(|_| invalid("`status` is in_progress, waiting, succeeded or failed"))?;
        let kind = self.kind.parse::<AckKind>().map_err(|_| invalid("`type` is `delivery` or `execution`"))?;
        match (kind, status) {
            (AckKind::Delivery, _) => Ok((DeliveryEvent::DeliveryAck, None)),
            (AckKind::Execution, Some(AckStatus::InProgress)) => Ok((DeliveryEvent::ExecutionInProgress, None)),
            (AckKind::Execution, Some(AckStatus::Waiting)) => {
                Ok((DeliveryEvent::ExecutionWaiting, Some(json!({"waiting": self.wait()}))))
            }
            (AckKind::Execution, Some(AckStatus::Succeeded)) => {
                Ok((DeliveryEvent::ExecutionSucceeded, Some(self.result.clone().unwrap_or(Value::Null))))
            }
            (AckKind::Execution, Some(AckStatus::Failed)) => {
                let error = error_of(&json!({"error": self.error.clone().unwrap_or(Value::Null)}));
                Ok((DeliveryEvent::ExecutionFailed, Some(error)))
            }
            (AckKind::Execution, None) => {
                Err(invalid("an execution ACK has `status`: in_progress, waiting, succeeded or failed"))
            }
        }
    }

    /// What a `waiting` ACK waits for.
    fn wait(&self) -> ApprovalWait {
        self.waiting.clone().unwrap_or_else(ApprovalWait::required)
    }
}

/// What a type cannot say of an ACK's body: an execution ACK has a `status` (the rule of
/// `AckRequest::event`), added to the derived schema by the OpenAPI document.
pub fn ack_condition() -> Value {
    json!([
        {"properties": {"type": {"const": "delivery"}}},
        {"properties": {"type": {"const": "execution"}, "status": {"type": "string"}}, "required": ["status"]},
    ])
}

const ATTEMPTS: usize = 4;

/// Applies one ACK to the command's delivery within `tenant`; a `waiting` ACK asks the
/// approvers `policy` names.
pub async fn apply_ack(
    (engine, policy): (&Engine, &Policy),
    tenant: &TenantId,
    command_id: Uuid,
    ack: &AckRequest,
    now: OffsetDateTime,
) -> Result<AckOutcome, AckError> {
    let (event, detail) = ack.event()?;
    for _ in 0..ATTEMPTS {
        let command = engine.reads().command(tenant, command_id).await?.ok_or(AckError::NotFound)?;
        let deliveries = engine.reads().deliveries_of(command_id).await?;
        let delivery = match &ack.target {
            Some(target) => deliveries.into_iter().find(|d| &d.target == target),
            None if deliveries.len() == 1 => deliveries.into_iter().next(),
            None => None,
        };
        let Some(delivery) = delivery else {
            return Err(AckError::NoDelivery(ack.target.clone().unwrap_or_else(|| "its target".into())));
        };
        let mut plan = DeliveryPlan::existing(&delivery);
        let answer = matches!(
            event,
            DeliveryEvent::ExecutionSucceeded | DeliveryEvent::ExecutionFailed | DeliveryEvent::ExecutionWaiting
        );
        if ack.implies_delivery && answer && delivery.state == DeliveryState::Routed {
            let _ = plan.apply(DeliveryEvent::DeliveryAck, Some(json!({"implied_by": event.as_str()})));
        }
        match plan.apply(event, detail.clone()) {
            Err(refused) => {
                let entry = crate::service::dispatch::handover::DeliveryLogEntry {
                    event,
                    from: delivery.state,
                    to: delivery.state,
                    ack: None,
                    outcome: LogOutcome::Refused,
                    detail: detail.clone(),
                };
                engine.database().handover().log_events(delivery.id, &[entry], now).await?;
                return Err(AckError::OutOfOrder(refused));
            }
            Ok(Applied::Duplicate) => {
                engine.database().handover().log_events(delivery.id, &plan.change.log, now).await?;
                return Ok(AckOutcome::Duplicate { state: delivery.state });
            }
            Ok(Applied::Moved { to, .. }) => {
                if to == DeliveryState::Waiting {
                    let wait = ack.wait();
                    let asked = execution::ask((engine, policy), &command, (&delivery.target, &wait), &mut plan, now);
                    asked.await?.map_err(|unaskable| AckError::Invalid(unaskable.0))?;
                }
                if commit(engine, &command, &delivery, plan, now).await? {
                    return Ok(AckOutcome::Applied { state: to });
                }
            }
        }
    }
    Err(AckError::Engine(EngineError::Store(crate::service::database::StoreError::Unavailable(
        "the delivery kept changing while the ACK was written".into(),
    ))))
}

/// An agent declined a command it had not taken yet and said to try again (Bloodbank's
/// retryable `.error` before any ack: the agent was busy, paused, lost a version race). The
/// refusal goes into the delivery's log and a dispatch row for the same target is queued `delay`
/// from now, in one step. The delivery stays `routed`, so its delivery timeout still bounds how
/// long this goes on.
pub async fn redispatch_later(
    engine: &Engine,
    command_id: Uuid,
    target: &str,
    error: Value,
    delay: Duration,
    now: OffsetDateTime,
) -> Result<(), AckError> {
    let reads = engine.reads();
    let command = reads.command_of_any_tenant(command_id).await?.ok_or(AckError::NotFound)?;
    let delivery = reads.delivery(command_id, target).await?;
    let Some(delivery) = delivery.filter(|d| d.state == DeliveryState::Routed) else {
        // Not waiting for the agent any more (an ack overtook the error): the caller reads the error
        // as the execution's failure.
        return Err(AckError::NoDelivery(target.to_owned()));
    };
    let mut plan = DeliveryPlan::existing(&delivery);
    let delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
    plan.change.log.push(DeliveryLogEntry {
        event: DeliveryEvent::ExecutionFailed,
        from: delivery.state,
        to: delivery.state,
        ack: None,
        outcome: LogOutcome::Refused,
        detail: Some(json!({"declined": error, "dispatched_again_in_ms": delay_ms})),
    });
    let mut outbox = dispatch_rows(&[target.to_owned()]);
    outbox.iter_mut().for_each(|row| row.hold = Some(delay));
    let tenant = command.envelope.tenant_id.clone();
    let step = StepWrite { delivery: Some(plan.change), outbox, ..StepWrite::new(tenant, Some(command_id), now) };
    match engine.database().handover().commit_step(&step).await? {
        StepOutcome::Committed { .. } => Ok(()),
        _ => Err(AckError::Engine(EngineError::Store(crate::service::database::StoreError::Unavailable(
            "the delivery changed while a declined command was queued again".into(),
        )))),
    }
}

/// Writes a delivery's moves and, when they end it, the command's; `false` if it lost a race.
async fn commit(
    engine: &Engine,
    command: &crate::service::reads::StoredCommand,
    delivery: &Delivery,
    plan: DeliveryPlan,
    now: OffsetDateTime,
) -> Result<bool, EngineError> {
    conclude(engine, command, &delivery.target, plan, None, now).await
}

/// Fires the delivery, execution and TTL timers that are due (after a restart too: they are
/// columns). Returns how many deliveries closed.
pub async fn fire_timers(engine: &Engine, now: OffsetDateTime, limit: i64) -> Result<usize, EngineError> {
    let mut fired = 0;
    for delivery in engine.database().handover().overdue(now, limit).await? {
        let Ok(tenant) = TenantId::parse(&delivery.tenant_id) else { continue };
        let Some(command) = engine.reads().command(&tenant, delivery.command_id).await? else { continue };
        let ttl_passed = delivery.ttl_deadline.is_some_and(|t| t <= now);
        let event = match delivery.state {
            _ if ttl_passed => DeliveryEvent::TtlExpired,
            DeliveryState::Routed => DeliveryEvent::DeliveryTimeout,
            _ => DeliveryEvent::ExecutionTimeout,
        };
        let mut plan = DeliveryPlan::existing(&delivery);
        // `ended_by` as the dispatcher says it when its retries meet the same deadline.
        let detail = json!({"timer": event.as_str(), "ended_by": event.as_str(), "fired_at": now.unix_timestamp()});
        if plan.apply(event, Some(detail)).is_err() {
            continue;
        }
        if commit(engine, &command, &delivery, plan, now).await? {
            fired += 1;
            metrics::counter!("chatgate_delivery_timeouts_total", "class" => event.as_str()).increment(1);
        }
    }
    Ok(fired)
}

/// Cancels started commands whose TTL ran out before any executor got them (their agent is
/// paused, say): `started → canceled` with reason `TTL_EXPIRED`, and the person is told.
pub async fn expire_undispatched(engine: &Engine, now: OffsetDateTime, limit: i64) -> Result<usize, EngineError> {
    let mut canceled = 0;
    for (tenant, command_id) in engine.database().handover().expired_undispatched(now, limit).await? {
        let command = engine.command(&tenant, command_id).await?;
        let context = crate::service::engine::MoveContext {
            reason_code: Some(crate::domain::delivery::FailureClass::TtlExpired.as_str().to_owned()),
            decision: Some(
                Decision::Ttl {
                    ttl: Ttl::ExpiredBeforeDispatch,
                    expires_at: command.envelope.expires_at.map(|t| t.unix_timestamp()),
                }
                .into(),
            ),
            ..crate::service::engine::MoveContext::default()
        };
        let Ok(moves) = engine.plan_moves(&command, vec![(crate::domain::lifecycle::Event::Cancel, context)], now)
        else {
            continue;
        };
        let step = StepWrite { moves, ..StepWrite::new(tenant, Some(command_id), now) };
        if matches!(engine.database().handover().commit_step(&step).await?, StepOutcome::Committed { .. }) {
            canceled += 1;
        }
    }
    Ok(canceled)
}

/// The error an executor reported, with a code (`executor_error` when it gave none).
pub fn error_of(body: &Value) -> Value {
    let error = &body["error"];
    json!({
        "code": error["code"].as_str().unwrap_or("executor_error"),
        "message": error["message"].as_str().unwrap_or(""),
        "retryable": error["retryable"].as_bool().unwrap_or(false),
    })
}
