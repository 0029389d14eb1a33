//! Tidying: rows that did their job (duplicate markers past their window, used step-up tokens,
//! admitted inbox rows, old per-minute figures, ended conversations, link codes past keeping),
//! deleted by the clean-up in transactions paced like the purge's (`store::retention_pace::Pace`),
//! each begun only when no writer holds or waits for the write gate. One statement deleting all
//! of them at once held the database's write lock for as long as it took, and the pipeline's
//! commits (on the inbox's file, the webhooks' answers) waited behind it in SQLite's busy
//! handler, which sleeps in steps of up to 100 ms.

use sqlx::AssertSqlSafe;

use crate::store::retention_pace::{Door, Pace, Probe};
use crate::store::{Store, StoreError};

/// Rows of one table that did their job as of a time.
pub(crate) struct Done {
    pub table: &'static str,
    /// What names a row: the delete picks rows by it (a column, or columns in parentheses).
    pub key: &'static str,
    /// The rows as of `$1`, each named by `key`'s columns (a sweep, whose plan a test reads:
    /// `SWEEP_QUERIES`).
    pub select: &'static str,
}

impl Done {
    /// Deletes up to `$2` of them.
    fn delete(&self) -> String {
        format!("DELETE FROM {} WHERE {} IN ({} LIMIT $2)", self.table, self.key, self.select)
    }

    /// Finds whether there is one.
    fn probe(&self) -> String {
        format!("{} LIMIT 1", self.select)
    }
}

impl Store {
    /// Deletes the rows `done` picks as of `at` (`$1`), at `pace`, in the main database or the
    /// inbox's (`door`); returns how many.
    pub(crate) async fn delete_done(
        &self,
        done: &Done,
        at: i64,
        door: Door,
        pace: &mut Pace,
    ) -> Result<u64, StoreError> {
        let (probe, delete) = (sqlx::query(AssertSqlSafe(done.probe())).bind(at), done.delete());
        let delete = |limit| sqlx::query(AssertSqlSafe(delete.clone())).bind(at).bind(limit);
        self.delete_paced(door, probe, delete, pace).await
    }

    /// Deletes in transactions at `pace`, in the database `door` names, while `probe` finds
    /// rows: each runs the statement `delete` makes for the most rows it may take. Returns how
    /// many went.
    pub(crate) async fn delete_paced<'q>(
        &self,
        door: Door,
        probe: Probe<'q>,
        delete: impl Fn(i64) -> Probe<'q>,
        pace: &mut Pace,
    ) -> Result<u64, StoreError> {
        let mut batches = self.batches_at(door, probe, 1, pace).await?;
        let mut deleted = 0;
        while let Some((mut tx, limit)) = batches.next(self).await? {
            let gone = delete(limit).execute(&mut *tx).await?.rows_affected();
            tx.commit().await?;
            batches.took(gone);
            deleted += gone;
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Used tokens by expiry: a key of two columns.
    const EXPIRED: Done = Done {
        table: "consumed_tokens",
        key: "(issuer, jti)",
        select: "SELECT issuer, jti FROM consumed_tokens WHERE expires_at <= $1",
    };
    /// The inbox file's instances by liveness.
    const DEAD: Done =
        Done { table: "inbox_owners", key: "owner", select: "SELECT owner FROM inbox_owners WHERE alive_until < $1" };

    async fn store_with_rows() -> (tempfile::TempDir, Store) {
        let (folder, store) = Store::scratch().await;
        store.migrate().await.expect("migrated");
        for n in 0..30_i64 {
            let token = "INSERT INTO consumed_tokens (issuer, jti, command_id, consumed_at, expires_at) \
                         VALUES ('issuer', $1, '', 0, $2)";
            sqlx::query(token).bind(format!("t{n}")).bind(n).execute(store.pool()).await.expect("a token");
            let owner = "INSERT INTO inbox_owners (owner, alive_until) VALUES ($1, $2)";
            sqlx::query(owner).bind(format!("o{n}")).bind(n).execute(store.inbox_pool()).await.expect("an owner");
        }
        (folder, store)
    }

    #[tokio::test]
    async fn a_delete_takes_at_most_its_limit_of_the_rows_that_did_their_job() {
        let (_folder, store) = store_with_rows().await;
        let delete = sqlx::query(AssertSqlSafe(EXPIRED.delete())).bind(24_i64).bind(4_i64);
        assert_eq!(delete.execute(store.pool()).await.expect("deleted").rows_affected(), 4);
        let left: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM consumed_tokens").fetch_one(store.pool()).await.expect("n");
        assert_eq!(left, 26);
    }

    #[tokio::test]
    async fn every_row_that_did_its_job_goes_batch_by_batch_in_either_database_and_no_other() {
        let (_folder, store) = store_with_rows().await;
        let mut pace = Pace::new(4, Duration::from_secs(1), 1.0);
        assert_eq!(store.delete_done(&EXPIRED, 24, Door::Main, &mut pace).await.expect("deleted"), 25);
        let left: Vec<i64> = sqlx::query_scalar("SELECT expires_at FROM consumed_tokens ORDER BY expires_at")
            .fetch_all(store.pool())
            .await
            .expect("read");
        assert_eq!(left, (25..30).collect::<Vec<_>>(), "those that expired by then, and only those");
        assert_eq!(store.delete_done(&DEAD, 10, Door::Inbox, &mut pace).await.expect("deleted"), 10);
        let left: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM inbox_owners").fetch_one(store.inbox_pool()).await.expect("n");
        assert_eq!(left, 20, "in the inbox's file");
    }
}
