//! Dispatch, the parts every door shares: the `start` move that queues a dispatch row in the
//! same transaction (IDS shielding S2), a delivery's events decided on its state, and the
//! command's move when a delivery ends (`conclusion.rs`).

mod conclusion;
pub mod handover;

pub use conclusion::{Conclusion, conclude};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::delivery::ApprovalGrant;
use crate::domain::delivery::{
    self as machine, Applied, DeliveryEvent, DeliveryOutcome, DeliveryState, LogOutcome, OutOfOrder,
};
use crate::domain::evidence::EvidenceDraft;
use crate::domain::evidence::decision::Decision;
use crate::domain::lifecycle::CommandKind;
use crate::domain::lifecycle::Event;
use crate::domain::preview::STALE_PREVIEW;
use crate::domain::replies::OutcomeDetail;
use crate::service::engine::Engine;
use crate::service::engine::MoveContext;
use crate::store::{
    ApprovalWrite, ConsumedToken, Delivery, DeliveryChange, DeliveryLogEntry, NewDelivery, NewOutboxMessage,
    StoredCommand, TransitionWrite,
};

pub use crate::store::DISPATCH_KIND;
/// Telling an executor that an operator canceled a command it has.
pub const CANCEL_NOTICE_KIND: &str = "cancel_notice";

/// The notice to each target of a started command that an operator canceled it; the
/// dispatcher sends it to the executors that support it and drops it for the others.
pub fn cancel_notices(targets: &[String], command_id: Uuid, reason: &str) -> Vec<NewOutboxMessage> {
    targets
        .iter()
        .map(|target| NewOutboxMessage {
            kind: CANCEL_NOTICE_KIND.into(),
            destination: target.clone(),
            payload: json!({"target": target, "command_id": command_id, "reason": reason}),
            hold: None,
        })
        .collect()
}

/// The outbox kind of a preview request; its destination is the executor asked.
pub const PREVIEW_KIND: &str = "preview";
/// The row that asks `target` for the preview of the command admitted with it.
pub fn preview_request(target: &str) -> NewOutboxMessage {
    NewOutboxMessage { kind: PREVIEW_KIND.into(), destination: target.to_owned(), payload: json!({}), hold: None }
}

/// The row that asks again, written with the failure of a command its executor refused to run
/// on a stale preview (`stale_preview`): the same request is admitted anew (`service::previews::ask_again`),
/// previewed as the world is now and prompted, never executed on the old preview.
pub fn preview_again(target: &str) -> NewOutboxMessage {
    NewOutboxMessage {
        kind: PREVIEW_KIND.into(),
        destination: target.to_owned(),
        payload: json!({"again": true}),
        hold: None,
    }
}

/// Whether a preview row asks again for a failed command's request.
pub fn is_again(payload: &serde_json::Value) -> bool {
    payload["again"] == true
}

/// `authorized → started`, with one dispatch row per target written in the same transaction.
pub fn start(targets: &[String]) -> (Event, MoveContext) {
    let decision = Some(Decision::Dispatch { dispatch: targets.to_vec() }.into());
    (Event::Start, MoveContext { decision, outbox: dispatch_rows(targets), ..MoveContext::default() })
}

/// What a dispatch row asks of the dispatcher: hand the command to `target`, or, with `resume`,
/// tell the target's waiting execution that it was approved (the same delivery goes on).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DispatchOrder {
    pub target: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<ApprovalGrant>,
}

impl DispatchOrder {
    /// The row that carries this order.
    pub fn row(&self) -> NewOutboxMessage {
        NewOutboxMessage {
            kind: DISPATCH_KIND.into(),
            destination: self.target.clone(),
            payload: serde_json::to_value(self).unwrap_or(Value::Null),
            hold: None,
        }
    }

    /// The order a claimed row carries; an unreadable one hands the command over, as rows
    /// written before `resume` existed do.
    pub fn of(payload: &Value, destination: &str) -> Self {
        Self::deserialize(payload).unwrap_or_else(|_| Self { target: destination.to_owned(), resume: None })
    }
}

