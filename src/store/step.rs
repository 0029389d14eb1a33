//! A conversational step written as one transaction: the message that caused it (transport
//! dedupe), the confirmation it settles, the command's moves, the evidence of the step itself and
//! the messages it sends. Either all of it happened or none of it, so a redelivered answer or a
//! crash in the middle can never confirm twice or leave a prompt answered without its move. A
//! move alone (`commit_transition`) is written here too, and every such transaction appends its
//! evidence last (`append_and_settle`, which the worker's batches use as well).

use sqlx::AnyConnection;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::TenantId;
use crate::domain::evidence::EvidenceDraft;
use crate::domain::locks::Resource;
use crate::store::StoreError;
use crate::store::approvals::{ApprovalWrite, write_approval};
use crate::store::commands::{
    CommittedTransition, TransitionWrite, insert_transitions, load_command, move_command, transition_row,
};
use crate::store::confirmations::{SettleConfirmation, settle_confirmation};
use crate::store::dedupe::{lock_dedupes, settle_dedupe, settle_dedupes};
use crate::store::deliveries::{DeliveryChange, apply_delivery};
use crate::store::evidence::{append_all, append_by_chain};
use crate::store::figures::Moves;
use crate::store::inbound::{InboundOutcome, NewInbound, insert_inbound, link_inbound};
use crate::store::locks::take_lock;
use crate::store::outbox::{NewOutboxMessage, OutboxSettle, insert_outboxes, settle_outbox};
use crate::store::previews::{PromptWrite, write_prompt};
use crate::store::tokens::{ConsumedToken, consume_token};
use crate::store::{Commands, Tx};

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
    /// A single-use token this step uses up (a step-up proof's `jti`).
    pub consume: Option<ConsumedToken>,
    /// An approval this step opens (its command starts waiting) or settles (the step fails as
    /// stale if it was settled meanwhile).
    pub approval: Option<ApprovalWrite>,
    /// A dispatch's transport record, moved with the command.
    pub delivery: Option<DeliveryChange>,
    /// What becomes of the outbox row the step worked on.
    pub outbox_row: Option<OutboxSettle>,
    /// A confirmation the step opens for `command_id`, with the preview its prompt shows.
    pub prompt: Option<PromptWrite>,
    /// A resource `command_id` takes now (its turn came): the step fails as `Locked` if another
    /// command holds it.
    pub take_lock: Option<Resource>,
    pub at: OffsetDateTime,
}

impl StepWrite {
    /// A step about `command_id` with nothing in it yet.
    pub fn new(tenant_id: TenantId, command_id: Option<Uuid>, at: OffsetDateTime) -> Self {
        Self {
            tenant_id,
            inbound: None,
            command_id,
            settle: None,
            moves: vec![],
            evidence: vec![],
            outbox: vec![],
            consume: None,
            approval: None,
            delivery: None,
            outbox_row: None,
            prompt: None,
            take_lock: None,
            at,
        }
    }
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
    /// The single-use token was used before: nothing was written.
    TokenUsed,
    /// The resource the step would take is held by `holder`: nothing was written.
    Locked {
        holder: Uuid,
    },
}

/// What a step settles before its moves — the confirmation it answers, the token it uses up, the
/// approval it opens or settles, the resource it takes — each a compare-and-set; the outcome when
/// one was taken already.
async fn settle_first(tx: &mut Tx, step: &StepWrite) -> Result<Option<StepOutcome>, StoreError> {
    if let Some(settle) = &step.settle
        && !settle_confirmation(tx, settle, step.at).await?
    {
        return Ok(Some(StepOutcome::Stale));
    }
    if let Some(token) = &step.consume
        && !consume_token(tx, token, step.command_id, step.at).await?
    {
        return Ok(Some(StepOutcome::TokenUsed));
    }
    if let Some(approval) = &step.approval
        && !write_approval(tx, (&step.tenant_id, step.command_id), approval, step.at).await?
    {
        return Ok(Some(StepOutcome::Stale));
    }
    if let (Some(resource), Some(command_id)) = (&step.take_lock, step.command_id)
        && let Some(holder) = take_lock(tx, step.tenant_id.as_str(), resource, command_id, step.at).await?
    {
        return Ok(Some(StepOutcome::Locked { holder }));
    }
    Ok(None)
}

