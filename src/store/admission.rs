//! Admitting a new command exactly once per idempotency key (IDS §VIII.A).
//!
//! The reservation is one `INSERT ... ON CONFLICT` on `(tenant_id, idempotency_key)`: whoever
//! inserts (or takes over a record whose window has passed) owns the key, everyone else reads
//! the owner. Both backends make that statement atomic, so concurrent duplicates converge on one
//! command. The whole admission (reservation, command row, its first moves and their evidence)
//! is one transaction.

use std::time::Duration;

use sqlx::AnyConnection;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::CommandEnvelope;
use crate::domain::command::Fingerprint;
use crate::domain::evidence::EvidenceDraft;
use crate::domain::evidence::TraceBindings;
use crate::domain::lifecycle::EvidenceKind;
use crate::domain::lifecycle::Lifecycle;
use crate::domain::lifecycle::State;
use crate::domain::lifecycle::Transition;
use crate::domain::locks::Resource;
use crate::domain::message::InboundStatus;
use crate::domain::outbound::OutboxMessage;
use crate::store::Commands;
use crate::store::Tx;
use crate::store::commands::{CommandRow, insert_command, insert_transitions, transition_row};
use crate::store::confirmations::{NewConfirmation, confirmation_row, insert_confirmation, pending_prompt};
use crate::store::dedupe::settle_dedupe;
use crate::store::evidence::append_all;
use crate::store::inbound::{InboundOutcome, NewInbound, insert_inbound, link_inbound};
use crate::store::locks::take_lock;
use crate::store::named::{self, Row, row};
use crate::store::outbox::{NewOutboxMessage, ReplyTo, insert_outbox, insert_outboxes};

use crate::store::rows::{opt_parsed, parsed, text, to_ms, uuid};
use crate::store::signals::CommittedMove;
use crate::store::{Store, StoreError};

/// A new command with its first moves, decided by the engine.
#[derive(Debug, Clone)]
pub struct AdmissionWrite {
    pub envelope: CommandEnvelope,
    /// The moves from `received`, in order, each with the evidence of its new state.
    pub moves: Vec<(Transition, Vec<EvidenceDraft>)>,
    pub reason_code: Option<String>,
    pub dedupe_window: Duration,
    /// How the duplicate's own delivery is bound in the evidence of a dedupe decision.
    pub trace: std::sync::Arc<TraceBindings>,
    /// The message that carried the command: recorded in the same transaction (transport
    /// dedupe), so that a redelivered webhook creates nothing.
    pub inbound: Option<NewInbound>,
    /// Effects of the new command's first moves (a confirmation prompt, a refusal).
    pub outbox: Vec<NewOutboxMessage>,
    /// The confirmation the first moves ask for (IDS §X), bound to this command's key and actor.
    pub confirmation: Option<NewConfirmation>,
    /// The conversation the command came from, stored with it (its replies go there).
    pub reply_to: Option<ReplyTo>,
    /// What a duplicate is told in that conversation, written in the duplicate's own transaction;
    /// none for callers that answer synchronously.
    pub duplicate_reply: Option<DuplicateReply>,
    pub at: OffsetDateTime,
    /// The W3C `traceparent` of the request that brought the command, when traces are exported.
    pub trace_parent: Option<String>,
    /// What the command changes, held from this transaction until it ends (none when its first
    /// moves end it).
    pub lock: Option<Resource>,
}

impl AdmissionWrite {
    /// The new command's row.
    pub(crate) fn row(&self) -> CommandRow<'_> {
        CommandRow {
            envelope: &self.envelope,
            reason_code: self.reason_code.as_deref(),
            reply_to: self.reply_to.as_ref(),
            trace_parent: self.trace_parent.as_deref(),
            at: self.at,
        }
    }

    /// Its moves from `received`, as observers are told of them once committed.
    pub(crate) fn committed_moves(&self) -> impl Iterator<Item = CommittedMove<'_>> {
        self.moves.iter().map(|(transition, _)| CommittedMove {
            command_id: self.envelope.command_id,
            transition,
            trace_parent: self.trace_parent.as_deref(),
            decided_at: self.at,
        })
    }
}

/// Chooses the reply to a duplicate (IDS §IX). The service layer decides what is said; the store
/// gives it the facts: where to reply, what the duplicate came to, and the prompt of the command
/// when it still waits for its confirmation.
pub type DuplicateReply = fn(&ReplyTo, &Admitted, Option<OutboxMessage>) -> Option<NewOutboxMessage>;