/// One dispatch row per target (the outbox of the `start` move).
pub fn dispatch_rows(targets: &[String]) -> Vec<NewOutboxMessage> {
    targets.iter().map(|target| DispatchOrder { target: target.clone(), resume: None }.row()).collect()
}

/// The moves after `canonicalize` of a command authorized the moment it is admitted (a read, a
/// mutation the registry lets through, an operator's or a machine caller's request), up to
/// `started`: a mutation passes its confirmation gate by `auto_confirm`, a read has none.
pub fn authorized_at_once(kind: CommandKind) -> &'static [Event] {
    match kind {
        CommandKind::Read => &[Event::SubmitForAuthorization, Event::Allow, Event::Start],
        CommandKind::Mutation => &[Event::AutoConfirm, Event::Allow, Event::Start],
    }
}

/// A delivery's events, decided one after another on the state each leaves, and what the step
/// that writes them writes besides (an approval its executor waits for, and its messages).
#[derive(Debug, Clone)]
pub struct DeliveryPlan {
    pub change: DeliveryChange,
    pub with: Besides,
}

/// What a delivery's step writes besides its moves: the approval it opens or settles, the
/// messages and evidence that go with it.
#[derive(Debug, Clone, Default)]
pub struct Besides {
    pub approval: Option<ApprovalWrite>,
    /// A step-up proof it uses up (a break-glass override's).
    pub consume: Option<ConsumedToken>,
    pub outbox: Vec<NewOutboxMessage>,
    pub evidence: Vec<EvidenceDraft>,
}

impl DeliveryPlan {
    /// A delivery that does not exist yet: it starts `received`.
    pub fn create(command: &StoredCommand, target: &str) -> Self {
        let e = &command.envelope;
        let new = NewDelivery {
            tenant_id: e.tenant_id.as_str().to_owned(),
            command_id: e.command_id,
            target: target.to_owned(),
            ttl_deadline: e.expires_at,
        };
        Self {
            change: change(Uuid::now_v7(), Some(new), 0, DeliveryState::Received, None, None),
            with: Besides::default(),
        }
    }

    pub fn existing(delivery: &Delivery) -> Self {
        let change = change(
            delivery.id,
            None,
            delivery.version,
            delivery.state,
            delivery.delivery_deadline,
            delivery.execution_deadline,
        );
        Self { change, with: Besides::default() }
    }

    pub fn state(&self) -> DeliveryState {
        self.change.state
    }

    /// Applies one event; a refused one changes nothing and is reported.
    pub fn apply(&mut self, event: DeliveryEvent, detail: Option<Value>) -> Result<Applied, OutOfOrder> {
        let from = self.change.state;
        let applied = machine::apply(from, event)?;
        let (to, ack, outcome) = match applied {
            Applied::Moved { to, ack, .. } => (to, ack, LogOutcome::Moved),
            Applied::Duplicate => (from, None, LogOutcome::Duplicate),
        };
        self.change.log.push(DeliveryLogEntry { event, from, to, ack, outcome, detail: detail.clone() });
        self.change.state = to;
        match event {
            DeliveryEvent::ExecutionSucceeded => self.finish(Some(DeliveryOutcome::Succeeded), None, detail),
            DeliveryEvent::ExecutionFailed | DeliveryEvent::ApprovalRejected => {
                self.finish(Some(DeliveryOutcome::Failed), None, detail)
            }
            // No timer runs while it waits: the approval's own wait (and the command's TTL) bound it.
            DeliveryEvent::ExecutionWaiting if to == DeliveryState::Waiting => {
                self.change.delivery_deadline = None;
                self.change.execution_deadline = None;
            }
            _ => {
                if let Some(class) = event.failure_class().filter(|_| to == DeliveryState::Closed) {
                    self.finish(Some(DeliveryOutcome::Failed), Some(class.as_str().to_owned()), detail);
                }
            }
        }
        Ok(applied)
    }