impl Commands<'_> {
    pub async fn commit_step(self, step: &StepWrite) -> Result<StepOutcome, StoreError> {
        let mut tx = self.store.begin().await?;
        if let Some(message) = &step.inbound {
            match insert_inbound(&mut tx, message).await? {
                InboundOutcome::FirstSeen { id } => {
                    if let Some(command_id) = step.command_id {
                        link_inbound(&mut tx, id, command_id, message.status).await?;
                    }
                }
                InboundOutcome::Duplicate { command_id, .. } => {
                    tx.rollback().await?;
                    return Ok(StepOutcome::Redelivered { command_id });
                }
            }
        }
        if let Some(refused) = settle_first(&mut tx, step).await? {
            tx.rollback().await?;
            return Ok(refused);
        }
        if let Some(change) = &step.delivery {
            if !apply_delivery(&mut tx, change, step.at).await? {
                tx.rollback().await?;
                return Ok(StepOutcome::Stale);
            }
            // An execution that stops waiting another way than its approval's settling (the
            // executor gave up, its TTL ran out) closes the approval it waited for.
            if let (true, Some(command_id)) = (change.stops_waiting(), step.command_id) {
                crate::store::approvals::close_approvals(&mut tx, &[(command_id, step.at)]).await?;
            }
            tx.figures.merge(Moves::of_deliveries([(change, step.at)]));
        }
        lock_dedupes(&mut tx, step.moves.iter().map(TransitionWrite::ends_in)).await?;
        for write in &step.moves {
            if !apply_move(&mut tx, write).await? {
                tx.rollback().await?;
                return Ok(StepOutcome::Stale);
            }
        }
        if let (Some(prompt), Some(command_id)) = (&step.prompt, step.command_id) {
            write_prompt(&mut tx, (&step.tenant_id, command_id), prompt, step.at).await?;
        }
        let outbox = step.outbox.iter().map(|message| (step.tenant_id.as_str(), step.command_id, message, step.at));
        let moved = insert_outboxes(&mut tx, outbox.collect()).await?;
        tx.figures.merge(moved);
        if let Some(row) = &step.outbox_row {
            let moved = settle_outbox(&mut tx, row, step.at).await?;
            tx.figures.merge(moved);
        }
        let (evidence_ids, moves) = append_and_settle(&mut tx, &[step]).await?.pop().unwrap_or_default();
        tx.commit().await?;
        self.store.moved(step.moves.iter().map(TransitionWrite::committed));
        self.store.signals().written(step.outbox.iter().chain(step.moves.iter().flat_map(|m| &m.outbox)));
        Ok(StepOutcome::Committed { moves, evidence_ids })
    }
}

/// Each step's own evidence and its moves' (see [`append_evidence`]), then the dedupe records
/// the moves settle, which name their last artifacts. A step's transaction does this last: the
/// chain's head is locked from the append to the commit, and on PostgreSQL every other
/// transaction of the tenant waits for it.
pub(crate) async fn append_and_settle(
    tx: &mut AnyConnection,
    steps: &[&StepWrite],
) -> Result<Vec<(Vec<Uuid>, Vec<CommittedTransition>)>, StoreError> {
    let evidence = append_evidence(tx, steps).await?;
    let settled: Vec<_> = steps
        .iter()
        .zip(&evidence)
        .flat_map(|(step, (_, moves))| {
            step.moves.iter().zip(moves).map(|(write, committed)| {
                (write.command_id, write.transition.to, committed.evidence_ids.last().copied(), write.at)
            })
        })
        .collect();
    settle_dedupes(tx, &settled).await?;
    Ok(evidence)
}

