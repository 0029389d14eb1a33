//! Figures read from the database when `/metrics` is scraped: queue depths and ages, agents by
//! state, deliveries in flight and of the last hour, and the Bloodbank command-completeness
//! figures. Every query reads through an index a range that grows with what is in flight (or
//! with an hour of traffic), never with the tables' whole history: a scrape costs the same with a
//! thousand deliveries stored or a million (`SNAPSHOT_QUERIES`, whose plans a test reads). The
//! same rule for the workers' batch lookups and the timers' sweeps is listed here as well
//! (`KEY_LOOKUPS`, `SWEEP_QUERIES`).

use time::OffsetDateTime;

use crate::store::agents::EXPIRED_UNDISPATCHED;
use crate::store::command_reads::COMMANDS_BY_ID;
use crate::store::confirmations::EXPIRED;
use crate::store::dedupe::PURGE_EXPIRED;
use crate::store::deliveries::{DELIVERIES_OF_COMMANDS, DISPATCH_TARGETS, OVERDUE};
use crate::store::rows::{KeyLookup, int, opt_int, text, to_ms};
use crate::store::{Store, StoreError};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// (outbox kind, pending rows, age in seconds of the oldest pending row).
    pub outbox: Vec<(String, i64, f64)>,
    /// (agent, state) for agents that ever moved (the others are idle).
    pub agents: Vec<(String, String)>,
    /// (delivery state, deliveries): those in flight, and those closed within the window.
    pub deliveries: Vec<(String, i64)>,
    /// Of those, the deliveries whose target acknowledged them, that ended with a result, that
    /// ended failed.
    pub acked: i64,
    pub results: i64,
    pub errors: i64,
    /// Started commands nothing has been heard about for `orphan_after`: no delivery ACK yet.
    pub orphaned: i64,
}

const PENDING: &str = "SELECT kind, COUNT(*) AS n, MIN(created_at) AS oldest FROM outbox WHERE status = 'pending' \
    GROUP BY kind";
/// One row per agent that ever moved: as many as the deployment configures.
const AGENTS: &str = "SELECT name, state FROM agents";
/// Deliveries in flight, by state (the index on `(state, updated_at)`, one range per state).
const IN_FLIGHT: &str = "SELECT state, COUNT(*) AS n FROM deliveries \
    WHERE state IN ('received', 'validated', 'routed', 'delivered', 'executed') GROUP BY state";
/// Deliveries closed within the window, by outcome.
const CLOSED: &str = "SELECT outcome, COUNT(*) AS n FROM deliveries WHERE state = 'closed' AND updated_at >= $1 \
    GROUP BY outcome";
/// Started commands not heard of since the cutoff (the index on `(state, expires_at)`).
const ORPHANED: &str = "SELECT COUNT(*) AS n FROM commands c WHERE c.state = 'started' AND c.updated_at <= $1 \
    AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.command_id = c.command_id \
    AND d.state IN ('delivered', 'executed'))";

/// Every query a scrape runs, for a test to read their plans.
pub const SNAPSHOT_QUERIES: [&str; 5] = [PENDING, AGENTS, IN_FLIGHT, CLOSED, ORPHANED];

/// Every batch lookup by a key, whose plans a test reads too: each must be answered from an index
/// that leads with its key, or it reads rows in proportion to the table's history.
pub const KEY_LOOKUPS: [&KeyLookup; 3] = [&COMMANDS_BY_ID, &DELIVERIES_OF_COMMANDS, &DISPATCH_TARGETS];

/// What the timers read (or delete) on every sweep, whatever the load: through indexes too.
pub const SWEEP_QUERIES: [&str; 4] = [OVERDUE, EXPIRED_UNDISPATCHED, EXPIRED, PURGE_EXPIRED];

impl Store {
    /// The figures at `now`: deliveries closed within `window`, commands orphaned for
    /// `orphan_after`.
    pub async fn snapshot(
        &self,
        now: OffsetDateTime,
        window: std::time::Duration,
        orphan_after: std::time::Duration,
    ) -> Result<Snapshot, StoreError> {
        let pool = self.pool();
        let before = |span: std::time::Duration| to_ms(now) - i64::try_from(span.as_millis()).unwrap_or(i64::MAX);
        let mut snapshot = Snapshot::default();
        for row in &sqlx::query(PENDING).fetch_all(pool).await? {
            let age = opt_int(row, "oldest")?.map_or(0.0, |oldest| (to_ms(now) - oldest).max(0) as f64 / 1000.0);
            snapshot.outbox.push((text(row, "kind")?, int(row, "n")?, age));
        }
        for row in &sqlx::query(AGENTS).fetch_all(pool).await? {
            snapshot.agents.push((text(row, "name")?, text(row, "state")?));
        }
        for row in &sqlx::query(IN_FLIGHT).fetch_all(pool).await? {
            let (state, n) = (text(row, "state")?, int(row, "n")?);
            if matches!(state.as_str(), "delivered" | "executed") {
                snapshot.acked += n;
            }
            snapshot.deliveries.push((state, n));
        }
        let mut closed = 0;
        for row in &sqlx::query(CLOSED).bind(before(window)).fetch_all(pool).await? {
            let n = int(row, "n")?;
            // One that ended with a result or an error was acknowledged; one given up was not.
            match crate::store::rows::opt_text(row, "outcome")?.as_deref() {
                Some("succeeded") => (snapshot.results, snapshot.acked) = (snapshot.results + n, snapshot.acked + n),
                Some("failed") => (snapshot.errors, snapshot.acked) = (snapshot.errors + n, snapshot.acked + n),
                _ => {}
            }
            closed += n;
        }
        snapshot.deliveries.push(("closed".into(), closed));
        let row = sqlx::query(ORPHANED).bind(before(orphan_after)).fetch_one(pool).await?;
        snapshot.orphaned = int(&row, "n")?;
        Ok(snapshot)
    }
}
