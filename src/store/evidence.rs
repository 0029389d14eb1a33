//! Appending evidence to its tenant's hash chain, reading it back, and verifying every chain.

use std::borrow::Borrow;

use serde_json::Value;
use sqlx::AnyConnection;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::evidence::ChainBreak;
use crate::domain::evidence::ChainHead;
use crate::domain::evidence::ChainVerifier;
use crate::domain::evidence::Checkpoint;
use crate::domain::evidence::EvidenceDraft;
use crate::domain::evidence::GENESIS_HASH;
use crate::domain::evidence::hash_canonical;
use crate::store::Evidence;
use crate::store::decoded::{decode_all, decoded};
use crate::store::named::{self, row};
use crate::store::rows::{int, text, to_ms};
use crate::store::{Store, StoreError};

/// Appends artifacts, in order, to one chain inside the caller's transaction, in three
/// statements whatever their number: one reserves their sequence numbers (and locks the chain
/// head, so concurrent appends queue instead of forking the chain), one writes them all, one
/// moves the head's hash. Round trips, not SQL, are what an append costs.
pub(crate) async fn append_all<D: Borrow<EvidenceDraft>>(
    conn: &mut AnyConnection,
    chain_id: &str,
    drafts: &[D],
    at: OffsetDateTime,
) -> Result<Vec<Uuid>, StoreError> {
    if drafts.is_empty() {
        return Ok(vec![]);
    }
    let now = to_ms(at);
    let count = drafts.len() as i64;
    let (last_seq, mut prev_hash) = reserve(conn, chain_id, count, now).await?;
    let (mut ids, mut values) = (Vec::with_capacity(drafts.len()), Vec::with_capacity(drafts.len()));
    for (seq, draft) in (last_seq - count + 1..).zip(drafts) {
        let (draft, artifact_id) = (draft.borrow(), Uuid::now_v7());
        // Canonical once: the stored text is exactly what the hash covers.
        let canonical = draft.canonical_body(artifact_id, chain_id, seq, &prev_hash, at);
        let hash = hash_canonical(canonical.as_bytes());
        let prev = std::mem::replace(&mut prev_hash, hash.clone());
        values.push(row![
            "artifact_id" => artifact_id.to_string(),
            "chain_id" => chain_id,
            "seq" => seq,
            "kind" => draft.kind.as_str(),
            "command_id" => draft.command_id.map(|id| id.to_string()),
            "stage" => draft.stage.map(|s| s.as_str()),
            "recorded_at" => now,
            "body" => canonical,
            "prev_hash" => prev,
            "hash" => hash,
        ]);
        ids.push(artifact_id);
    }
    named::insert(conn, "evidence", values, "").await?;
    sqlx::query("UPDATE evidence_chains SET last_hash = $2 WHERE chain_id = $1")
        .bind(chain_id)
        .bind(&prev_hash)
        .execute(&mut *conn)
        .await?;
    Ok(ids)
}

/// Appends drafts of several owners (writes of a batch, say), each to its chain, one chain append
/// per chain and in the order given within each; returns each artifact's id with its owner, in
/// the same order per chain.
pub(crate) async fn append_by_chain<O, D: Borrow<EvidenceDraft>>(
    conn: &mut AnyConnection,
    drafts: Vec<(&str, O, D)>,
    at: OffsetDateTime,
) -> Result<Vec<(O, Uuid)>, StoreError> {
    let mut chains: std::collections::BTreeMap<&str, (Vec<O>, Vec<D>)> = Default::default();
    for (chain, owner, draft) in drafts {
        let (owners, drafts) = chains.entry(chain).or_default();
        owners.push(owner);
        drafts.push(draft);
    }
    let mut appended = vec![];
    for (chain, (owners, drafts)) in chains {
        let ids = append_all(conn, chain, &drafts, at).await?;
        appended.extend(owners.into_iter().zip(ids));
    }
    Ok(appended)
}

/// Moves the chain's head `count` places on, for artifacts about to be appended: the last
/// sequence number now taken and the hash the first new artifact links to.
async fn reserve(conn: &mut AnyConnection, chain_id: &str, count: i64, now: i64) -> Result<(i64, String), StoreError> {
    let head = sqlx::query(
        "INSERT INTO evidence_chains (chain_id, last_seq, last_hash, updated_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (chain_id) DO UPDATE SET last_seq = evidence_chains.last_seq + $2, updated_at = $4
         RETURNING last_seq, last_hash",
    )
    .bind(chain_id)
    .bind(count)
    .bind(GENESIS_HASH)
    .bind(now)
    .fetch_one(&mut *conn)
    .await?;
    // A new chain comes back as (count, genesis); an existing one with its old hash.
    Ok((int(&head, "last_seq")?, text(&head, "last_hash")?))
}