/// Each step's own evidence and its moves', one chain per tenant, in the order one step at a
/// time would write them: per step, its own artifact ids and each move's committed version.
async fn append_evidence(
    tx: &mut AnyConnection,
    steps: &[&StepWrite],
) -> Result<Vec<(Vec<Uuid>, Vec<CommittedTransition>)>, StoreError> {
    // Whose each artifact is: (step, `None` for the step's own, `Some(move)`).
    let mut drafts = vec![];
    for (i, step) in steps.iter().enumerate() {
        drafts.extend(step.evidence.iter().map(|d| (step.tenant_id.as_str(), (i, None), d)));
        for (m, write) in step.moves.iter().enumerate() {
            drafts.extend(write.evidence.iter().map(|d| (write.tenant_id.as_str(), (i, Some(m)), d)));
        }
    }
    let mut outcomes: Vec<(Vec<Uuid>, Vec<CommittedTransition>)> = steps
        .iter()
        .map(|s| {
            let moves =
                s.moves.iter().map(|m| CommittedTransition { version: m.expected_version + 1, evidence_ids: vec![] });
            (vec![], moves.collect())
        })
        .collect();
    let at = steps.first().map_or(OffsetDateTime::UNIX_EPOCH, |s| s.at);
    for ((step, place), id) in append_by_chain(tx, drafts, at).await? {
        match place {
            None => outcomes[step].0.push(id),
            Some(m) => outcomes[step].1[m].evidence_ids.push(id),
        }
    }
    Ok(outcomes)
}

impl Commands<'_> {
    /// Persists a decided move, or reports that the command moved on since it was read.
    pub async fn commit_transition(self, write: &TransitionWrite) -> Result<CommittedTransition, StoreError> {
        let mut tx = self.store.begin().await?;
        if let Some(committed) = apply_transition(&mut tx, write).await? {
            tx.commit().await?;
            self.store.moved([write.committed()]);
            self.store.signals().written(&write.outbox);
            return Ok(committed);
        }
        let current = load_command(&mut tx, &write.tenant_id, write.command_id).await?;
        tx.rollback().await?;
        Err(match current {
            None => StoreError::CommandNotFound(write.command_id),
            Some(c) => StoreError::StaleVersion {
                command_id: write.command_id,
                expected: write.expected_version,
                actual: c.version,
                state: c.lifecycle.state,
            },
        })
    }
}

/// One decided move inside the caller's transaction: [`apply_move`], then its evidence and the
/// dedupe settlement, last (the tenant's chain head is locked from the append to the commit).
/// `None` (with nothing written) when the command is no longer where the decision found it.
async fn apply_transition(conn: &mut Tx, write: &TransitionWrite) -> Result<Option<CommittedTransition>, StoreError> {
    lock_dedupes(conn, [write.ends_in()]).await?;
    if !apply_move(conn, write).await? {
        return Ok(None);
    }
    let (to, version) = (write.transition.to, write.expected_version + 1);
    let evidence_ids = append_all(conn, write.tenant_id.as_str(), &write.evidence, write.at).await?;
    settle_dedupe(conn, write.command_id, to, evidence_ids.last().copied(), write.at).await?;
    Ok(Some(CommittedTransition { version, evidence_ids }))
}

/// A decided move but its evidence and dedupe settlement (which its caller writes last, after
/// locking the records with `lock_dedupes` first): compare-and-swap on the version, the
/// transition row, the locks it releases, its outbox rows. `false` (with nothing written) when
/// the command is no longer where the decision found it.
async fn apply_move(conn: &mut Tx, write: &TransitionWrite) -> Result<bool, StoreError> {
    if !move_command(conn, std::slice::from_ref(write)).await? {
        return Ok(false);
    }
    let (t, version) = (&write.transition, write.expected_version + 1);
    let row = transition_row(write.command_id, version, t, write.reason_code.as_deref(), write.at);
    insert_transitions(conn, vec![row]).await?;
    if let Some(ended) = write.releases() {
        crate::store::locks::release_locks(conn, &[ended]).await?;
    }
    let outbox =
        write.outbox.iter().map(|message| (write.tenant_id.as_str(), Some(write.command_id), message, write.at));
    let moved = insert_outboxes(conn, outbox.collect()).await?;
    conn.figures.merge(moved);
    Ok(true)
}
