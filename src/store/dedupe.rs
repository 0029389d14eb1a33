//! Dedupe records after admission: settled when their command ends (the outcome a duplicate is
//! answered with), locked in one order before a step writes, and removed when their window has
//! passed (IDS §VIII.C).

use sqlx::AnyConnection;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::lifecycle::State;
use crate::store::Dedupe;
use crate::store::StoreError;
use crate::store::retention_pace::{Door, Pace};
use crate::store::rows::{Param, to_ms, update_rows};
use crate::store::tidy::Done;

/// A terminal state settles the reservation, so that a duplicate replays this outcome.
pub(crate) async fn settle_dedupe(
    conn: &mut AnyConnection,
    command_id: Uuid,
    state: State,
    outcome_ref: Option<Uuid>,
    at: OffsetDateTime,
) -> Result<(), StoreError> {
    settle_dedupes(conn, &[(command_id, state, outcome_ref, at)]).await
}

/// Settles the reservations of the commands that reached a terminal state, in one statement.
/// Locks, in one order, the dedupe records `moves` will settle, before anything else of the step
/// is written. An admission takes its key's record and then appends evidence (the tenant's chain
/// head): a step that appended first and then waited for the record would deadlock with it on
/// PostgreSQL. (SQLite writes one transaction at a time.)
/// `moves`: each move's command and the state it moves to.
pub(crate) async fn lock_dedupes(
    conn: &mut AnyConnection,
    moves: impl IntoIterator<Item = (Uuid, State)>,
) -> Result<(), StoreError> {
    if conn.backend_name().eq_ignore_ascii_case("sqlite") {
        return Ok(());
    }
    let mut ids: Vec<String> =
        moves.into_iter().filter(|(_, to)| to.is_terminal()).map(|(command_id, _)| command_id.to_string()).collect();
    if ids.is_empty() {
        return Ok(());
    }
    ids.sort_unstable();
    ids.dedup();
    let placeholders: Vec<String> = (1..=ids.len()).map(|i| format!("${i}")).collect();
    let sql = format!(
        "SELECT command_id FROM dedupe_records WHERE command_id IN ({}) ORDER BY command_id FOR UPDATE",
        placeholders.join(", ")
    );
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for id in ids {
        query = query.bind(id);
    }
    query.fetch_all(&mut *conn).await?;
    Ok(())
}

pub(crate) async fn settle_dedupes(
    conn: &mut AnyConnection,
    settled: &[(Uuid, State, Option<Uuid>, OffsetDateTime)],
) -> Result<(), StoreError> {
    let rows = settled
        .iter()
        .filter(|(_, state, ..)| state.is_terminal())
        .map(|(command_id, state, outcome_ref, at)| -> Vec<Param> {
            vec![
                command_id.to_string().into(),
                state.as_str().into(),
                outcome_ref.map(|id| id.to_string()).into(),
                to_ms(*at).into(),
            ]
        })
        .collect();
    let set = "status = v.column2, outcome_ref = v.column3, updated_at = v.column4";
    update_rows(conn, ("dedupe_records", set, "dedupe_records.command_id = v.column1"), 4, rows).await?;
    Ok(())
}

/// The records whose window passed as of `$1`, of finished commands: a command still under way
/// keeps its reservation past its window, so that a late duplicate can never run beside it.
pub(crate) const PAST_WINDOW: Done = Done {
    table: "dedupe_records",
    key: "(tenant_id, idempotency_key)",
    select: "SELECT tenant_id, idempotency_key FROM dedupe_records \
             WHERE ttl_expires_at <= $1 AND status <> 'in_progress'",
};

impl Dedupe<'_> {
    /// Deletes the records past their window at `now` ([`PAST_WINDOW`]), at `pace`.
    pub async fn purge_expired(self, now: OffsetDateTime, pace: &mut Pace) -> Result<u64, StoreError> {
        self.store.delete_done(&PAST_WINDOW, to_ms(now), Door::Main, pace).await
    }

    /// How many reservations exist for a tenant's key (0 or 1); for tests and diagnostics.
    pub async fn count(self, tenant_id: &str, idempotency_key: &str) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM dedupe_records WHERE tenant_id = $1 AND idempotency_key = $2")
            .bind(tenant_id)
            .bind(idempotency_key)
            .fetch_one(self.store.pool())
            .await?;
        crate::store::rows::int(&row, "n")
    }
}
