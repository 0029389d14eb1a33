//! The transactional outbox: effects on the outside world are rows written with the state change
//! that causes them, and workers claim them with a lease so that none is worked on twice at once.

use std::time::Duration;

use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::outbound::{ChatMessage, OutboxMessage, Purpose, ReplyAddress};
use crate::domain::replies::Reply;
use crate::store::Outbox;
use crate::store::StoreError;
use crate::store::decoded::{decode_all, decoded};
use crate::store::rows::to_ms;

mod handoff;
mod write;

pub use handoff::Handoff;
pub(crate) use handoff::Handoffs;
pub(crate) use write::{
    insert_outbox, insert_outboxes, insert_withdrawable, settle_outbox, settle_outboxes, update_waiting,
    withdraw_outbox,
};

/// An effect to perform once the transaction that decided it has committed.
#[derive(Debug, Clone, PartialEq)]
pub struct NewOutboxMessage {
    /// What kind of effect: `reply`, `prompt`, `dispatch`, ...
    pub kind: String,
    /// Where it goes: a channel address, an executor name.
    pub destination: String,
    pub payload: Value,
    /// Due this long after it is written rather than at once (see [`crate::store::ReplyTo::hold`]).
    pub hold: Option<Duration>,
}

/// A conversation address to queue a reply to.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReplyTo {
    /// The outbox destination (`whatsapp:{phone_number_id}:{wa_id}`).
    pub destination: String,
    /// Where every reply to this conversation goes (channel, recipient, the message answered).
    pub base: ReplyAddress,
    /// The name the person knows the command by (the registry's), for the replies about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// How the command reads to the person ("refund 25 on order 1234"), for the replies about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what: Option<String>,
    /// The template of the reply when the command executed (the registry's `reply`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executed_template: Option<String>,
    /// How long replies queued now wait for the provider's HTTP answer to carry them (Twilio's
    /// TwiML). Never stored: replies made later, from the stored address, go out at once.
    #[serde(skip)]
    pub hold: Option<std::time::Duration>,
}

impl ReplyTo {
    /// `reply` to this address, rendered later from its template with its variables.
    /// An address the gateway writes to first (an approver asked), answering no message of theirs.
    pub fn to(base: ReplyAddress, destination: String) -> Self {
        Self { destination, base, command: None, what: None, executed_template: None, hold: None }
    }

    pub fn chat(&self, reply: &Reply) -> OutboxMessage {
        OutboxMessage::V1(ChatMessage {
            address: self.base.clone(),
            purpose: Purpose::Reply,
            template: reply.template().to_owned(),
            vars: reply.vars(),
            buttons: vec![],
        })
    }

    /// [`Self::chat`] as an outbox row.
    pub fn message(&self, reply: &Reply) -> NewOutboxMessage {
        self.outbox(&self.chat(reply))
    }

    /// An outbox row carrying `message` to this address.
    pub fn outbox(&self, message: &OutboxMessage) -> NewOutboxMessage {
        NewOutboxMessage {
            kind: MESSAGE_KIND.into(),
            destination: self.destination.clone(),
            payload: message.to_payload(),
            hold: self.hold,
        }
    }
}

/// The outbox kind of a command handed to its executors, which the dispatcher claims.
pub const DISPATCH_KIND: &str = "dispatch";

/// The outbox kind of a message to a person (prompts and replies), which the sender claims.
pub const MESSAGE_KIND: &str = "message";

/// The outbox kind of a message to someone the tenant does not know (a refusal): the sender
/// takes these only with the room messages to known people leave, so that a flood of strangers
/// never makes a customer wait.
pub const NOTICE_KIND: &str = "notice";

/// The fate of a claimed outbox row, written with the step that worked on it.
#[derive(Debug, Clone, PartialEq)]
pub enum OutboxSettle {
    Done(Uuid),
    Retry { id: Uuid, at: OffsetDateTime, error: String },
    Dead { id: Uuid, error: String },
}

decoded! {
    /// A row a worker now holds until its lease ends.
    #[derive(Debug, Clone, PartialEq)]
    pub struct ClaimedMessage {
        pub id: Uuid,
        pub tenant_id: String,
        pub command_id: Option<Uuid>,
        pub kind: String,
        pub destination: String,
        pub payload: Value,
        /// This attempt's number, starting at 1.
        pub attempt: i64,
    }
}

/// A message row held for a provider's HTTP answer (`NewOutboxMessage::hold`): never tried and
/// written due later than it was written, not yet due at `$2` (now). `$row` is the table's alias
/// and a dot, or nothing.
macro_rules! held_row {
    ($row:literal) => {
        concat!(
            $row,
            "attempts = 0 AND ",
            $row,
            "next_attempt_at > $2 AND ",
            $row,
            "next_attempt_at > ",
            $row,
            "created_at"
        )
    };
}

pub(crate) use held_row;

