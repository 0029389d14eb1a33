//! The figures `/metrics` shows, kept as things change: a delivery's move and an outbox row's
//! writing or settling move them in the same transaction (table `figures`), so that a scrape reads
//! a few rows however much history the tables hold — a sum over an hour of deliveries was a read
//! of an hour of rows. What is counted: the deliveries not closed, by state (a running total);
//! the deliveries closed, by outcome, per minute (a scrape adds the last hour's); the outbox rows
//! waiting, by kind (a running total). Each transaction adds its moves to one of a few `slot`
//! rows, picked at random, so that several instances on one PostgreSQL seldom wait for one
//! another's row. The moves are gathered in the transaction (`Tx::figures`) and written as its
//! last statement, keys in one order: a transaction that waits for a figure's row waits for one
//! that has nothing left to do but commit, so that no two ever wait for each other (written in the
//! middle, they met the evidence chains' rows in the other order, and deadlocked).

use std::collections::BTreeMap;

use time::OffsetDateTime;

use crate::domain::delivery::{DeliveryOutcome, DeliveryState};
use crate::store::StoreError;
use crate::store::deliveries::DeliveryChange;
use crate::store::rows::{Param, insert_rows, to_ms};

/// Deliveries not closed, by state.
pub const DELIVERIES: &str = "deliveries";
/// Deliveries closed, by outcome (`''` for none), per minute.
pub const CLOSED: &str = "deliveries_closed";
/// Outbox rows waiting, by kind.
pub const PENDING: &str = "outbox_pending";
/// The rows a running total is spread over.
const SLOTS: u32 = 8;
/// The `minute` of a running total.
pub const RUNNING: i64 = 0;

/// Moves of the figures, added up per figure: `(name, label, minute)` → by how much. Dropped
/// unwritten, the figures would drift from the rows they count.
#[derive(Debug, Default)]
#[must_use = "moves of the figures must be written with their transaction (`Tx::figures`)"]
pub(crate) struct Moves(BTreeMap<(&'static str, String, i64), i64>);

impl Moves {
    /// `other`'s moves added to these.
    pub(crate) fn merge(&mut self, other: Moves) {
        for (key, by) in other.0 {
            *self.0.entry(key).or_default() += by;
        }
    }

    fn add(&mut self, name: &'static str, label: &str, minute: i64, by: i64) {
        *self.0.entry((name, label.to_owned(), minute)).or_default() += by;
    }

    /// What written delivery changes move: a new delivery is one more `received`; a move leaves
    /// its state for another; a closed one is counted in its minute, by outcome.
    pub(crate) fn of_deliveries<'a>(changes: impl IntoIterator<Item = (&'a DeliveryChange, OffsetDateTime)>) -> Self {
        let mut moves = Self::default();
        for (change, at) in changes {
            if change.create.is_some() {
                moves.add(DELIVERIES, DeliveryState::Received.as_str(), RUNNING, 1);
            }
            if change.from == change.state {
                continue;
            }
            moves.add(DELIVERIES, change.from.as_str(), RUNNING, -1);
            match change.state {
                DeliveryState::Closed => {
                    moves.add(CLOSED, change.outcome.map_or("", DeliveryOutcome::as_str), minute(at), 1)
                }
                state => moves.add(DELIVERIES, state.as_str(), RUNNING, 1),
            }
        }
        moves
    }

    /// Deliveries deleted by retention (`state`, `outcome`, `updated_at` in ms): one not closed
    /// leaves its state's running total, one closed leaves its minute's count.
    pub(crate) fn of_deleted_deliveries(deleted: impl IntoIterator<Item = (String, Option<String>, i64)>) -> Self {
        let mut moves = Self::default();
        for (state, outcome, at) in deleted {
            match state.as_str() {
                "closed" => moves.add(CLOSED, outcome.as_deref().unwrap_or(""), at.div_euclid(60_000), -1),
                state => moves.add(DELIVERIES, state, RUNNING, -1),
            }
        }
        moves
    }

    /// Outbox rows of these kinds written (waiting) or settled (no longer waiting).
    pub(crate) fn of_outbox<'a>(
        written: impl IntoIterator<Item = &'a str>,
        settled: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let mut moves = Self::default();
        written.into_iter().for_each(|kind| moves.add(PENDING, kind, RUNNING, 1));
        settled.into_iter().for_each(|kind| moves.add(PENDING, kind, RUNNING, -1));
        moves
    }

    /// Writes the moves, in the caller's transaction: one statement.
    pub(crate) async fn record(self, conn: &mut sqlx::AnyConnection) -> Result<(), StoreError> {
        let slot = i64::from(rand::random_range(0..SLOTS));
        let rows: Vec<Vec<Param>> = self
            .0
            .into_iter()
            .filter(|(_, by)| *by != 0)
            .map(|((name, label, minute), by)| vec![name.into(), label.into(), minute.into(), slot.into(), by.into()])
            .collect();
        if rows.is_empty() {
            return Ok(());
        }
        let head = "INSERT INTO figures (name, label, minute, slot, value)";
        let tail = " ON CONFLICT (name, label, minute, slot) DO UPDATE SET value = figures.value + excluded.value";
        insert_rows(conn, head, 5, rows, tail).await?;
        Ok(())
    }
}