/// The existing command a duplicate was answered from.
#[derive(Debug, Clone, PartialEq)]
pub struct DuplicateOf {
    pub command_id: Uuid,
    pub state: State,
    /// The artifact that records the outcome being replayed, once terminal.
    pub outcome_ref: Option<Uuid>,
    /// The `dedupe.decided` artifact written for this duplicate.
    pub evidence_id: Uuid,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Admitted {
    /// First seen: the command exists now.
    New { command_id: Uuid, lifecycle: Lifecycle, version: i64 },
    /// The same command, already finished: replay its outcome (IDS §IX.A).
    Replayed(DuplicateOf),
    /// The same command, still under way: answer "in progress" (IDS §IX.B).
    InProgress(DuplicateOf),
    /// The key is taken by a different command (IDS §VIII.D); nothing was created.
    Conflict { existing_command_id: Uuid, existing_fingerprint: Fingerprint, evidence_id: Uuid },
    /// The carrying message was seen before (a redelivered webhook): nothing was written.
    Redelivered { inbound_id: Uuid, command_id: Option<Uuid> },
    /// What the command changes is held by `holder` (another command under way): nothing was
    /// written; the engine decides again, knowing it.
    Locked { holder: Uuid },
}

impl Commands<'_> {
    /// Admits one command: through the admission writer (grouped with whatever else is waiting)
    /// when one runs, else at once.
    pub async fn admit(self, write: AdmissionWrite) -> Result<Admitted, StoreError> {
        let Some(queue) = self.store.admission_writer() else {
            return self.store.admit_now(&write).await;
        };
        match crate::store::writer::submit(queue, write).await {
            Ok(answer) => answer,
            // Never a 503 forever because of one bug: without a writer, admit alone.
            Err(crate::store::writer::WriterGone::Before(write)) => {
                tracing::error!("the admission writer stopped; admitting one at a time");
                self.store.admit_now(&write).await
            }
            Err(crate::store::writer::WriterGone::Full) => {
                metrics::counter!("chatgate_admissions_shed_total").increment(1);
                Err(StoreError::Unavailable("too many requests wait for the database; retry shortly".into()))
            }
            // It took the write and died: whether it committed is unknown, so the caller retries
            // (and the message row turns a committed write into a redelivery).
            Err(crate::store::writer::WriterGone::During) => {
                Err(StoreError::Unavailable("the admission writer stopped during the write".into()))
            }
        }
    }
}

impl Store {
    /// Admits one command in a transaction of its own.
    pub(crate) async fn admit_now(&self, write: &AdmissionWrite) -> Result<Admitted, StoreError> {
        let envelope = &write.envelope;
        let tenant = envelope.tenant_id.as_str();
        let mut tx = self.begin().await?;

        let inbound_id = match &write.inbound {
            None => None,
            Some(message) => match insert_inbound(&mut tx, message).await? {
                InboundOutcome::FirstSeen { id } => Some(id),
                InboundOutcome::Duplicate { id, command_id } => {
                    tx.rollback().await?;
                    return Ok(Admitted::Redelivered { inbound_id: id, command_id });
                }
            },
        };

        if envelope.idempotency_class.reserves_key() && !reserve(&mut tx, write).await? {
            return self.answer_repeat(tx, write, inbound_id).await;
        }

        if let Some(resource) = &write.lock
            && let Some(holder) = take_lock(&mut tx, tenant, resource, envelope.command_id, write.at).await?
        {
            tx.rollback().await?;
            return Ok(Admitted::Locked { holder });
        }
        let Some((last, _)) = write.moves.last() else {
            return Err(StoreError::Config("an admission needs at least its canonicalize move".into()));
        };
        let lifecycle = last.after(envelope.command_kind);
        let version = write.moves.len() as i64;
        insert_command(&mut tx, &write.row(), lifecycle, version).await?;
        if let Some(row) = confirmation_row_of(write) {
            insert_confirmation(&mut tx, row).await?;
        }
        insert_transitions(&mut tx, transition_rows(write)).await?;
        let drafts: Vec<EvidenceDraft> = write.moves.iter().flat_map(|(_, drafts)| drafts.iter().cloned()).collect();
        let last_evidence = append_all(&mut tx, tenant, &drafts, write.at).await?.last().copied();
        settle_dedupe(&mut tx, envelope.command_id, lifecycle.state, last_evidence, write.at).await?;
        if let Some(inbound_id) = inbound_id {
            link_inbound(&mut tx, inbound_id, envelope.command_id, InboundStatus::Command).await?;
        }
        let outbox = write.outbox.iter().map(|message| (tenant, Some(envelope.command_id), message, write.at));
        let moved = insert_outboxes(&mut tx, outbox.collect()).await?;
        tx.figures.merge(moved);
        tx.commit().await?;
        self.moved(write.committed_moves());
        self.signals().written(&write.outbox);
        Ok(Admitted::New { command_id: envelope.command_id, lifecycle, version })
    }
}

