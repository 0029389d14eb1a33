//! Figures read from the database when `/metrics` is scraped: queue depths and ages, agents by
//! state, deliveries in flight and of the last hour, and the Bloodbank command-completeness
//! figures. The counts are kept as things change (`store::figures`): a scrape reads a few rows of
//! that table, however much history the others hold; the ages of the oldest waiting outbox rows
//! come from an index of the waiting ones, and the orphaned commands are counted up to 10,000
//! (`SNAPSHOT_QUERIES`, whose plans a test reads). The same rule for the
//! workers' batch lookups and the timers' sweeps is listed here as well (`KEY_LOOKUPS`,
//! `SWEEP_QUERIES`).

use time::OffsetDateTime;

use crate::store::agents::EXPIRED_UNDISPATCHED;
use crate::store::command_reads::COMMANDS_BY_ID;
use crate::store::confirmations::EXPIRED;
use crate::store::dedupe::PAST_WINDOW;
use crate::store::deliveries::{DELIVERIES_OF_COMMANDS, DISPATCH_TARGETS, OVERDUE};
use crate::store::figures;
use crate::store::keyed::KeyLookup;
use crate::store::previews::PREVIEWS_OF_COMMANDS;
use crate::store::retention_pace::{Door, Pace};
use crate::store::rows::{int, opt_int, text, to_ms};
use crate::store::tidy::Done;
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
    /// Approvals waiting for people's decisions (counted up to 10,000).
    pub approvals_pending: i64,
}

/// The oldest waiting outbox row of a kind (the index of the waiting rows, `outbox_pending_age`).
const OLDEST: &str = "SELECT MIN(created_at) AS oldest FROM outbox WHERE status = 'pending' AND kind = $1";
/// One row per agent that ever moved: as many as the deployment configures.
const AGENTS: &str = "SELECT name, state FROM agents";
/// Started commands not heard of since the cutoff (the index on `(state, expires_at)`), counted up
/// to 10,000: an alert asks whether there are any, not how many millions.
const ORPHANED: &str = "SELECT COUNT(*) AS n FROM (SELECT 1 FROM commands c WHERE c.state = 'started' \
    AND c.updated_at <= $1 AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.command_id = c.command_id \
    AND d.state IN ('delivered', 'waiting', 'executed')) LIMIT 10000) AS orphans";
/// Approvals waiting for decisions (the index on `(status, expires_at)`), counted up to 10,000.
const APPROVALS_PENDING: &str =
    "SELECT COUNT(*) AS n FROM (SELECT 1 FROM approvals WHERE status = 'pending' LIMIT 10000) AS waiting";
/// The per-minute figures of the minutes before `$1` (minute 0 holds the running totals): the
/// clean-up removes them.
const PAST_FIGURES: Done = Done {
    table: "figures",
    key: "(name, label, minute, slot)",
    select: "SELECT name, label, minute, slot FROM figures WHERE minute <> 0 AND minute < $1",
};
/// Every query a scrape runs, for a test to read their plans.
pub const SNAPSHOT_QUERIES: [&str; 5] = [figures::READ, OLDEST, AGENTS, ORPHANED, APPROVALS_PENDING];

/// Every batch lookup by a key, whose plans a test reads too: each must be answered from an index
/// that leads with its key, or it reads rows in proportion to the table's history.
pub const KEY_LOOKUPS: [&KeyLookup; 4] =
    [&COMMANDS_BY_ID, &DELIVERIES_OF_COMMANDS, &DISPATCH_TARGETS, &PREVIEWS_OF_COMMANDS];

/// What the timers read (or delete) on every sweep, whatever the load: through indexes too.
pub const SWEEP_QUERIES: [&str; 8] = [
    OVERDUE,
    crate::store::conversations::ENDED.select,
    crate::store::link_codes::KEPT_PAST.select,
    EXPIRED_UNDISPATCHED,
    EXPIRED,
    PAST_WINDOW.select,
    crate::store::approvals::DUE,
    crate::store::approvals::ESCALATION_DUE,
];

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
        let before = |span: std::time::Duration| now - span;
        let mut snapshot = Snapshot::default();
        let mut closed = 0;
        for row in &sqlx::query(figures::READ).bind(figures::minute(before(window))).fetch_all(pool).await? {
            let (name, label, n) = (text(row, "name")?, text(row, "label")?, int(row, "value")?);
            match name.as_str() {
                figures::PENDING => snapshot.outbox.push((label, n, 0.0)),
                figures::DELIVERIES => {
                    if matches!(label.as_str(), "delivered" | "waiting" | "executed") {
                        snapshot.acked += n;
                    }
                    snapshot.deliveries.push((label, n));
                }
                figures::CLOSED => {
                    // One that ended with a result or an error was acknowledged; one given up was not.
                    match label.as_str() {
                        "succeeded" => (snapshot.results, snapshot.acked) = (snapshot.results + n, snapshot.acked + n),
                        "failed" => (snapshot.errors, snapshot.acked) = (snapshot.errors + n, snapshot.acked + n),
                        _ => {}
                    }
                    closed += n;
                }
                _ => {}
            }
        }
        snapshot.deliveries.push(("closed".into(), closed));
        for (kind, waiting, age) in &mut snapshot.outbox {
            if *waiting > 0 {
                let row = sqlx::query(OLDEST).bind(kind.as_str()).fetch_one(pool).await?;
                *age = opt_int(&row, "oldest")?.map_or(0.0, |oldest| (to_ms(now) - oldest).max(0) as f64 / 1000.0);
            }
        }
        for row in &sqlx::query(AGENTS).fetch_all(pool).await? {
            snapshot.agents.push((text(row, "name")?, text(row, "state")?));
        }
        let row = sqlx::query(ORPHANED).bind(to_ms(before(orphan_after))).fetch_one(pool).await?;
        snapshot.orphaned = int(&row, "n")?;
        snapshot.approvals_pending = int(&sqlx::query(APPROVALS_PENDING).fetch_one(pool).await?, "n")?;
        Ok(snapshot)
    }

    /// Removes the per-minute figures older than `before` (the clean-up, every tick), at `pace`.
    pub async fn forget_figures(&self, before: OffsetDateTime, pace: &mut Pace) -> Result<u64, StoreError> {
        self.delete_done(&PAST_FIGURES, figures::minute(before), Door::Main, pace).await
    }
}
