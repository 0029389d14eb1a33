//! Figures read from the database when `/metrics` is scraped: queue depths and ages, agents by
//! state, and the Bloodbank command-completeness figures.

use time::OffsetDateTime;

use crate::store::rows::{int, opt_int, text, to_ms};
use crate::store::{Store, StoreError};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// (outbox kind, pending rows, age in seconds of the oldest pending row).
    pub outbox: Vec<(String, i64, f64)>,
    /// (agent state, agents) for agents that ever moved.
    pub agents: Vec<(String, i64)>,
    /// (delivery state, deliveries).
    pub deliveries: Vec<(String, i64)>,
    /// Deliveries whose target acknowledged them, that ended with a result, that ended failed.
    pub acked: i64,
    pub results: i64,
    pub errors: i64,
    /// Started commands nothing has been heard about for `orphan_after`: no delivery ACK yet.
    pub orphaned: i64,
}

impl Store {
    pub async fn snapshot(
        &self,
        now: OffsetDateTime,
        orphan_after: std::time::Duration,
    ) -> Result<Snapshot, StoreError> {
        let pool = self.pool();
        let mut snapshot = Snapshot::default();
        let rows = sqlx::query(
            "SELECT kind, COUNT(*) AS n, MIN(created_at) AS oldest FROM outbox WHERE status = 'pending' GROUP BY kind",
        )
        .fetch_all(pool)
        .await?;
        for row in &rows {
            let age = opt_int(row, "oldest")?.map_or(0.0, |oldest| (to_ms(now) - oldest).max(0) as f64 / 1000.0);
            snapshot.outbox.push((text(row, "kind")?, int(row, "n")?, age));
        }
        for row in &sqlx::query("SELECT state, COUNT(*) AS n FROM agents GROUP BY state").fetch_all(pool).await? {
            snapshot.agents.push((text(row, "state")?, int(row, "n")?));
        }
        for row in &sqlx::query("SELECT state, COUNT(*) AS n FROM deliveries GROUP BY state").fetch_all(pool).await? {
            snapshot.deliveries.push((text(row, "state")?, int(row, "n")?));
        }
        let row = sqlx::query(
            "SELECT
               SUM(CASE WHEN state IN ('delivered', 'executed') OR outcome IS NOT NULL THEN 1 ELSE 0 END) AS acked,
               SUM(CASE WHEN outcome = 'succeeded' THEN 1 ELSE 0 END) AS results,
               SUM(CASE WHEN outcome = 'failed' THEN 1 ELSE 0 END) AS errors
             FROM deliveries",
        )
        .fetch_one(pool)
        .await?;
        snapshot.acked = opt_int(&row, "acked")?.unwrap_or(0);
        snapshot.results = opt_int(&row, "results")?.unwrap_or(0);
        snapshot.errors = opt_int(&row, "errors")?.unwrap_or(0);
        let cutoff = to_ms(now) - i64::try_from(orphan_after.as_millis()).unwrap_or(i64::MAX);
        let row = sqlx::query(
            "SELECT COUNT(*) AS n FROM commands c WHERE c.state = 'started' AND c.updated_at <= $1
               AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.command_id = c.command_id
                               AND d.state IN ('delivered', 'executed'))",
        )
        .bind(cutoff)
        .fetch_one(pool)
        .await?;
        snapshot.orphaned = int(&row, "n")?;
        Ok(snapshot)
    }
}
