//! Transport dedupe: a provider that delivers one message again finds it already recorded.

use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use sqlx::AnyConnection;

use crate::domain::command::Channel;
use crate::domain::command::ExternalId;
use crate::domain::command::TenantId;
use crate::domain::message::{DeliveryStatus, InboundStatus};
use crate::store::Inbound;
use crate::store::StoreError;
use crate::store::conversations::{TurnWrite, write_move};
use crate::store::named::{self, Row, row};
use crate::store::outbox::{NewOutboxMessage, insert_outbox};
use crate::store::rows::{opt_parsed, opt_text, text, to_ms, uuid};

/// An inbound message as a channel adapter parsed it.
#[derive(Debug, Clone)]
pub struct NewInbound {
    pub channel: Channel,
    pub provider_message_id: ExternalId,
    /// None when the message could not be routed to a tenant.
    pub tenant_id: Option<TenantId>,
    pub status: InboundStatus,
    pub payload: Value,
    /// Why a message that cannot be read could not be (stored with it for whoever looks).
    pub detail: Option<String>,
    pub received_at: OffsetDateTime,
}

#[derive(Debug, Clone, PartialEq)]
pub enum InboundOutcome {
    FirstSeen {
        id: Uuid,
    },
    /// Already recorded under `(channel, provider message id)`.
    Duplicate {
        id: Uuid,
        command_id: Option<Uuid>,
    },
}

impl Inbound<'_> {
    /// Keeps what the provider was answered for its message (Twilio's TwiML), for its retries.
    pub async fn record_answer(self, channel: &Channel, id: &ExternalId, answer: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE inbound_messages SET answer = $3 WHERE channel = $1 AND provider_message_id = $2")
            .bind(channel.as_str())
            .bind(id.as_str())
            .bind(answer)
            .execute(self.store.pool())
            .await?;
        Ok(())
    }

    /// What the provider was answered for its message the first time, if it was recorded.
    pub async fn answer_of(self, channel: &Channel, id: &ExternalId) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT answer FROM inbound_messages WHERE channel = $1 AND provider_message_id = $2")
            .bind(channel.as_str())
            .bind(id.as_str())
            .fetch_optional(self.store.pool())
            .await?;
        Ok(row.map(|row| opt_text(&row, "answer")).transpose()?.flatten())
    }

    /// Records a message that starts no command; `replies` are queued only the first time the
    /// message is seen, so a redelivered webhook is never answered twice.
    pub async fn record(
        self,
        message: &NewInbound,
        replies: &[NewOutboxMessage],
    ) -> Result<InboundOutcome, StoreError> {
        self.record_turn(message, replies, None).await
    }

    /// `record`, with what the message does to its sender's conversation (issue #48), written
    /// only the first time it is seen.
    pub async fn record_turn(
        self,
        message: &NewInbound,
        replies: &[NewOutboxMessage],
        turn: Option<TurnWrite<'_>>,
    ) -> Result<InboundOutcome, StoreError> {
        let mut tx = self.store.begin().await?;
        let outcome = insert_inbound(&mut tx, message).await?;
        if let (InboundOutcome::FirstSeen { .. }, Some(turn), Some(tenant)) = (&outcome, turn, &message.tenant_id) {
            let moved = write_move(&mut tx, tenant.as_str(), turn, message.received_at).await?;
            tx.figures.merge(moved);
        }
        if let (InboundOutcome::FirstSeen { .. }, Some(tenant)) = (&outcome, &message.tenant_id) {
            for reply in replies {
                let moved = insert_outbox(&mut tx, tenant.as_str(), None, reply, message.received_at).await?;
                tx.figures.merge(moved);
            }
        }
        tx.commit().await?;
        if matches!(outcome, InboundOutcome::FirstSeen { .. }) {
            self.store.signals().written(replies);
        }
        Ok(outcome)
    }

    /// A provider's delivery status for a message we sent. Statuses only move forward (a late
    /// `delivered` does not undo `read`); returns whether a sent message was found.
    pub async fn record_delivery_status(
        self,
        channel: &Channel,
        provider_message_id: &str,
        status: DeliveryStatus,
        errors: Option<&Value>,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let found = sqlx::query("SELECT id FROM outbound_messages WHERE channel = $1 AND provider_message_id = $2")
            .bind(channel.as_str())
            .bind(provider_message_id)
            .fetch_optional(self.store.pool())
            .await?;
        if found.is_none() {
            return Ok(false);
        }
        sqlx::query(
            "UPDATE outbound_messages SET status = $3, status_rank = $4, errors = COALESCE($5, errors), updated_at = $6
             WHERE channel = $1 AND provider_message_id = $2 AND status_rank < $4",
        )
        .bind(channel.as_str())
        .bind(provider_message_id)
        .bind(status.as_str())
        .bind(status.rank())
        .bind(errors.map(Value::to_string))
        .bind(to_ms(at))
        .execute(self.store.pool())
        .await?;
        Ok(true)
    }

    /// The first message that carried a command: (channel, the message as the provider sent it).
    pub async fn message_of(self, command_id: uuid::Uuid) -> Result<Option<(String, Value)>, StoreError> {
        let row = sqlx::query(
            "SELECT channel, payload FROM inbound_messages WHERE command_id = $1 AND status = 'command'
             ORDER BY received_at LIMIT 1",
        )
        .bind(command_id.to_string())
        .fetch_optional(self.store.pool())
        .await?;
        row.map(|row| Ok((text(&row, "channel")?, crate::store::rows::json(&row, "payload")?))).transpose()
    }

    /// The status of a message we sent, by its provider id.
    pub async fn delivery_status(
        self,
        channel: &Channel,
        provider_message_id: &str,
    ) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT status FROM outbound_messages WHERE channel = $1 AND provider_message_id = $2")
            .bind(channel.as_str())
            .bind(provider_message_id)
            .fetch_optional(self.store.pool())
            .await?;
        row.map(|row| text(&row, "status")).transpose()
    }
}

