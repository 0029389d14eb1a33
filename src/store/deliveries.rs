//! Deliveries: one transport transaction per (command, target), moved by the delivery machine
//! with a compare-and-swap on its version, and the log of every event it saw. Changes are written
//! inside a step (`store/step.rs`), together with the command's move and the outbox row's fate.

use serde_json::Value;
use sqlx::AnyConnection;
use sqlx::any::AnyRow;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::delivery::Ack;
use crate::domain::delivery::DeliveryEvent;
use crate::domain::delivery::DeliveryOutcome;
use crate::domain::delivery::DeliveryState;
use crate::domain::delivery::LogOutcome;
use crate::store::Deliveries;
use crate::store::StoreError;
use crate::store::keyed::KeyLookup;
use crate::store::rows::{
    Param, from_ms, insert_rows, int, opt_int, opt_parsed, opt_text, parsed, text, to_ms, update_rows, uuid,
};

#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    pub id: Uuid,
    pub tenant_id: String,
    pub command_id: Uuid,
    pub target: String,
    pub state: DeliveryState,
    pub version: i64,
    pub outcome: Option<DeliveryOutcome>,
    pub failure_class: Option<String>,
    pub detail: Option<Value>,
    pub delivery_deadline: Option<OffsetDateTime>,
    pub execution_deadline: Option<OffsetDateTime>,
    pub ttl_deadline: Option<OffsetDateTime>,
}

/// One line of a delivery's log.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryLogEntry {
    pub event: DeliveryEvent,
    pub from: DeliveryState,
    pub to: DeliveryState,
    pub ack: Option<Ack>,
    pub outcome: LogOutcome,
    pub detail: Option<Value>,
}