/// The claim statement, with `$lock` the dialect's row-locking clause (written once so that the
/// two backends cannot drift apart).
macro_rules! claim_outbox_sql {
    ($lock:literal) => {
        concat!(
            "UPDATE outbox SET locked_until = $1, attempts = attempts + 1, updated_at = $2
             WHERE id IN (SELECT id FROM outbox due
                          WHERE kind = $4 AND status = 'pending' AND next_attempt_at <= $2
                            AND (locked_until IS NULL OR locked_until <= $2)
                            AND NOT (kind = 'dispatch'
                                     AND destination IN (SELECT name FROM agents WHERE state = 'paused'))
                            AND NOT (kind = 'message' AND EXISTS (
                                SELECT 1 FROM outbox earlier
                                WHERE earlier.destination = due.destination AND earlier.status = 'pending'
                                  AND earlier.id < due.id AND earlier.kind = 'message'
                                  AND ((",
            $crate::store::outbox::held_row!("earlier."),
            ") OR earlier.locked_until > $2)))
                          ORDER BY next_attempt_at, id LIMIT $3 ",
            $lock,
            ") RETURNING id, tenant_id, command_id, kind, destination, payload, attempts AS attempt"
        )
    };
}
pub(crate) use claim_outbox_sql;

impl Outbox<'_> {
    /// The newest message written to `destination` (a person), whether sent or not: its payload.
    pub async fn last_message_to(self, destination: &str) -> Result<Option<Value>, StoreError> {
        let row =
            sqlx::query("SELECT payload FROM outbox WHERE destination = $1 AND kind = $2 ORDER BY id DESC LIMIT 1")
                .bind(destination)
                .bind(MESSAGE_KIND)
                .fetch_optional(self.store.pool())
                .await?;
        let payload: Option<String> = row.map(|row| sqlx::Row::get(&row, 0));
        Ok(payload.and_then(|p| serde_json::from_str(&p).ok()))
    }

    /// The first row of `kind` written for `command_id` to `destination` (a command's dispatch
    /// row, which a hook caller is told of).
    pub async fn first_of(self, command_id: Uuid, kind: &str, destination: &str) -> Result<Option<Uuid>, StoreError> {
        let row = sqlx::query(
            "SELECT id FROM outbox WHERE command_id = $1 AND kind = $2 AND destination = $3 ORDER BY created_at, id",
        )
        .bind(command_id.to_string())
        .bind(kind)
        .bind(destination)
        .fetch_optional(self.store.pool())
        .await?;
        let id: Option<String> = row.map(|row| sqlx::Row::get(&row, 0));
        Ok(id.and_then(|id| id.parse().ok()))
    }

    /// Claims up to `limit` due rows of `kind` for `lease`. A worker that dies loses its lease and
    /// the row becomes due again: delivery is at least once, and the idempotency key makes it
    /// once in effect. A message waits while an earlier one to the same person is held for a
    /// provider's HTTP answer or in flight, so that a later reply (a command's outcome) cannot
    /// overtake one the answer carries (the confirmation's thanks); one in retry backoff does
    /// not hold the others up.
    pub async fn claim(
        self,
        kind: &str,
        limit: i64,
        lease: Duration,
        now: OffsetDateTime,
    ) -> Result<Vec<ClaimedMessage>, StoreError> {
        // A lease lost with a crash of the database leaves the row to be claimed again.
        let mut tx = self.store.begin_losable().await?;
        let rows = sqlx::query(self.store.dialect().claim_outbox_sql())
            .bind(to_ms(now + lease))
            .bind(to_ms(now))
            .bind(limit)
            .bind(kind)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        claimed(&rows)
    }

    /// Claims the messages to `destination` still held for a provider's HTTP answer (written
    /// with a [`NewOutboxMessage::hold`], never tried, not yet due), so that the answer carries
    /// them. The sender never sees them before they are due; one that is claimed here and then
    /// not recorded is sent the usual way when its lease ends.
    pub async fn claim_held(
        self,
        destination: &str,
        lease: Duration,
        now: OffsetDateTime,
    ) -> Result<Vec<ClaimedMessage>, StoreError> {
        // The conditions sit on the UPDATE itself (no subquery), so PostgreSQL checks them again
        // on a row another claimer held: a row is claimed once. A held row was written due later
        // than it was written; a reply queued meanwhile by another task (a command's outcome,
        // stamped a moment after `now`) is not held and goes the usual way.
        let rows = sqlx::query(concat!(
            "UPDATE outbox SET locked_until = $1, attempts = attempts + 1, updated_at = $2
             WHERE kind IN ($3, $5) AND destination = $4 AND status = 'pending' AND locked_until IS NULL AND ",
            held_row!(""),
            " RETURNING id, tenant_id, command_id, kind, destination, payload, attempts AS attempt"
        ))
        .bind(to_ms(now + lease))
        .bind(to_ms(now))
        .bind(crate::store::MESSAGE_KIND)
        .bind(destination)
        .bind(crate::store::NOTICE_KIND)
        .fetch_all(self.store.pool())
        .await?;
        claimed(&rows)
    }

    /// The effect happened: the row is done.
    pub async fn complete(self, id: Uuid, now: OffsetDateTime) -> Result<(), StoreError> {
        self.settle_claimed(&OutboxSettle::Done(id), now).await
    }

    /// The attempt failed: try again at `retry_at`, or give up (`None`) and keep the error.
    pub async fn fail(
        self,
        id: Uuid,
        error: &str,
        retry_at: Option<OffsetDateTime>,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let settle = match retry_at {
            Some(at) => OutboxSettle::Retry { id, at, error: error.to_owned() },
            None => OutboxSettle::Dead { id, error: error.to_owned() },
        };
        self.settle_claimed(&settle, now).await
    }

    /// Writes a claimed row's fate on its own (with the figures it moves).
    pub async fn settle_claimed(self, settle: &OutboxSettle, now: OffsetDateTime) -> Result<(), StoreError> {
        let mut tx = self.store.begin().await?;
        let moved = settle_outbox(&mut tx, settle, now).await?;
        tx.figures.merge(moved);
        tx.commit().await
    }
}

/// Claimed rows, in the order they were written (`UPDATE ... RETURNING` keeps no order; UUIDv7
/// ids sort by creation).
fn claimed(rows: &[sqlx::any::AnyRow]) -> Result<Vec<ClaimedMessage>, StoreError> {
    let mut claimed: Vec<ClaimedMessage> = decode_all(rows)?;
    claimed.sort_by_key(|m: &ClaimedMessage| m.id);
    Ok(claimed)
}
