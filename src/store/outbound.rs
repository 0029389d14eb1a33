//! What happened to a message chatgate sent to a person: accepted by the provider (with its id,
//! so that status webhooks find it) or given up. Each outcome is written with the outbox row's
//! settlement and its evidence in one transaction.

use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::evidence::EvidenceDraft;
use crate::store::Outbox;
use crate::store::StoreError;
use crate::store::evidence::append_by_chain;
use crate::store::named::{self, Row, row};
use crate::store::outbox::update_waiting;
use crate::store::rows::{Param, to_ms};

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
        self.record_all(&[Recorded::Sent(record.clone())], now).await
    }

    /// The provider refused the message for good, or every attempt failed: keep why.
    pub async fn record_given_up(
        self,
        record: &OutboundRecord,
        error: &str,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        self.record_all(&[Recorded::GivenUp { record: record.clone(), error: error.to_owned() }], now).await
    }

    /// What became of several messages (a sender's batch), in one transaction with a constant
    /// number of statements.
    pub async fn record_all(self, recorded: &[Recorded], now: OffsetDateTime) -> Result<(), StoreError> {
        if recorded.is_empty() {
            return Ok(());
        }
        let mut tx = self.store.begin().await?;
        let messages = recorded.iter().map(|r| r.message_row(now)).collect();
        named::insert(&mut tx, "outbound_messages", messages, "ON CONFLICT (id) DO NOTHING").await?;
        let rows = recorded.iter().map(|r| r.outbox_row(now)).collect();
        let set = "status = v.column2, locked_until = NULL, last_error = COALESCE(v.column3, outbox.last_error), \
             updated_at = v.column4";
        let moved = update_waiting(&mut tx, set, 4, rows).await?;
        tx.figures.merge(moved);
        let drafts = recorded.iter().map(|r| (r.record().tenant_id.as_str(), (), &r.record().evidence));
        append_by_chain(&mut tx, drafts.collect(), now).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// A message's outcome, to record.
#[derive(Debug, Clone)]
pub enum Recorded {
    /// The provider took it.
    Sent(OutboundRecord),
    /// Refused for good, or every attempt failed.
    GivenUp { record: OutboundRecord, error: String },
}

impl Recorded {
    pub fn record(&self) -> &OutboundRecord {
        match self {
            Self::Sent(record) | Self::GivenUp { record, .. } => record,
        }
    }

    fn message_row(&self, now: OffsetDateTime) -> Row {
        let record = self.record();
        // The rank orders statuses (`queued` 0 ... `failed` 4): a late status never goes back.
        let (status, rank) = match self {
            Self::Sent(_) => ("queued", 0),
            Self::GivenUp { .. } => ("failed", 4),
        };
        row![
            "id" => record.outbox_id.to_string(),
            "tenant_id" => record.tenant_id.as_str(),
            "channel" => record.channel.as_str(),
            "provider_message_id" => record.provider_message_id.clone(),
            "command_id" => record.command_id.map(|id| id.to_string()),
            "recipient" => record.recipient.as_str(),
            "status" => status,
            "status_rank" => rank,
            "errors" => record.errors.as_ref().map(Value::to_string),
            "created_at" => to_ms(now),
            "updated_at" => to_ms(now),
        ]
    }

    fn outbox_row(&self, now: OffsetDateTime) -> Vec<Param> {
        let (status, error) = match self {
            Self::Sent(_) => ("done", None),
            Self::GivenUp { error, .. } => ("dead", Some(error.as_str())),
        };
        vec![self.record().outbox_id.to_string().into(), status.into(), error.into(), to_ms(now).into()]
    }
}