decoded! {
    /// An artifact as read back: its place in the chain and its full content.
    #[derive(Debug, Clone, serde::Serialize)]
    pub struct StoredArtifact {
        pub artifact_id: Uuid,
        pub seq: i64,
        pub kind: String,
        pub hash: String,
        pub body: Value,
    }
}

/// The result of checking every chain.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AuditReport {
    pub chains: Vec<ChainReport>,
    /// The first link that does not hold, if any.
    pub first_break: Option<ChainBreak>,
}

impl AuditReport {
    /// One more chain, checked: how many artifacts hold, or where it breaks.
    pub fn add(&mut self, chain_id: String, checkpoint: Option<Checkpoint>, checked: Result<u64, ChainBreak>) {
        let chain = match checked {
            Ok(artifacts) => ChainReport { chain_id, checkpoint, artifacts, intact: true, broken_at: None },
            Err(broken) => {
                self.first_break.get_or_insert(broken.clone());
                ChainReport { chain_id, checkpoint, artifacts: 0, intact: false, broken_at: Some(broken) }
            }
        };
        self.chains.push(chain);
    }
}

/// One evidence chain, checked.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ChainReport {
    pub chain_id: String,
    /// Where the chain was cut by retention, if it was: it is verified from there (`seq`, `hash`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub checkpoint: Option<Checkpoint>,
    /// How many artifacts were verified (after the checkpoint, when there is one).
    pub artifacts: u64,
    pub intact: bool,
    /// Where this chain breaks, if it does: `chain_id`, `artifact_id`, `seq` and the problem.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub broken_at: Option<ChainBreak>,
}

/// Artifacts are verified a page at a time, so a long chain never has to fit in memory at once.
const VERIFY_PAGE: i64 = 1_000;
/// How many times one verification follows a head that moved while it read.
const HEAD_ROUNDS: usize = 8;

impl Evidence<'_> {
    /// Records artifacts that are not part of a move (refusals, dedupe decisions) in one
    /// transaction.
    pub async fn record(
        self,
        chain_id: &str,
        drafts: &[EvidenceDraft],
        at: OffsetDateTime,
    ) -> Result<Vec<Uuid>, StoreError> {
        let mut tx = self.store.begin().await?;
        let ids = append_all(&mut tx, chain_id, drafts, at).await?;
        tx.commit().await?;
        Ok(ids)
    }

    /// A command's artifacts in the order they were written.
    pub async fn for_command(self, chain_id: &str, command_id: Uuid) -> Result<Vec<StoredArtifact>, StoreError> {
        let rows = sqlx::query(
            "SELECT artifact_id, seq, kind, hash, body FROM evidence
             WHERE chain_id = $1 AND command_id = $2 ORDER BY seq",
        )
        .bind(chain_id)
        .bind(command_id.to_string())
        .fetch_all(self.store.pool())
        .await?;
        decode_all(&rows)
    }

    /// Checks every chain from its first artifact to its recorded head (`audit verify`).
    pub async fn verify(self) -> Result<AuditReport, StoreError> {
        let chain_rows =
            sqlx::query("SELECT chain_id FROM evidence_chains UNION SELECT chain_id FROM evidence ORDER BY chain_id")
                .fetch_all(self.store.pool())
                .await?;
        let mut report = AuditReport { chains: vec![], first_break: None };
        for row in &chain_rows {
            let chain_id = text(row, "chain_id")?;
            let mut checkpoint = self.store.chain_checkpoint(&chain_id).await?;
            let mut checked = self.store.verify_chain(&chain_id, checkpoint.as_ref()).await?;
            // A purge may have cut the chain while it was read: from where it is cut now, then.
            let moved = self.store.chain_checkpoint(&chain_id).await?;
            if checked.is_err() && moved != checkpoint {
                checkpoint = moved;
                checked = self.store.verify_chain(&chain_id, checkpoint.as_ref()).await?;
            }
            report.add(chain_id, checkpoint, checked);
        }
        Ok(report)
    }
}

impl Store {
    /// Where retention last cut the chain, if it did.
    pub(crate) async fn chain_checkpoint(&self, chain_id: &str) -> Result<Option<Checkpoint>, StoreError> {
        let row = sqlx::query("SELECT seq, hash FROM evidence_checkpoints WHERE chain_id = $1")
            .bind(chain_id)
            .fetch_optional(self.pool())
            .await?;
        row.map(|row| Ok(Checkpoint { seq: int(&row, "seq")?, hash: text(&row, "hash")? })).transpose()
    }

    async fn chain_head(&self, chain_id: &str) -> Result<Option<ChainHead>, StoreError> {
        let row = sqlx::query("SELECT last_seq, last_hash FROM evidence_chains WHERE chain_id = $1")
            .bind(chain_id)
            .fetch_optional(self.pool())
            .await?;
        row.map(|row| Ok(ChainHead { last_seq: int(&row, "last_seq")?, last_hash: text(&row, "last_hash")? }))
            .transpose()
    }

