//! Group commit for admissions: many new commands in one transaction, in a constant number of
//! statements. Under load each webhook costs a fraction of a round trip instead of a dozen.
//!
//! Only the common case is batched: every carrying message new, every key free. Anything else
//! (a redelivery, a duplicate key, a race with another instance) makes the batch step aside and
//! each write goes through [`Store::admit_now`], the one-at-a-time path, which the conformance
//! suite proves. Being fast never changes an answer.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::AnyConnection;
use uuid::Uuid;

use crate::domain::lifecycle::Lifecycle;
use crate::domain::message::InboundStatus;
use crate::store::Commands;
use crate::store::admission::{
    AdmissionWrite, Admitted, RESERVATIONS, RESERVE_TAIL, confirmation_row_of, reservation_row, transition_rows,
};
use crate::store::commands::{command_row, insert_transitions};
use crate::store::dedupe::settle_dedupe;
use crate::store::evidence::append_by_chain;
use crate::store::inbound::{INBOUND, INBOUND_TAIL, inbound_row};
use crate::store::keyed::fetch_in;
use crate::store::locks::{LOCKS, TAKE_TAIL, lock_row};
use crate::store::named::{self, Row};
use crate::store::outbox::insert_outboxes;
use crate::store::{Store, StoreError};

impl Commands<'_> {
    /// Admits `writes`, one result each, in order: as one batch when it can, else one by one.
    /// The answers are those each write would get alone.
    pub async fn admit_many(self, writes: &[AdmissionWrite]) -> Vec<Result<Admitted, StoreError>> {
        if writes.len() > 1 && all_distinct(writes) {
            match self.store.admit_batch(writes).await {
                Ok(Some(admitted)) => {
                    self.store.stats.batches.fetch_add(1, Ordering::Relaxed);
                    self.store.stats.batched.fetch_add(admitted.len() as u64, Ordering::Relaxed);
                    metrics::counter!("chatgate_admission_batches_total").increment(1);
                    metrics::counter!("chatgate_admissions_batched_total").increment(admitted.len() as u64);
                    return admitted.into_iter().map(Ok).collect();
                }
                Ok(None) => {}
                Err(error) => tracing::debug!(%error, "batch admission failed; admitting one at a time"),
            }
        }
        let mut results = Vec::with_capacity(writes.len());
        for write in writes {
            results.push(self.store.admit_retrying(write).await);
        }
        results
    }
}

/// How often an admission that crossed another transaction is tried again.
const CONTENTION_ATTEMPTS: u32 = 4;

impl Store {
    /// Admits one write, again when it lost to a concurrent transaction (a dispatcher settling the
    /// same key's reservation, say): the loser was rolled back whole, and the key makes a second
    /// try the same admission.
    async fn admit_retrying(&self, write: &AdmissionWrite) -> Result<Admitted, StoreError> {
        let mut attempt = 1;
        loop {
            match self.admit_now(write).await {
                Err(StoreError::Contention(error)) if attempt < CONTENTION_ATTEMPTS => {
                    tracing::debug!(%error, attempt, "an admission crossed another transaction; again");
                    tokio::time::sleep(std::time::Duration::from_millis(5 * u64::from(attempt))).await;
                    attempt += 1;
                }
                outcome => return outcome,
            }
        }
    }

    /// `None` (with nothing written) when the batch is not the common case.
    async fn admit_batch(&self, writes: &[AdmissionWrite]) -> Result<Option<Vec<Admitted>>, StoreError> {
        let mut tx = self.begin().await?;
        if !self.claim_messages_and_keys(&mut tx, writes).await? {
            tx.rollback().await?;
            return Ok(None);
        }
        let lifecycles = insert_commands(&mut tx, writes).await?;
        let outbox = writes.iter().flat_map(|write| {
            let (tenant, command_id) = (write.envelope.tenant_id.as_str(), Some(write.envelope.command_id));
            write.outbox.iter().map(move |message| (tenant, command_id, message, write.at))
        });
        let moved = insert_outboxes(&mut tx, outbox.collect()).await?;
        tx.figures.merge(moved);
        // The chain's head is locked from the append to the commit (on PostgreSQL every other
        // transaction of the tenant waits for it): the append comes last, with only what needs
        // its artifacts after it.
        let last_evidence = append_evidence(&mut tx, writes).await?;
        for (i, write) in writes.iter().enumerate() {
            // Terminal at admission (refused at once): the reservation replays that outcome.
            settle_dedupe(&mut tx, write.envelope.command_id, lifecycles[i].0.state, last_evidence[i], write.at)
                .await?;
        }
        tx.commit().await?;
        self.signals().written(writes.iter().flat_map(|w| &w.outbox));
        self.moved(writes.iter().flat_map(AdmissionWrite::committed_moves));
        Ok(Some(
            writes
                .iter()
                .zip(lifecycles)
                .map(|(w, (lifecycle, version))| Admitted::New {
                    command_id: w.envelope.command_id,
                    lifecycle,
                    version,
                })
                .collect(),
        ))
    }
}

