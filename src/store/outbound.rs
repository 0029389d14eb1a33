//! What happened to a message chatgate sent to a person: accepted by the provider (with its id,
//! so that status webhooks find it) or given up. Each outcome is written with the outbox row's
//! settlement and its evidence in one transaction.

use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::evidence::EvidenceDraft;
use crate::store::Outbox;
use crate::store::evidence::append_all;
use crate::store::rows::to_ms;
use crate::store::{Store, StoreError};

/// A message the provider took or refused for good.
#[derive(Debug, Clone)]
pub struct OutboundRecord {
    /// The outbox row it came from.
    pub outbox_id: Uuid,
    pub tenant_id: String,
    pub channel: String,
    pub command_id: Option<Uuid>,
    pub recipient: String,
    /// The provider's id (`wamid`), when it took the message.
    pub provider_message_id: Option<String>,
    /// The provider's error, when it refused it.
    pub errors: Option<Value>,
    pub evidence: EvidenceDraft,
}

impl Outbox<'_> {
    /// The provider took the message: remember its id (status `queued` until the provider's
    /// statuses say more), close the outbox row, write the evidence.
    pub async fn record_sent(self, record: &OutboundRecord, now: OffsetDateTime) -> Result<(), StoreError> {
        self.store.record_outbound(record, "queued", 0, "done", None, now).await
    }

    /// The provider refused the message for good, or every attempt failed: keep why.
    pub async fn record_given_up(
        self,
        record: &OutboundRecord,
        error: &str,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        self.store.record_outbound(record, "failed", 4, "dead", Some(error), now).await
    }
}

impl Store {
    async fn record_outbound(
        &self,
        record: &OutboundRecord,
        status: &str,
        rank: i64,
        outbox_status: &str,
        error: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        sqlx::query(
            "INSERT INTO outbound_messages (id, tenant_id, channel, provider_message_id, command_id, recipient, status,
                 status_rank, errors, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(record.outbox_id.to_string())
        .bind(record.tenant_id.as_str())
        .bind(record.channel.as_str())
        .bind(record.provider_message_id.as_deref())
        .bind(record.command_id.map(|id| id.to_string()))
        .bind(record.recipient.as_str())
        .bind(status)
        .bind(rank)
        .bind(record.errors.as_ref().map(Value::to_string))
        .bind(to_ms(now))
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE outbox SET status = $2, locked_until = NULL, last_error = COALESCE($3, last_error), updated_at = $4
             WHERE id = $1",
        )
        .bind(record.outbox_id.to_string())
        .bind(outbox_status)
        .bind(error)
        .bind(to_ms(now))
        .execute(&mut *tx)
        .await?;
        append_all(&mut tx, &record.tenant_id, std::slice::from_ref(&record.evidence), now).await?;
        tx.commit().await?;
        Ok(())
    }
}