/// The minute `at` falls in, as the figures count them.
pub(crate) fn minute(at: OffsetDateTime) -> i64 {
    to_ms(at).div_euclid(60_000)
}

/// Every figure, added up over its slots: the running totals, and the per-minute ones from
/// `since_minute` on.
pub(crate) const READ: &str = "SELECT name, label, SUM(value) AS value FROM figures \
    WHERE minute = 0 OR minute >= $1 GROUP BY name, label";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::deliveries::NewDelivery;

    fn change(
        create: bool,
        from: DeliveryState,
        state: DeliveryState,
        outcome: Option<DeliveryOutcome>,
    ) -> DeliveryChange {
        let new = NewDelivery {
            tenant_id: "t".into(),
            command_id: uuid::Uuid::nil(),
            target: "x".into(),
            ttl_deadline: None,
        };
        DeliveryChange {
            delivery_id: uuid::Uuid::nil(),
            create: create.then_some(new),
            expected_version: 0,
            from,
            state,
            outcome,
            failure_class: None,
            detail: None,
            delivery_deadline: None,
            execution_deadline: None,
            log: vec![],
        }
    }

    #[test]
    fn a_delivery_moves_from_its_state_to_the_next_and_a_closed_one_counts_in_its_minute() {
        use DeliveryState::{Closed, Delivered, Received, Routed};
        let at = OffsetDateTime::from_unix_timestamp(600).expect("time");
        let changes = [
            change(true, Received, Routed, None),
            change(false, Routed, Delivered, None),
            change(false, Delivered, Closed, Some(DeliveryOutcome::Succeeded)),
            change(false, Delivered, Delivered, None),
        ];
        let net = |changes: &[DeliveryChange]| {
            let moves = Moves::of_deliveries(changes.iter().map(|c| (c, at)));
            moves.0.into_iter().filter(|(_, by)| *by != 0).collect::<Vec<_>>()
        };
        // The whole life of one delivery in one batch: only its closing is left.
        assert_eq!(net(&changes), vec![((CLOSED, "succeeded".to_owned(), 10), 1)]);
        assert_eq!(net(&changes[..1]), vec![((DELIVERIES, "routed".to_owned(), RUNNING), 1)], "made and routed");
        assert_eq!(
            net(&changes[1..2]),
            vec![((DELIVERIES, "delivered".to_owned(), RUNNING), 1), ((DELIVERIES, "routed".to_owned(), RUNNING), -1)]
        );
        assert!(net(&changes[3..]).is_empty(), "a duplicate moves nothing");
    }
}
