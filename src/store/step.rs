//! A conversational step written as one transaction: the message that caused it (transport
//! dedupe), the confirmation it settles, the command's moves, the evidence of the step itself and
//! the messages it sends. Either all of it happened or none of it, so a redelivered answer or a
//! crash in the middle can never confirm twice or leave a prompt answered without its move.

use time::OffsetDateTime;
use uuid::Uuid;

use super::commands::{CommittedTransition, TransitionWrite, apply_transition};
use super::confirmations::{SettleConfirmation, settle_confirmation};
use super::evidence::append_all;
use super::inbound::{InboundOutcome, NewInbound, insert_inbound, link_inbound};
use super::outbox::{NewOutboxMessage, insert_outbox};
use super::{Store, StoreError};
use crate::command::TenantId;
use crate::evidence::EvidenceDraft;

#[derive(Debug, Clone)]
pub struct StepWrite {
    pub tenant_id: TenantId,
    /// The message that caused the step: recorded (and linked to `command_id`) in the same
    /// transaction, so that its redelivery finds the step done.
    pub inbound: Option<NewInbound>,
    /// The command the step is about, if any.
    pub command_id: Option<Uuid>,
    /// A pending confirmation this step answers or expires; the step fails as stale if it was
    /// settled meanwhile.
    pub settle: Option<SettleConfirmation>,
    /// Moves of `command_id`, in order, each decided on the version the one before leaves.
    pub moves: Vec<TransitionWrite>,
    /// The step's own evidence (an answer accepted or refused), written before the moves'.
    pub evidence: Vec<EvidenceDraft>,
    /// Messages the step sends besides those of its moves.
    pub outbox: Vec<NewOutboxMessage>,
    pub at: OffsetDateTime,
}

#[derive(Debug, Clone, PartialEq)]
pub enum StepOutcome {
    Committed {
        moves: Vec<CommittedTransition>,
        evidence_ids: Vec<Uuid>,
    },
    /// The carrying message was recorded before: nothing was written.
    Redelivered {
        command_id: Option<Uuid>,
    },
    /// The confirmation or the command changed since the step was decided: nothing was written;
    /// decide again on fresh state.
    Stale,
}

impl Store {
    pub async fn commit_step(&self, step: &StepWrite) -> Result<StepOutcome, StoreError> {
        let mut tx = self.begin().await?;
        if let Some(message) = &step.inbound {
            match insert_inbound(&mut tx, message).await? {
                InboundOutcome::FirstSeen { id } => {
                    if let Some(command_id) = step.command_id {
                        link_inbound(&mut tx, id, command_id, &message.status).await?;
                    }
                }
                InboundOutcome::Duplicate { command_id, .. } => {
                    tx.rollback().await?;
                    return Ok(StepOutcome::Redelivered { command_id });
                }
            }
        }
        if let Some(settle) = &step.settle
            && !settle_confirmation(&mut tx, settle, step.at).await?
        {
            tx.rollback().await?;
            return Ok(StepOutcome::Stale);
        }
        let evidence_ids = append_all(&mut tx, step.tenant_id.as_str(), &step.evidence, step.at).await?;
        let mut moves = Vec::with_capacity(step.moves.len());
        for write in &step.moves {
            match apply_transition(&mut tx, write).await? {
                Some(committed) => moves.push(committed),
                None => {
                    tx.rollback().await?;
                    return Ok(StepOutcome::Stale);
                }
            }
        }
        for message in &step.outbox {
            insert_outbox(&mut tx, step.tenant_id.as_str(), step.command_id, message, step.at).await?;
        }
        tx.commit().await?;
        Ok(StepOutcome::Committed { moves, evidence_ids })
    }
}
