//! A mutation whose resource another command holds: refused before anyone is asked to confirm
//! it (canonicalized → authz_pending → rejected, `resource_locked`), the person told which
//! request holds it — by its reference, never by whose it is — and that they may try again once
//! it has ended.

use serde_json::json;
use uuid::Uuid;

use crate::domain::command::{CommandEnvelope, CommandRequest, IdempotencyClass, ShortRef};
use crate::domain::evidence::decision::Decision;
use crate::domain::lifecycle::Event;
use crate::domain::locks::Resource;
use crate::domain::replies::OutcomeDetail;
use crate::domain::replies::{Reply, WaitingTurn};
use crate::service::engine::Admission;
use crate::store::{LOCK_WAIT_KIND, NewOutboxMessage};

/// The reason code of a mutation refused because what it changes is held.
pub const RESOURCE_LOCKED: &str = "resource_locked";

/// `admission` refused because `holder` holds `resource`: its prompt and confirmation dropped,
/// nothing held. The refusal does not keep the request's key: the person is told to try again
/// once the holder has ended, and the same words then are a new request, not a duplicate of
/// this refusal (a redelivered webhook is still recognized by its message).
pub(super) fn refused<'a>(
    request: CommandRequest,
    admission: Admission<'a>,
    (resource, holder): (&Resource, Uuid),
) -> (CommandRequest, Admission<'a>) {
    let holder_ref = ShortRef::of(holder).to_string();
    let error = json!({"entity": resource.entity(), "target": resource.target(), "holder": holder_ref});
    let request = CommandRequest { idempotency_class: IdempotencyClass::I0, ..request };
    let admission = Admission {
        then: &[Event::SubmitForAuthorization, Event::Deny],
        decision: Some(Decision::Locked { resource: resource.to_string(), holder, holder_ref }.into()),
        reason_code: Some(RESOURCE_LOCKED.to_owned()),
        reply_detail: Some(OutcomeDetail::Error(error)),
        ..without_first_moves(admission)
    };
    (request, admission)
}

/// `admission` without the first moves it was planned with — their moves, decision, prompt,
/// replies and lock —, which a command that finds what it changes held makes no more: the carrying
/// message, where to answer and how it was read stay.
fn without_first_moves(admission: Admission<'_>) -> Admission<'_> {
    Admission {
        then: &[],
        decision: None,
        reason_code: None,
        outbox: vec![],
        confirmation: None,
        reply_detail: None,
        lock: None,
        lock_waits: false,
        ..admission
    }
}

/// How long a command waiting its turn sleeps before it looks again by itself: a release wakes it
/// at once, this is for a release it raced with.
pub const WAIT_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// `admission` waits its turn because `holder` holds `resource` (`lock = "wait"`): admitted to
/// `canonicalized` without its prompt, told which request holds it (by reference), with a row
/// that takes the resource once it is free and asks for the confirmation then
/// (`service::waiting`). It keeps its key: the same request again is a duplicate in progress.
pub(super) fn waiting<'a>(
    request: CommandRequest,
    admission: Admission<'a>,
    (resource, holder): (&Resource, Uuid),
) -> (CommandRequest, Admission<'a>) {
    let turn = NewOutboxMessage {
        kind: LOCK_WAIT_KIND.into(),
        destination: resource.to_string(),
        payload: json!({}),
        hold: Some(WAIT_POLL),
    };
    let told = admission.reply_to.as_ref().map(|reply_to| {
        let what = reply_to.what.clone().unwrap_or_else(|| request.intent.action.clone());
        let (entity, target) = (resource.entity().to_owned(), resource.target().to_owned());
        reply_to.message(&Reply::WaitingTurn(WaitingTurn {
            what,
            holder: ShortRef::of(holder).to_string(),
            entity,
            target,
        }))
    });
    let admission = Admission { outbox: std::iter::once(turn).chain(told).collect(), ..without_first_moves(admission) };
    (request, admission)
}

/// Whether a command may hold a lock (it changes a resource), so that its end releases it; a
/// read's end costs no statement.
pub(super) fn may_hold_lock(envelope: &CommandEnvelope) -> bool {
    Resource::changed_by(envelope.command_kind, &envelope.intent).is_some()
}
