//! Transport dedupe: a provider that delivers one message again finds it already recorded.

use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use super::rows::{opt_parsed, to_ms, uuid};
use super::{Store, StoreError};
use crate::command::{Channel, ExternalId, TenantId};

/// An inbound message as a channel adapter parsed it.
#[derive(Debug, Clone)]
pub struct NewInbound {
    pub channel: Channel,
    pub provider_message_id: ExternalId,
    /// None when the message could not be routed to a tenant.
    pub tenant_id: Option<TenantId>,
    pub status: String,
    pub payload: Value,
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

impl Store {
    pub async fn record_inbound(&self, message: &NewInbound) -> Result<InboundOutcome, StoreError> {
        let mut tx = self.begin().await?;
        let id = Uuid::now_v7();
        let inserted = sqlx::query(
            "INSERT INTO inbound_messages (id, channel, provider_message_id, tenant_id, status, payload, received_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (channel, provider_message_id) DO NOTHING
             RETURNING id",
        )
        .bind(id.to_string())
        .bind(message.channel.as_str())
        .bind(message.provider_message_id.as_str())
        .bind(message.tenant_id.as_ref().map(|t| t.as_str()))
        .bind(&message.status)
        .bind(message.payload.to_string())
        .bind(to_ms(message.received_at))
        .fetch_optional(&mut *tx)
        .await?;
        let outcome = match inserted {
            Some(_) => InboundOutcome::FirstSeen { id },
            None => {
                let row = sqlx::query(
                    "SELECT id, command_id FROM inbound_messages WHERE channel = $1 AND provider_message_id = $2",
                )
                .bind(message.channel.as_str())
                .bind(message.provider_message_id.as_str())
                .fetch_one(&mut *tx)
                .await?;
                InboundOutcome::Duplicate { id: uuid(&row, "id")?, command_id: opt_parsed(&row, "command_id")? }
            }
        };
        tx.commit().await?;
        Ok(outcome)
    }
}
