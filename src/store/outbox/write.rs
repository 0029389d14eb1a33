//! Writing the outbox: rows written waiting, and waiting rows settled, each with the waiting
//! figures it moves (`store::figures`), in the caller's transaction.

use serde_json::Value;
use sqlx::AnyConnection;
use time::OffsetDateTime;
use uuid::Uuid;

use super::{ClaimedMessage, NewOutboxMessage, OutboxSettle, handoff};
use crate::store::figures::Moves;
use crate::store::named::{self, Row, row};
use crate::store::rows::{Param, text, to_ms, update_rows_returning};
use crate::store::{StoreError, Tx};

/// A pending outbox row, `id`, carrying `payload`; leased until `leased` (its first attempt
/// under way) when it is handed over (`handoff`).
fn outbox_row(
    (id, tenant_id, command_id): (Uuid, &str, Option<Uuid>),
    message: &NewOutboxMessage,
    payload: &Value,
    at: OffsetDateTime,
    leased: Option<OffsetDateTime>,
) -> Row {
    row![
        "id" => id.to_string(),
        "tenant_id" => tenant_id,
        "command_id" => command_id.map(|c| c.to_string()),
        "kind" => message.kind.as_str(),
        "destination" => message.destination.as_str(),
        "payload" => payload.to_string(),
        "status" => "pending",
        "attempts" => i64::from(leased.is_some()),
        "next_attempt_at" => to_ms(at + message.hold.unwrap_or_default()),
        "locked_until" => leased.map(to_ms),
        "created_at" => to_ms(at),
        "updated_at" => to_ms(at),
    ]
}

/// Every message about a command names it by its short reference (`vars.ref`), which is what
/// a person types to ask about it; this is the one place every such message passes.
fn with_reference(payload: &Value, command_id: Option<Uuid>) -> std::borrow::Cow<'_, Value> {
    match (command_id, payload.get("vars")) {
        (Some(id), Some(Value::Object(vars))) if !vars.contains_key("ref") => {
            let mut payload = payload.clone();
            payload["vars"]["ref"] = crate::domain::command::ShortRef::of(id).as_str().into();
            std::borrow::Cow::Owned(payload)
        }
        _ => std::borrow::Cow::Borrowed(payload),
    }
}

/// Writes one waiting outbox row; the figures it moves, for the transaction to write.
pub(crate) async fn insert_outbox(
    tx: &mut Tx,
    tenant_id: &str,
    command_id: Option<Uuid>,
    message: &NewOutboxMessage,
    at: OffsetDateTime,
) -> Result<Moves, StoreError> {
    insert_outboxes(tx, vec![(tenant_id, command_id, message, at)]).await
}

/// Writes `messages` (each with its tenant, command and time) as waiting outbox rows, in one
/// statement; the waiting figures they move, for the transaction to write (`Tx::figures`). A
/// row this process's worker takes in memory is written leased to it and handed over when the
/// transaction commits (`handoff`).
pub(crate) async fn insert_outboxes(
    tx: &mut Tx,
    messages: Vec<(&str, Option<Uuid>, &NewOutboxMessage, OffsetDateTime)>,
) -> Result<Moves, StoreError> {
    let holds = handoff::holds(tx, &messages).await?;
    let (mut rows, mut kinds) = (vec![], vec![]);
    for (tenant_id, command_id, message, at) in messages {
        let id = Uuid::now_v7();
        let payload = with_reference(&message.payload, command_id);
        let lease = handoff::handed_over(tx, message, &holds);
        // Leased from now, as a claim now would lease it: `at` may be long past (a message's
        // receipt, for its admission), and a lease counted from it could be over already.
        let leased = lease.map(|lease| OffsetDateTime::now_utc() + lease);
        rows.push(outbox_row((id, tenant_id, command_id), message, &payload, at, leased));
        if lease.is_some() {
            let (tenant_id, kind, destination) =
                (tenant_id.to_owned(), message.kind.clone(), message.destination.clone());
            let row = ClaimedMessage {
                id,
                tenant_id,
                command_id,
                kind,
                destination,
                payload: payload.into_owned(),
                attempt: 1,
            };
            tx.handed.push((row, std::time::Instant::now()));
        }
        kinds.push(message.kind.as_str());
    }
    named::insert(tx, "outbox", rows, "").await?;
    Ok(Moves::of_outbox(kinds, []))
}