    fn finish(&mut self, outcome: Option<DeliveryOutcome>, class: Option<String>, detail: Option<Value>) {
        self.change.outcome = outcome;
        self.change.failure_class = class;
        self.change.detail = detail;
        self.change.delivery_deadline = None;
        self.change.execution_deadline = None;
    }

    pub fn expect_execution_by(&mut self, deadline: OffsetDateTime) {
        self.change.execution_deadline = Some(deadline);
    }

    pub fn expect_delivery_by(&mut self, deadline: OffsetDateTime) {
        self.change.delivery_deadline = Some(deadline);
    }

    /// When the delivery must have been delivered by (its durable timer), once routed.
    pub fn delivery_deadline(&self) -> Option<OffsetDateTime> {
        self.change.delivery_deadline
    }

    pub fn id(&self) -> Uuid {
        self.change.delivery_id
    }

    /// The delivery as this plan's change leaves it, once that change is committed: what reading
    /// it back would give.
    pub fn on_record(&self) -> Self {
        let c = &self.change;
        Self {
            change: change(
                c.delivery_id,
                None,
                c.expected_version + 1,
                c.state,
                c.delivery_deadline,
                c.execution_deadline,
            ),
            with: Besides::default(),
        }
    }
}

fn change(
    id: Uuid,
    create: Option<NewDelivery>,
    version: i64,
    state: DeliveryState,
    delivery_deadline: Option<OffsetDateTime>,
    execution_deadline: Option<OffsetDateTime>,
) -> DeliveryChange {
    DeliveryChange {
        delivery_id: id,
        create,
        expected_version: version,
        from: state,
        state,
        outcome: None,
        failure_class: None,
        detail: None,
        delivery_deadline,
        execution_deadline,
        log: vec![],
    }
}

/// How a command's execution ended, as its delivery says.
#[derive(Debug, Clone, PartialEq)]
pub enum Finished {
    Succeeded {
        result: Value,
    },
    /// `reason` is the executor's error code or the transport's failure class.
    Failed {
        reason: String,
        detail: Value,
    },
}

/// The command's move for a finished delivery; none when the command is no longer `started`
/// (canceled meanwhile, or already ended by another target).
pub fn command_moves(
    engine: &Engine,
    command: &StoredCommand,
    target: &str,
    finished: Finished,
    now: OffsetDateTime,
) -> Vec<TransitionWrite> {
    let (event, context) = match finished {
        Finished::Succeeded { result } => (
            Event::Succeed,
            MoveContext {
                decision: Some(Decision::Executed { target: target.to_owned(), result: result.clone() }.into()),
                reply_detail: Some(OutcomeDetail::Result(result)),
                ..MoveContext::default()
            },
        ),
        Finished::Failed { reason, detail } => (
            Event::Fail,
            MoveContext {
                // Refused on a stale preview: the request is asked again, as the world is now.
                outbox: (reason == STALE_PREVIEW).then(|| preview_again(target)).into_iter().collect(),
                reason_code: Some(reason),
                decision: Some(Decision::ExecutionFailed { target: target.to_owned(), error: detail.clone() }.into()),
                reply_detail: Some(OutcomeDetail::Error(detail)),
            },
        ),
    };
    engine.plan_moves(command, vec![(event, context)], now).unwrap_or_default()
}

/// What a closed or executed delivery means for its command.
pub fn finished(plan: &DeliveryPlan) -> Option<Finished> {
    let change = &plan.change;
    match (change.outcome, change.state) {
        (Some(DeliveryOutcome::Succeeded), _) => {
            Some(Finished::Succeeded { result: change.detail.clone().unwrap_or(Value::Null) })
        }
        (Some(DeliveryOutcome::Failed), _) => {
            let detail = change.detail.clone().unwrap_or(Value::Null);
            let reason = change
                .failure_class
                .clone()
                .or_else(|| detail["code"].as_str().map(str::to_owned))
                .unwrap_or_else(|| "executor_error".into());
            Some(Finished::Failed { reason, detail })
        }
        _ => None,
    }
}