impl Store {
    /// Reserves every key and records every carrying message, or says `false` (the caller rolls
    /// back) when one was taken: a redelivery or a duplicate, which the one-at-a-time path
    /// answers.
    async fn claim_messages_and_keys(
        &self,
        tx: &mut AnyConnection,
        writes: &[AdmissionWrite],
    ) -> Result<bool, StoreError> {
        // A carrying message seen before is a redelivery.
        if self.any_message_seen(tx, writes).await? {
            return Ok(false);
        }
        // Every key must be free (or free again): one statement reserves them all.
        let reserving: Vec<Row> =
            writes.iter().filter(|w| w.envelope.idempotency_class.reserves_key()).map(reservation_row).collect();
        let wanted = reserving.len();
        if wanted > 0 && named::insert(tx, RESERVATIONS, reserving, RESERVE_TAIL).await?.len() != wanted {
            return Ok(false);
        }
        // What each changes, free (else the one-at-a-time path says who holds it).
        let locking: Vec<Row> = writes
            .iter()
            .filter_map(|w| {
                let e = &w.envelope;
                w.lock.as_ref().map(|resource| lock_row(e.tenant_id.as_str(), resource, e.command_id, w.at))
            })
            .collect();
        let wanted = locking.len();
        if wanted > 0 && named::insert(tx, LOCKS, locking, TAKE_TAIL).await?.len() != wanted {
            return Ok(false);
        }
        // The carrying messages, each linked to the command it starts. Another instance may have
        // recorded one since the check above: then the batch steps aside.
        let inbound: Vec<Row> = writes
            .iter()
            .filter_map(|w| {
                w.inbound
                    .as_ref()
                    .map(|m| inbound_row(Uuid::now_v7(), m, Some(w.envelope.command_id), InboundStatus::Command))
            })
            .collect();
        let expected = inbound.len();
        Ok(expected == 0 || named::insert(tx, INBOUND, inbound, INBOUND_TAIL).await?.len() == expected)
    }

    /// Whether any write's carrying message is recorded already. One query per channel, each
    /// id looked up by the unique index (a row-value `IN` would scan the whole table).
    async fn any_message_seen(&self, conn: &mut AnyConnection, writes: &[AdmissionWrite]) -> Result<bool, StoreError> {
        let mut by_channel: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for message in writes.iter().filter_map(|w| w.inbound.as_ref()) {
            by_channel.entry(message.channel.as_str()).or_default().push(message.provider_message_id.as_str());
        }
        let select = "SELECT provider_message_id FROM inbound_messages";
        for (channel, ids) in by_channel {
            if !fetch_in(conn, select, Some(("channel", channel)), "provider_message_id", &ids).await?.is_empty() {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// The command rows, their transitions and their confirmations; each write's lifecycle and version.
async fn insert_commands(
    tx: &mut AnyConnection,
    writes: &[AdmissionWrite],
) -> Result<Vec<(Lifecycle, i64)>, StoreError> {
    let mut commands = Vec::with_capacity(writes.len());
    let mut transitions = vec![];
    let mut lifecycles = Vec::with_capacity(writes.len());
    for write in writes {
        let Some((last, _)) = write.moves.last() else {
            return Err(StoreError::Config("an admission needs at least its canonicalize move".into()));
        };
        let lifecycle = last.after(write.envelope.command_kind);
        let version = write.moves.len() as i64;
        commands.push(command_row(&write.row(), lifecycle, version)?);
        transitions.extend(transition_rows(write));
        lifecycles.push((lifecycle, version));
    }
    named::insert(tx, "commands", commands, "").await?;
    insert_transitions(tx, transitions).await?;
    let confirmations: Vec<Row> = writes.iter().filter_map(confirmation_row_of).collect();
    named::insert(tx, "confirmations", confirmations, "").await?;
    Ok(lifecycles)
}

/// The writes' evidence, one chain per tenant, in the order of the writes; each write's last
/// artifact.
async fn append_evidence(tx: &mut AnyConnection, writes: &[AdmissionWrite]) -> Result<Vec<Option<Uuid>>, StoreError> {
    let drafts = writes.iter().enumerate().flat_map(|(i, write)| {
        let chain = write.envelope.tenant_id.as_str();
        write.moves.iter().flat_map(|(_, drafts)| drafts.iter()).map(move |d| (chain, i, d))
    });
    let mut last_evidence: Vec<Option<Uuid>> = vec![None; writes.len()];
    for (owner, id) in append_by_chain(tx, drafts.collect(), writes[0].at).await? {
        last_evidence[owner] = Some(id);
    }
    Ok(last_evidence)
}

/// How much group commit is happening: transactions that carried a batch of admissions, and the
/// admissions in them; the same for the workers' steps (`step_batch.rs`).
#[derive(Debug, Default)]
pub struct GroupCommitStats {
    pub batches: AtomicU64,
    pub batched: AtomicU64,
    pub step_batches: AtomicU64,
    pub steps_batched: AtomicU64,
    /// Reads of moves for the event streams (one per commit however many streams are open).
    pub move_reads: AtomicU64,
}

/// No two writes carry the same message or claim the same key: their answers depend on each
/// other, which the one-at-a-time path decides.
fn all_distinct(writes: &[AdmissionWrite]) -> bool {
    let mut messages = HashSet::new();
    let mut keys = HashSet::new();
    let mut resources = HashSet::new();
    writes.iter().all(|w| {
        let message = w.inbound.as_ref().map(|m| (m.channel.as_str(), m.provider_message_id.as_str()));
        let key = (w.envelope.tenant_id.as_str(), w.envelope.idempotency_key.as_str());
        let resource = w.lock.as_ref().map(|r| (w.envelope.tenant_id.as_str(), r));
        message.is_none_or(|m| messages.insert(m)) && keys.insert(key) && resource.is_none_or(|r| resources.insert(r))
    })
}
