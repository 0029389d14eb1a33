//! Reading evidence out for an export (`chatgate audit export`): each chain up to its last
//! artifact recorded by a time, a page at a time.

use time::OffsetDateTime;

use crate::domain::evidence::ExportedLink;
use crate::store::Evidence;
use crate::store::StoreError;
use crate::store::decoded::{decode_all, decoded};
use crate::store::rows::{int, text, to_ms};

// A link of the chain as the evidence table holds it.
decoded!(impl ExportedLink { chain_id, seq, artifact_id, kind, command_id, recorded_at, prev_hash, hash, body });

impl Evidence<'_> {
    /// Each chain with an artifact recorded by `until`, and the last such artifact's place: what
    /// an export up to `until` holds of it (from its first link).
    pub async fn export_cuts(self, until: OffsetDateTime) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT chain_id, MAX(seq) AS cut FROM evidence WHERE recorded_at <= $1
             GROUP BY chain_id ORDER BY chain_id",
        )
        .bind(to_ms(until))
        .fetch_all(self.store.pool())
        .await?;
        rows.iter().map(|row| Ok((text(row, "chain_id")?, int(row, "cut")?))).collect()
    }

    /// Up to `limit` links of `chain_id` after `after_seq`, through `through_seq`, in order: what
    /// an export writes and what `audit verify` checks.
    pub async fn export_links(
        self,
        chain_id: &str,
        after_seq: i64,
        through_seq: i64,
        limit: i64,
    ) -> Result<Vec<ExportedLink>, StoreError> {
        let rows = sqlx::query(
            "SELECT chain_id, artifact_id, seq, kind, command_id, recorded_at, prev_hash, hash, body FROM evidence
             WHERE chain_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT $4",
        )
        .bind(chain_id)
        .bind(after_seq)
        .bind(through_seq)
        .bind(limit)
        .fetch_all(self.store.pool())
        .await?;
        decode_all(&rows)
    }
}