impl Store {
    /// A write whose key is taken: the answer its earlier command gives, recorded with the message
    /// that repeated it (so that a redelivery is answered alike) and, in a chat, told to the person.
    async fn answer_repeat(
        &self,
        mut tx: crate::store::Tx,
        write: &AdmissionWrite,
        inbound_id: Option<Uuid>,
    ) -> Result<Admitted, StoreError> {
        let tenant = write.envelope.tenant_id.as_str();
        let answer = answer_duplicate(&mut tx, write).await?;
        if let (Some(inbound_id), Admitted::Replayed(d) | Admitted::InProgress(d)) = (inbound_id, &answer) {
            link_inbound(&mut tx, inbound_id, d.command_id, InboundStatus::Duplicate).await?;
        }
        let in_chat = if let (Some(reply_to), Some(choose)) = (&write.reply_to, write.duplicate_reply) {
            answer_duplicate_in_chat(&mut tx, tenant, (reply_to, choose), &answer, write.at).await?;
            true
        } else {
            false
        };
        tx.commit().await?;
        if in_chat {
            self.signals().of(crate::store::MESSAGE_KIND).notify_one();
        }
        Ok(answer)
    }
}

async fn append_one(
    conn: &mut AnyConnection,
    chain: &str,
    draft: &EvidenceDraft,
    at: OffsetDateTime,
) -> Result<Uuid, StoreError> {
    let ids = append_all(conn, chain, std::slice::from_ref(draft), at).await?;
    ids.first().copied().ok_or_else(|| StoreError::Corrupt("an append returned no artifact".into()))
}

/// The confirmation row of a new command, if its first moves ask for one.
pub(crate) fn confirmation_row_of(write: &AdmissionWrite) -> Option<Row> {
    let e = &write.envelope;
    write
        .confirmation
        .as_ref()
        .map(|c| confirmation_row(c, &e.tenant_id, e.command_id, &e.idempotency_key, &e.actor_id, write.at))
}

/// Answers a duplicate in the conversation it came from, with the reply `choose` picks.
async fn answer_duplicate_in_chat(
    conn: &mut Tx,
    tenant: &str,
    (reply_to, choose): (&ReplyTo, DuplicateReply),
    answer: &Admitted,
    at: OffsetDateTime,
) -> Result<(), StoreError> {
    let about = match answer {
        Admitted::Replayed(d) | Admitted::InProgress(d) => Some(d.command_id),
        _ => None,
    };
    let prompt = match answer {
        Admitted::InProgress(d) if d.state == State::ConfirmationRequired => pending_prompt(conn, d.command_id).await?,
        _ => None,
    };
    if let Some(reply) = choose(reply_to, answer, prompt) {
        let moved = insert_outbox(conn, tenant, about, &reply, at).await?;
        conn.figures.merge(moved);
    }
    Ok(())
}

/// The moves of a new command as transition rows, versions 1, 2, ...
pub(crate) fn transition_rows(write: &AdmissionWrite) -> Vec<Row> {
    (1..)
        .zip(&write.moves)
        .map(|(version, (t, _))| transition_row(write.envelope.command_id, version, t, None, write.at))
        .collect()
}

/// Takes the key, or takes over a record whose window has passed and whose command finished;
/// the rows that come back are the keys this statement now owns.
pub(crate) const RESERVE_TAIL: &str = "ON CONFLICT (tenant_id, idempotency_key) DO UPDATE SET
         command_id = excluded.command_id, fingerprint = excluded.fingerprint, status = 'in_progress',
         outcome_ref = NULL, created_at = excluded.created_at, updated_at = excluded.updated_at,
         ttl_expires_at = excluded.ttl_expires_at
     WHERE dedupe_records.ttl_expires_at <= excluded.created_at AND dedupe_records.status <> 'in_progress'
     RETURNING command_id";