    /// Verifies one chain against its head while the gateway may go on writing to it: the links
    /// up to the head as read, then, when links lie past it, the head again (it moves in the
    /// transaction that writes them). Links past a head that did not move are not the writer's:
    /// they are read too, and the head says where the chain should have ended.
    async fn verify_chain(
        &self,
        chain_id: &str,
        checkpoint: Option<&Checkpoint>,
    ) -> Result<Result<u64, ChainBreak>, StoreError> {
        let mut verifier = ChainVerifier::after(chain_id, checkpoint);
        let mut head = self.chain_head(chain_id).await?;
        for round in 1..=HEAD_ROUNDS {
            let through = head.as_ref().map(|head| head.last_seq);
            if let Err(broken) = self.check_links(&mut verifier, chain_id, through).await? {
                return Ok(Err(broken));
            }
            let Some(read) = through.filter(|_| round < HEAD_ROUNDS) else {
                // No head (every link was read), or a chain written to faster than it is read:
                // it holds up to the head last read.
                return Ok(verifier.finish(head.as_ref()));
            };
            let after: Option<i64> =
                sqlx::query_scalar("SELECT MAX(seq) FROM evidence WHERE chain_id = $1 AND seq > $2")
                    .bind(chain_id)
                    .bind(read)
                    .fetch_one(self.pool())
                    .await?;
            let Some(last) = after else {
                return Ok(verifier.finish(head.as_ref()));
            };
            let newer = self.chain_head(chain_id).await?;
            if newer.as_ref().is_none_or(|newer| newer.last_seq < last) {
                // Past a head that did not move with them: read them, and say where the chain parts.
                if let Err(broken) = self.check_links(&mut verifier, chain_id, None).await? {
                    return Ok(Err(broken));
                }
                return Ok(verifier.finish(newer.as_ref()));
            }
            head = newer;
        }
        Ok(verifier.finish(head.as_ref()))
    }

    /// Feeds the chain's links after those `verifier` checked, up to `through` (all when `None`),
    /// to it a page at a time.
    async fn check_links(
        &self,
        verifier: &mut ChainVerifier,
        chain_id: &str,
        through: Option<i64>,
    ) -> Result<Result<(), ChainBreak>, StoreError> {
        let through = through.unwrap_or(i64::MAX);
        loop {
            let links =
                self.evidence().export_links(chain_id, verifier.checked_through(), through, VERIFY_PAGE).await?;
            let read = links.len() as i64;
            for link in links {
                if let Err(broken) = verifier.check(link.into()) {
                    return Ok(Err(broken));
                }
            }
            if read < VERIFY_PAGE {
                return Ok(Ok(()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::evidence::TraceBindings;
    use crate::domain::lifecycle::EvidenceKind;

    fn drafts(n: usize) -> Vec<EvidenceDraft> {
        (0..n)
            .map(|_| EvidenceDraft::new(EvidenceKind::DedupeDecided, Uuid::now_v7(), TraceBindings::default()))
            .collect()
    }

    /// A second append to a chain in the same transaction links to the first's last artifact,
    /// and the head is the last artifact's, whatever other chain was appended to in between.
    #[tokio::test]
    async fn appends_in_one_transaction_chain_on_one_another_and_the_head_is_the_last() {
        let (_folder, store) = Store::scratch().await;
        store.migrate().await.expect("migrated");
        let at = OffsetDateTime::now_utc();
        let mut tx = store.begin().await.expect("a writer");
        append_all(&mut tx, "t", &drafts(1), at).await.expect("appended");
        append_all(&mut tx, "other", &drafts(1), at).await.expect("appended");
        append_all(&mut tx, "t", &drafts(2), at).await.expect("appended");
        tx.commit().await.expect("committed");
        let mut tx = store.begin().await.expect("a writer");
        append_all(&mut tx, "t", &drafts(1), at).await.expect("appended");
        tx.commit().await.expect("committed");
        let report = store.evidence().verify().await.expect("verified");
        assert!(report.first_break.is_none(), "{:?}", report.first_break);
        let counts: Vec<(String, u64)> = report.chains.iter().map(|c| (c.chain_id.clone(), c.artifacts)).collect();
        assert_eq!(counts, [("other".to_owned(), 1), ("t".to_owned(), 4)]);
        let head = store.chain_head("t").await.expect("read").expect("a head");
        let last = sqlx::query("SELECT hash FROM evidence WHERE chain_id = 't' AND seq = 4")
            .fetch_one(store.pool())
            .await
            .expect("the last artifact");
        assert_eq!((head.last_seq, head.last_hash), (4, text(&last, "hash").expect("a hash")));
    }
}