/// A decided change of one delivery (created first when `create` is set).
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryChange {
    pub delivery_id: Uuid,
    pub create: Option<NewDelivery>,
    /// The version the decision was made on (0 for a new delivery).
    pub expected_version: i64,
    /// The state the decision was made on (`received` for a new delivery): with the version, what
    /// the delivery is when the change is written, so that the figures move from it.
    pub from: DeliveryState,
    pub state: DeliveryState,
    pub outcome: Option<DeliveryOutcome>,
    pub failure_class: Option<String>,
    pub detail: Option<Value>,
    pub delivery_deadline: Option<OffsetDateTime>,
    pub execution_deadline: Option<OffsetDateTime>,
    pub log: Vec<DeliveryLogEntry>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewDelivery {
    pub tenant_id: String,
    pub command_id: Uuid,
    pub target: String,
    pub ttl_deadline: Option<OffsetDateTime>,
}

macro_rules! delivery_select {
    () => {
        "SELECT id, tenant_id, command_id, target, state, version, outcome, failure_class, detail, delivery_deadline, \
         execution_deadline, ttl_deadline FROM deliveries"
    };
}

pub(crate) const DELIVERIES_OF_COMMANDS: KeyLookup = KeyLookup { select: delivery_select!(), column: "command_id" };

/// By the commands' ids alone, the kind read back and kept to dispatch rows here: with
/// `kind = 'dispatch'` in the statement SQLite answered from the claim index's `kind` prefix,
/// reading every dispatch row the outbox keeps, so each batch's lookup grew with its history.
pub(crate) const DISPATCH_TARGETS: KeyLookup =
    KeyLookup { select: "SELECT command_id, kind, destination FROM outbox", column: "command_id" };

/// The deliveries whose deadline has passed. The states still under way are named (an `IN`
/// list, which `deliveries_by_state` answers): `state <> 'closed' AND state <> 'executed'` made
/// every sweep read every delivery ever made.
pub(crate) const OVERDUE: &str = concat!(
    delivery_select!(),
    " WHERE state IN ('received', 'validated', 'routed', 'delivered')
       AND ((state = 'routed' AND delivery_deadline <= $1) OR (state = 'delivered' AND execution_deadline <= $1)
            OR ttl_deadline <= $1)
     ORDER BY updated_at LIMIT $2"
);

fn decode(row: &AnyRow) -> Result<Delivery, StoreError> {
    let time =
        |column: &str| -> Result<Option<OffsetDateTime>, StoreError> { opt_int(row, column)?.map(from_ms).transpose() };
    Ok(Delivery {
        id: uuid(row, "id")?,
        tenant_id: text(row, "tenant_id")?,
        command_id: uuid(row, "command_id")?,
        target: text(row, "target")?,
        state: parsed(row, "state")?,
        version: int(row, "version")?,
        outcome: opt_parsed(row, "outcome")?,
        failure_class: opt_text(row, "failure_class")?,
        detail: opt_text(row, "detail")?.map(|raw| serde_json::from_str(&raw).unwrap_or(Value::String(raw))),
        delivery_deadline: time("delivery_deadline")?,
        execution_deadline: time("execution_deadline")?,
        ttl_deadline: time("ttl_deadline")?,
    })
}

impl DeliveryChange {
    /// Whether it moves a delivery out of `waiting` (for approval).
    pub fn stops_waiting(&self) -> bool {
        self.from == DeliveryState::Waiting && self.state != DeliveryState::Waiting
    }
}

/// Applies a change inside the caller's transaction; `false` (nothing written) when the delivery
/// moved since it was read, or another worker created it first.
pub(crate) async fn apply_delivery(
    conn: &mut AnyConnection,
    change: &DeliveryChange,
    at: OffsetDateTime,
) -> Result<bool, StoreError> {
    let written = match change.create {
        Some(_) => create_deliveries(conn, &[(change, at)], at).await? == 1,
        None => update_delivery(conn, change, at).await?,
    };
    if !written {
        return Ok(false);
    }
    log_events(conn, &[(change.delivery_id, &change.log)], at).await?;
    Ok(true)
}

/// Creates, in one statement, the deliveries that `changes` start, each written as its change
/// leaves it (its state, version 1, what it decided; `updated_at` its own time, `created_at`
/// `at`): what `received` at version 0 and then the change's move wrote, without the second
/// write of each new row. Returns how many were new (another worker may have created one first).
pub(crate) async fn create_deliveries(
    conn: &mut AnyConnection,
    changes: &[(&DeliveryChange, OffsetDateTime)],
    at: OffsetDateTime,
) -> Result<usize, StoreError> {
    let rows: Vec<Vec<Param>> = changes
        .iter()
        .filter_map(|(change, moved_at)| {
            let new = change.create.as_ref()?;
            Some(vec![
                change.delivery_id.to_string().into(),
                new.tenant_id.as_str().into(),
                new.command_id.to_string().into(),
                new.target.as_str().into(),
                change.state.as_str().into(),
                (change.expected_version + 1).into(),
                change.outcome.map(DeliveryOutcome::as_str).into(),
                change.failure_class.clone().into(),
                change.detail.as_ref().map(Value::to_string).into(),
                change.delivery_deadline.map(to_ms).into(),
                change.execution_deadline.map(to_ms).into(),
                new.ttl_deadline.map(to_ms).into(),
                to_ms(at).into(),
                to_ms(*moved_at).into(),
            ])
        })
        .collect();
    if rows.is_empty() {
        return Ok(0);
    }
    let head = "INSERT INTO deliveries (id, tenant_id, command_id, target, state, version, outcome, failure_class, \
        detail, delivery_deadline, execution_deadline, ttl_deadline, created_at, updated_at)";
    let tail = " ON CONFLICT (command_id, target) DO NOTHING RETURNING id";
    Ok(insert_rows(conn, head, 14, rows, tail).await?.len())
}

/// Moves one delivery if it is still at the version the change was decided on.
pub(crate) async fn update_delivery(
    conn: &mut AnyConnection,
    change: &DeliveryChange,
    at: OffsetDateTime,
) -> Result<bool, StoreError> {
    Ok(update_deliveries(conn, &[(change, at)]).await? == 1)
}

/// Moves every delivery that is still at the version its change was decided on, in one
/// statement; returns how many moved.
pub(crate) async fn update_deliveries(
    conn: &mut AnyConnection,
    changes: &[(&DeliveryChange, OffsetDateTime)],
) -> Result<usize, StoreError> {
    let rows = changes
        .iter()
        .map(|(change, at)| -> Vec<Param> {
            vec![
                change.delivery_id.to_string().into(),
                change.expected_version.into(),
                change.state.as_str().into(),
                change.outcome.map(DeliveryOutcome::as_str).into(),
                change.failure_class.clone().into(),
                change.detail.as_ref().map(Value::to_string).into(),
                change.delivery_deadline.map(to_ms).into(),
                change.execution_deadline.map(to_ms).into(),
                to_ms(*at).into(),
            ]
        })
        .collect();
    let set = "state = v.column3, version = deliveries.version + 1, \
        outcome = COALESCE(v.column4, deliveries.outcome), \
        failure_class = COALESCE(v.column5, deliveries.failure_class), \
        detail = COALESCE(v.column6, deliveries.detail), delivery_deadline = v.column7, \
        execution_deadline = v.column8, updated_at = v.column9";
    let matching = "deliveries.id = v.column1 AND deliveries.version = v.column2";
    update_rows(conn, ("deliveries", set, matching), 9, rows).await
}

/// The lines of every delivery's log, in one statement.
pub(crate) async fn log_events(
    conn: &mut AnyConnection,
    logs: &[(Uuid, &[DeliveryLogEntry])],
    at: OffsetDateTime,
) -> Result<(), StoreError> {
    let rows: Vec<Vec<Param>> = logs
        .iter()
        .flat_map(|(delivery_id, log)| {
            log.iter().map(|entry| {
                vec![
                    delivery_id.to_string().into(),
                    entry.event.as_str().into(),
                    entry.from.as_str().into(),
                    entry.to.as_str().into(),
                    entry.ack.map(Ack::as_str).into(),
                    entry.outcome.as_str().into(),
                    entry.detail.as_ref().map(Value::to_string).into(),
                    to_ms(at).into(),
                ]
            })
        })
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    let head = "INSERT INTO delivery_events (delivery_id, event, from_state, to_state, ack, outcome, detail, at)";
    insert_rows(conn, head, 8, rows, "").await?;
    Ok(())
}

impl Deliveries<'_> {
    pub async fn get(self, command_id: Uuid, target: &str) -> Result<Option<Delivery>, StoreError> {
        let row = sqlx::query(concat!(delivery_select!(), " WHERE command_id = $1 AND target = $2"))
            .bind(command_id.to_string())
            .bind(target)
            .fetch_optional(self.store.pool())
            .await?;
        row.as_ref().map(decode).transpose()
    }

    pub async fn of_command(self, command_id: Uuid) -> Result<Vec<Delivery>, StoreError> {
        let rows = sqlx::query(concat!(delivery_select!(), " WHERE command_id = $1 ORDER BY target"))
            .bind(command_id.to_string())
            .fetch_all(self.store.pool())
            .await?;
        rows.iter().map(decode).collect()
    }

    /// The deliveries of these commands, in no order.
    pub async fn of_commands(self, command_ids: &[Uuid]) -> Result<Vec<Delivery>, StoreError> {
        let mut conn = self.store.pool().acquire().await?;
        let ids: Vec<String> = command_ids.iter().map(Uuid::to_string).collect();
        let rows = DELIVERIES_OF_COMMANDS.fetch(&mut conn, &ids).await?;
        rows.iter().map(decode).collect()
    }

    /// The targets each of these commands was dispatched to (one dispatch row each), in order.
    pub async fn dispatch_targets_of(
        self,
        command_ids: &[Uuid],
    ) -> Result<std::collections::HashMap<Uuid, Vec<String>>, StoreError> {
        let mut conn = self.store.pool().acquire().await?;
        let ids: Vec<String> = command_ids.iter().map(Uuid::to_string).collect();
        let rows = DISPATCH_TARGETS.fetch(&mut conn, &ids).await?;
        let mut targets: std::collections::HashMap<Uuid, Vec<String>> = std::collections::HashMap::new();
        for row in &rows {
            if text(row, "kind")? == crate::store::DISPATCH_KIND {
                targets.entry(uuid(row, "command_id")?).or_default().push(text(row, "destination")?);
            }
        }
        targets.values_mut().for_each(|list| list.sort());
        Ok(targets)
    }

    /// The targets a command was dispatched to (one dispatch row each).
    pub async fn dispatch_targets(self, command_id: Uuid) -> Result<Vec<String>, StoreError> {
        Ok(self.dispatch_targets_of(&[command_id]).await?.remove(&command_id).unwrap_or_default())
    }

    /// How many times each target of a command was called (its dispatch rows' attempts).
    pub async fn dispatch_attempts(self, command_id: Uuid) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT destination, attempts FROM outbox WHERE command_id = $1 AND kind = 'dispatch' ORDER BY destination",
        )
        .bind(command_id.to_string())
        .fetch_all(self.store.pool())
        .await?;
        rows.iter().map(|row| Ok((text(row, "destination")?, crate::store::rows::int(row, "attempts")?))).collect()
    }

    /// Deliveries whose delivery, execution or TTL deadline has passed, oldest first.
    pub async fn overdue(self, now: OffsetDateTime, limit: i64) -> Result<Vec<Delivery>, StoreError> {
        let rows = sqlx::query(OVERDUE).bind(to_ms(now)).bind(limit).fetch_all(self.store.pool()).await?;
        rows.iter().map(decode).collect()
    }

    /// Records ACKs that moved nothing (duplicates, refused out-of-order ones).
    pub async fn log_events(
        self,
        delivery_id: Uuid,
        log: &[DeliveryLogEntry],
        at: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let mut tx = self.store.begin().await?;
        log_events(&mut tx, &[(delivery_id, log)], at).await?;
        tx.commit().await
    }

    /// A delivery's log, oldest first: (event, outcome).
    pub async fn log(self, delivery_id: Uuid) -> Result<Vec<(String, String)>, StoreError> {
        let rows = sqlx::query("SELECT event, outcome FROM delivery_events WHERE delivery_id = $1 ORDER BY id")
            .bind(delivery_id.to_string())
            .fetch_all(self.store.pool())
            .await?;
        rows.iter().map(|row| Ok((text(row, "event")?, text(row, "outcome")?))).collect()
    }
}