/// A new command's claim on its key in `dedupe_records` (written with [`RESERVE_TAIL`]).
pub(crate) fn reservation_row(write: &AdmissionWrite) -> Row {
    let e = &write.envelope;
    let now = to_ms(write.at);
    let window = i64::try_from(write.dedupe_window.as_millis()).unwrap_or(i64::MAX);
    row![
        "tenant_id" => e.tenant_id.as_str(),
        "idempotency_key" => e.idempotency_key.as_str(),
        "command_id" => e.command_id.to_string(),
        "fingerprint" => e.fingerprint.as_str(),
        "status" => "in_progress",
        "outcome_ref" => None::<String>,
        "created_at" => now,
        "updated_at" => now,
        "ttl_expires_at" => now.saturating_add(window),
    ]
}

/// The table a key is claimed in.
pub(crate) const RESERVATIONS: &str = "dedupe_records";

/// Whether this command now owns its key.
async fn reserve(conn: &mut AnyConnection, write: &AdmissionWrite) -> Result<bool, StoreError> {
    let owner = named::insert(conn, RESERVATIONS, vec![reservation_row(write)], RESERVE_TAIL).await?;
    match owner.first() {
        Some(row) => Ok(uuid(row, "command_id")? == write.envelope.command_id),
        None => Ok(false),
    }
}

/// Answers a command whose key is taken, and records the decision (IDS §XII).
pub(crate) async fn answer_duplicate(conn: &mut AnyConnection, write: &AdmissionWrite) -> Result<Admitted, StoreError> {
    let e = &write.envelope;
    let tenant = e.tenant_id.as_str();
    let record = sqlx::query(
        "SELECT d.command_id, d.fingerprint, d.outcome_ref, c.state FROM dedupe_records d
         JOIN commands c ON c.command_id = d.command_id
         WHERE d.tenant_id = $1 AND d.idempotency_key = $2",
    )
    .bind(tenant)
    .bind(e.idempotency_key.as_str())
    .fetch_one(&mut *conn)
    .await?;
    let existing_id = uuid(&record, "command_id")?;
    let existing_fingerprint = Fingerprint::from_stored(text(&record, "fingerprint")?);
    let outcome_ref: Option<Uuid> = opt_parsed(&record, "outcome_ref")?;
    let state: State = parsed(&record, "state")?;
    let key = e.idempotency_key.as_str();

    if existing_fingerprint != e.fingerprint {
        // The new command is refused and never exists: the decision (IDS §XII's
        // `conflict_rejected`) is evidence on the command that holds the key, where an operator
        // or an auditor looking at that command finds it, with both fingerprints.
        let draft = EvidenceDraft::new(EvidenceKind::DedupeDecided, existing_id, write.trace.clone())
            .stage(state)
            .reason("idempotency_conflict")
            .decision(serde_json::json!({
                "dedupe": "conflict_rejected",
                "idempotency_key": key,
                "attempted_command_id": e.command_id,
                "existing_command_id": existing_id,
                "existing_fingerprint": existing_fingerprint,
                "attempted_fingerprint": e.fingerprint,
            }));
        let evidence_id = append_one(conn, tenant, &draft, write.at).await?;
        return Ok(Admitted::Conflict { existing_command_id: existing_id, existing_fingerprint, evidence_id });
    }

    let decision = if state.is_terminal() { "duplicate_replayed" } else { "duplicate_in_progress" };
    let draft = EvidenceDraft::new(EvidenceKind::DedupeDecided, existing_id, write.trace.clone())
        .stage(state)
        .decision(serde_json::json!({
            "dedupe": decision,
            "idempotency_key": key,
            "attempted_command_id": e.command_id,
            "outcome_ref": outcome_ref,
        }));
    let evidence_id = append_one(conn, tenant, &draft, write.at).await?;
    let duplicate = DuplicateOf { command_id: existing_id, state, outcome_ref, evidence_id };
    Ok(if state.is_terminal() { Admitted::Replayed(duplicate) } else { Admitted::InProgress(duplicate) })
}