/// Writes one waiting outbox row that its writer may withdraw (`withdraw_outbox`): its id, and
/// the figures it moves.
pub(crate) async fn insert_withdrawable(
    conn: &mut AnyConnection,
    tenant_id: &str,
    message: &NewOutboxMessage,
    at: OffsetDateTime,
) -> Result<(Uuid, Moves), StoreError> {
    let id = Uuid::now_v7();
    let row = outbox_row((id, tenant_id, None), message, &message.payload, at, None);
    named::insert(conn, "outbox", vec![row], "").await?;
    Ok((id, Moves::of_outbox([message.kind.as_str()], [])))
}

/// Withdraws waiting row `id` (done, never sent, `why` kept as its last error); one a sender
/// holds already goes out all the same (its settling then finds it done).
pub(crate) async fn withdraw_outbox(
    conn: &mut AnyConnection,
    id: Uuid,
    why: &str,
    now: OffsetDateTime,
) -> Result<Moves, StoreError> {
    let set = "status = 'done', locked_until = NULL, last_error = v.column2, updated_at = v.column3";
    update_waiting(conn, set, 3, vec![vec![id.to_string().into(), why.into(), to_ms(now).into()]]).await
}

/// Writes a claimed row's fate and releases its lease.
pub(crate) async fn settle_outbox(
    conn: &mut AnyConnection,
    settle: &OutboxSettle,
    now: OffsetDateTime,
) -> Result<Moves, StoreError> {
    settle_outboxes(conn, &[(settle, now)]).await
}

/// Writes claimed rows' fates, each at its own time, and releases their leases, in one statement
/// (see [`update_waiting`]).
pub(crate) async fn settle_outboxes(
    conn: &mut AnyConnection,
    settled: &[(&OutboxSettle, OffsetDateTime)],
) -> Result<Moves, StoreError> {
    let rows = settled
        .iter()
        .map(|(settle, now)| -> Vec<Param> {
            let (id, status, next, error) = match settle {
                OutboxSettle::Done(id) => (id, "done", to_ms(*now), None),
                OutboxSettle::Retry { id, at, error } => (id, "pending", to_ms(*at), Some(error.as_str())),
                OutboxSettle::Dead { id, error } => (id, "dead", to_ms(*now), Some(error.as_str())),
            };
            vec![id.to_string().into(), status.into(), next.into(), error.into(), to_ms(*now).into()]
        })
        .collect();
    let set = "status = v.column2, next_attempt_at = v.column3, locked_until = NULL, \
        last_error = COALESCE(v.column4, outbox.last_error), updated_at = v.column5";
    update_waiting(conn, set, 5, rows).await
}

/// Sets (`set`, over `v.column1` the id and the rest of each row) the outbox rows still waiting,
/// in one statement; a row that is not waiting any more (a second worker's late answer about it)
/// is left as it is. The waiting figures it moves, for the transaction to write.
pub(crate) async fn update_waiting(
    conn: &mut AnyConnection,
    set: &str,
    columns: usize,
    rows: Vec<Vec<Param>>,
) -> Result<Moves, StoreError> {
    if rows.is_empty() {
        return Ok(Moves::default());
    }
    let matching = "outbox.id = v.column1 AND outbox.status = 'pending'";
    let returning = "RETURNING outbox.kind AS kind, outbox.status AS status";
    let moved = update_rows_returning(conn, ("outbox", set, matching), columns, rows, returning).await?;
    let mut ended = vec![];
    for row in &moved {
        if text(row, "status")? != "pending" {
            ended.push(text(row, "kind")?);
        }
    }
    Ok(Moves::of_outbox([], ended.iter().map(String::as_str)))
}
