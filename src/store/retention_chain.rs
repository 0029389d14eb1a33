//! Cutting a tenant's evidence chain (`retention.records`), as Certificate Transparency logs and
//! git keep a pruned history verifiable: the artifacts before the first one still needed (recorded
//! since the cut, or of a command still kept) go, and the last of them is kept first as the
//! chain's checkpoint (its place and hash), from which `audit verify` continues. The database
//! refuses to delete an artifact after the checkpoint (migration `0034_retention_records`).

use time::OffsetDateTime;

use crate::domain::evidence::Checkpoint;
use crate::store::retention_pace::{Pace, Taken};
use crate::store::rows::{int, text, to_ms};
use crate::store::{Store, StoreError};

/// The first artifact of chain `$1` after `$2` still needed: recorded at `$3` or later, or of a
/// command kept.
const FIRST_KEPT: &str = "SELECT seq FROM evidence e WHERE chain_id = $1 AND seq > $2
    AND (recorded_at >= $3 OR EXISTS (SELECT 1 FROM commands c WHERE c.command_id = e.command_id))
    ORDER BY seq LIMIT 1";

/// Deletes up to `$3` of chain `$1`'s artifacts up to `$2`, oldest first.
const CUT: &str = "DELETE FROM evidence WHERE artifact_id IN
    (SELECT artifact_id FROM evidence WHERE chain_id = $1 AND seq <= $2 ORDER BY seq LIMIT $3)";

/// Artifacts deleted at once, after which a transaction looks whether a writer waits.
const ARTIFACTS_AT_ONCE: u64 = 64;

impl Store {
    /// Every chain: one a tenant.
    pub async fn chains(&self) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar("SELECT chain_id FROM evidence_chains ORDER BY chain_id").fetch_all(self.pool()).await?)
    }

    /// Moves the chain's checkpoint to the last artifact recorded before `before` that nothing
    /// kept needs, then deletes the artifacts up to it, at `pace` (also those a pass
    /// that stopped left behind). Returns how many went and the checkpoint, if the chain has one.
    pub async fn cut_chain(
        &self,
        chain_id: &str,
        before: OffsetDateTime,
        pace: &mut Pace,
    ) -> Result<(u64, Option<Checkpoint>), StoreError> {
        let Some(cut) = self.cut_at(chain_id, before).await? else {
            return Ok((0, None));
        };
        let mut deleted = 0;
        let left = sqlx::query("SELECT 1 FROM evidence WHERE chain_id = $1 AND seq <= $2 LIMIT 1");
        let mut batches = self.batches(left.bind(chain_id).bind(cut.seq), 1, pace).await?;
        while let Some((mut tx, limit)) = batches.next(self).await? {
            let mut taken = Taken { units: 0, yielded: false };
            // A few at a time, looking between them whether a writer waits (see `purge_commands`).
            while taken.units < limit as u64 {
                let most = (limit as u64 - taken.units).min(ARTIFACTS_AT_ONCE);
                let gone = sqlx::query(CUT).bind(chain_id).bind(cut.seq).bind(most as i64).execute(&mut *tx).await?;
                taken.units += gone.rows_affected();
                if gone.rows_affected() < most {
                    break;
                }
                if self.writers_wait() {
                    taken.yielded = taken.units < limit as u64;
                    break;
                }
            }
            tx.commit().await?;
            batches.ended(taken);
            deleted += taken.units;
        }
        Ok((deleted, Some(cut)))
    }

    /// The chain's checkpoint, moved first to where the chain may now be cut when that is past it.
    async fn cut_at(&self, chain_id: &str, before: OffsetDateTime) -> Result<Option<Checkpoint>, StoreError> {
        let checkpoint = self.chain_checkpoint(chain_id).await?;
        let after = checkpoint.as_ref().map_or(0, |cut| cut.seq);
        // The head first: an artifact appended after it is recent, so it is kept anyway.
        let head: Option<i64> = sqlx::query_scalar("SELECT last_seq FROM evidence_chains WHERE chain_id = $1")
            .bind(chain_id)
            .fetch_optional(self.pool())
            .await?;
        let first_kept = self.first_kept(chain_id, after, before).await?;
        let Some(last_gone) = first_kept.map(|seq| seq - 1).or(head).filter(|&seq| seq > after) else {
            return Ok(checkpoint);
        };
        let mut tx = self.begin().await?;
        let row = sqlx::query("SELECT hash, recorded_at FROM evidence WHERE chain_id = $1 AND seq = $2")
            .bind(chain_id)
            .bind(last_gone)
            .fetch_one(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO evidence_checkpoints (chain_id, seq, hash, recorded_at, cut_at) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (chain_id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash,
                 recorded_at = excluded.recorded_at, cut_at = excluded.cut_at
             WHERE evidence_checkpoints.seq < excluded.seq",
        )
        .bind(chain_id)
        .bind(last_gone)
        .bind(text(&row, "hash")?)
        .bind(int(&row, "recorded_at")?)
        .bind(to_ms(OffsetDateTime::now_utc()))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        // Another instance's pass may have moved it further meanwhile: a checkpoint never goes back.
        self.chain_checkpoint(chain_id).await
    }

    /// How many artifacts a cut before `before` would take (a dry run): those before the first
    /// still needed once the commands that may go are gone are not known until they are, so this
    /// counts those a cut would take now.
    pub async fn count_cut(&self, chain_id: &str, before: OffsetDateTime) -> Result<u64, StoreError> {
        let after = self.chain_checkpoint(chain_id).await?.map_or(0, |cut| cut.seq);
        let first_kept = self.first_kept(chain_id, after, before).await?;
        let sql = "SELECT COUNT(*) AS n FROM evidence WHERE chain_id = $1 AND seq > $2 AND seq <= $3";
        let through = first_kept.map_or(i64::MAX, |seq| seq - 1);
        let row = sqlx::query(sql).bind(chain_id).bind(after).bind(through).fetch_one(self.pool()).await?;
        Ok(int(&row, "n")?.max(0) as u64)
    }

    /// The place of the chain's first artifact after `after` still needed ([`FIRST_KEPT`]).
    async fn first_kept(&self, chain_id: &str, after: i64, before: OffsetDateTime) -> Result<Option<i64>, StoreError> {
        let query = sqlx::query_scalar(FIRST_KEPT).bind(chain_id).bind(after).bind(to_ms(before));
        Ok(query.fetch_optional(self.pool()).await?)
    }
}