/// The table of people's messages, one row per provider message.
pub(crate) const INBOUND: &str = "inbound_messages";
/// Transport dedupe: a row that exists already is left alone, and only new ids come back.
pub(crate) const INBOUND_TAIL: &str = "ON CONFLICT (channel, provider_message_id) DO NOTHING RETURNING id";

/// A message row, recorded with the command it starts when that is already known.
pub(crate) fn inbound_row(id: Uuid, message: &NewInbound, command_id: Option<Uuid>, status: InboundStatus) -> Row {
    row![
        "id" => id.to_string(),
        "channel" => message.channel.as_str(),
        "provider_message_id" => message.provider_message_id.as_str(),
        "tenant_id" => message.tenant_id.as_ref().map(|t| t.as_str()),
        "status" => status.as_str(),
        "payload" => message.payload.to_string(),
        "command_id" => command_id.map(|c| c.to_string()),
        "received_at" => to_ms(message.received_at),
        "detail" => message.detail.clone(),
    ]
}

/// Transport dedupe inside the caller's transaction: one row per `(channel, provider message id)`.
pub(crate) async fn insert_inbound(
    conn: &mut AnyConnection,
    message: &NewInbound,
) -> Result<InboundOutcome, StoreError> {
    let id = Uuid::now_v7();
    let row = inbound_row(id, message, None, message.status);
    let inserted = named::insert(conn, INBOUND, vec![row], INBOUND_TAIL).await?;
    if !inserted.is_empty() {
        return Ok(InboundOutcome::FirstSeen { id });
    }
    let row =
        sqlx::query("SELECT id, command_id FROM inbound_messages WHERE channel = $1 AND provider_message_id = $2")
            .bind(message.channel.as_str())
            .bind(message.provider_message_id.as_str())
            .fetch_one(&mut *conn)
            .await?;
    Ok(InboundOutcome::Duplicate { id: uuid(&row, "id")?, command_id: opt_parsed(&row, "command_id")? })
}

/// Links a message to the command it started (or answered), with its final status.
pub(crate) async fn link_inbound(
    conn: &mut AnyConnection,
    inbound_id: Uuid,
    command_id: Uuid,
    status: InboundStatus,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE inbound_messages SET command_id = $2, status = $3 WHERE id = $1")
        .bind(inbound_id.to_string())
        .bind(command_id.to_string())
        .bind(status.as_str())
        .execute(&mut *conn)
        .await?;
    Ok(())
}
