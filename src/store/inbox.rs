//! The inbox: verified provider messages stored before their webhook is answered, admitted
//! behind the answer. Entering is one transaction for every delivery waiting (group commit); a
//! message already there (a redelivery) is recognized by `(channel, provider message id)`.
//! Admission claims rows in order, per owner: an instance admits what it stored while it is alive
//! (its heartbeat in `inbox_owners`), and takes over another's rows only once that one's heartbeat
//! has run out (the instance died).

mod parked;

use std::time::Duration;

use time::OffsetDateTime;

use crate::domain::command::{Channel, ExternalId};
use crate::store::StoreError;
use crate::store::retention_pace::{Door, Pace};
use crate::store::rows::{Param, from_ms, insert_rows, int, opt_int, placeholder_list, text, to_ms, update_rows};
use crate::store::tidy::Done;
use crate::store::{BackendKind, Inbox};
pub use parked::{Adopted, ParkedSender, Released};

/// A message to store: what its channel reads it back from (`payload` and the conversation).
#[derive(Debug, Clone)]
pub struct NewInboxEntry {
    pub channel: Channel,
    pub provider_message_id: ExternalId,
    /// `{channel}:{business number}:{person}`: admission keeps each one's order.
    pub conversation_id: String,
    /// The message as its channel read it (JSON text).
    pub payload: String,
    /// How long its replies are held for the webhook's own answer (Twilio's TwiML).
    pub hold: Option<Duration>,
    /// The webhook's trace (W3C `traceparent`), which its admission joins.
    pub trace_parent: Option<String>,
    /// The webhook's answer waits for its admission on this instance, the only one that can tell
    /// it: no other live instance takes the row (see [`Inbox::claim`]).
    pub answer_waits: bool,
}

/// What entering one message came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entered {
    /// Stored now, as row `id`.
    New(i64),
    /// Stored before (a redelivery): nothing written.
    Seen,
}

/// A stored message claimed for admission.
#[derive(Debug, Clone)]
pub struct InboxEntry {
    pub id: i64,
    pub channel: String,
    pub provider_message_id: String,
    pub conversation_id: String,
    /// As it was stored (JSON text).
    pub payload: String,
    pub hold: Option<Duration>,
    pub trace_parent: Option<String>,
    /// When the gateway stored it: the receipt time of everything admission writes for it.
    pub received_at: OffsetDateTime,
    /// It was parked for the tenant's identity resolver, and what let it go.
    pub released: Option<Released>,
}

/// Who admits the rows an instance enters, and until when it is alive unless it says so again.
#[derive(Debug, Clone, Copy)]
pub struct Lease<'a> {
    pub owner: &'a str,
    pub until: OffsetDateTime,
}

const COLUMNS: usize = 9;
/// The rows `insert_rows` writes in one statement.
const ROWS_PER_STATEMENT: usize = crate::store::rows::PARAMS_PER_STATEMENT / COLUMNS;
const INSERT: &str = "INSERT INTO inbox (channel, provider_message_id, conversation_id, payload, hold_ms, \
                      trace_parent, received_at, owner, answer_waits)";
const INSERT_TAIL: &str = "ON CONFLICT (channel, provider_message_id) DO NOTHING \
                           RETURNING id, channel, provider_message_id";

/// Rows admitted before `$1` (a later redelivery is still recognized by its inbound record).
const ADMITTED: Done = Done {
    table: "inbox",
    key: "id",
    select: "SELECT id FROM inbox WHERE admitted_at IS NOT NULL AND admitted_at < $1",
};
/// Instances dead since `$1` with nothing left to admit.
const DEAD_OWNERS: Done = Done {
    table: "inbox_owners",
    key: "owner",
    select: "SELECT owner FROM inbox_owners WHERE alive_until < $1 \
             AND NOT EXISTS (SELECT 1 FROM inbox WHERE inbox.owner = inbox_owners.owner AND admitted_at IS NULL)",
};

impl Inbox<'_> {
    /// Stores every message of `deliveries` in one transaction (one statement when they fit in
    /// one and `heartbeat` is not due: it says `lease.owner` is alive, which the worker also does
    /// every second): for each, whether it is new.
    pub async fn enter(
        self,
        deliveries: &[&[NewInboxEntry]],
        lease: Lease<'_>,
        heartbeat: bool,
        received_at: OffsetDateTime,
    ) -> Result<Vec<Vec<Entered>>, StoreError> {
        let rows: Vec<Vec<Param>> = deliveries
            .iter()
            .flat_map(|delivery| delivery.iter())
            .map(|entry| row(entry, lease, received_at))
            .collect();
        let write = async {
            if heartbeat || rows.len() > ROWS_PER_STATEMENT {
                let mut tx = self.store.begin_inbox().await?;
                if heartbeat {
                    beat(&mut tx, lease).await?;
                }
                let stored = insert_rows(&mut tx, INSERT, COLUMNS, rows, INSERT_TAIL).await?;
                tx.commit().await?;
                Ok(stored)
            } else {
                let mut conn = self.store.inbox_writer().await?;
                let stored = insert_rows(&mut conn, INSERT, COLUMNS, rows, INSERT_TAIL).await;
                stored.inspect_err(|error| self.store.observe_write_failure(error))
            }
        };
        let stored = self.store.inbox_db.bounded(write).await?;
        let mut ids = std::collections::HashMap::with_capacity(stored.len());
        for row in &stored {
            ids.insert((text(row, "channel")?, text(row, "provider_message_id")?), int(row, "id")?);
        }
        // A message twice in one delivery is entered once: its second copy is a redelivery.
        let mut entered = |entry: &NewInboxEntry| {
            let key = (entry.channel.to_string(), entry.provider_message_id.to_string());
            ids.remove(&key).map_or(Entered::Seen, Entered::New)
        };
        Ok(deliveries.iter().map(|delivery| delivery.iter().map(&mut entered).collect()).collect())
    }

    /// Up to `limit` unadmitted rows, oldest first, now `lease.owner`'s: its own, those of
    /// instances no longer alive, and the later rows of each conversation whose oldest is one of
    /// those. A conversation whose oldest row is another live instance's waits for that one, so
    /// that a conversation's messages are admitted in the order they came; taking its followers
    /// with it lets the instance that has a conversation admit all of it in one pass, where two
    /// instances sharing one (a load balancer spreading a person's messages) would take turns a
    /// message at a time. A row whose webhook waits for its answer (`answer_waits`) is not taken
    /// from its live instance, nor anything of its conversation after it.
    pub async fn claim(self, lease: Lease<'_>, now: OffsetDateTime, limit: i64) -> Result<Vec<InboxEntry>, StoreError> {
        let mut tx = self.store.begin_inbox().await?;
        let others = others_alive(&mut tx, self.store.backend(), lease.owner, now).await?;
        let rows = if others.is_empty() {
            // The common case, and the only one on SQLite: every row waiting is this instance's to
            // take, oldest first (through the index of the rows waiting).
            let lock = if self.store.backend() == BackendKind::Postgres { "FOR UPDATE SKIP LOCKED" } else { "" };
            let sql = format!(
                "SELECT {CLAIMED} FROM inbox WHERE admitted_at IS NULL AND awaiting_address IS NULL
                 ORDER BY id LIMIT $1 {lock}"
            );
            sqlx::query(sqlx::AssertSqlSafe(sql)).bind(limit).fetch_all(&mut *tx).await?
        } else {
            // Not when the conversation's oldest row is another live instance's, nor behind (or
            // at) one whose answer waits there: two index probes per row, looked at in order until
            // `limit` are found (`inbox_awaited` holds the few rows waited for).
            let list = placeholder_list(0, others.len(), crate::store::rows::Marks::for_connection(&tx));
            let sql = format!(
                "SELECT {CLAIMED} FROM inbox i WHERE admitted_at IS NULL AND awaiting_address IS NULL
                 AND (SELECT f.owner FROM inbox f WHERE f.admitted_at IS NULL AND f.awaiting_address IS NULL
                      AND f.conversation_id = i.conversation_id ORDER BY f.id LIMIT 1) NOT IN {list}
                 AND NOT EXISTS (SELECT 1 FROM inbox e WHERE e.admitted_at IS NULL AND e.answer_waits = 1
                      AND e.awaiting_address IS NULL AND e.conversation_id = i.conversation_id AND e.id <= i.id
                      AND e.owner IN {list})
                 ORDER BY id LIMIT ${} FOR UPDATE SKIP LOCKED",
                others.len() + 1
            );
            let query = others.iter().fold(sqlx::query(sqlx::AssertSqlSafe(sql)), |query, owner| query.bind(owner));
            query.bind(limit).fetch_all(&mut *tx).await?
        };
        let mut claimed = rows.iter().map(entry).collect::<Result<Vec<_>, _>>()?;
        // What a dead instance left, and the followers taken, become this one's (one statement;
        // its own rows stay as they are).
        let taken: Vec<Vec<Param>> = claimed
            .iter()
            .filter(|(_, owner)| owner != lease.owner)
            .map(|(entry, _)| vec![Param::from(entry.id), Param::from(lease.owner)])
            .collect();
        if !taken.is_empty() {
            update_rows(&mut tx, ("inbox", "owner = v.column2", "inbox.id = v.column1"), 2, taken).await?;
        }
        tx.commit().await?;
        claimed.sort_by_key(|(entry, _)| entry.id);
        Ok(claimed.into_iter().map(|(entry, _)| entry).collect())
    }

    /// Says `lease.owner` is alive until `lease.until` (its heartbeat, every second): only a dead
    /// instance's rows are taken over.
    pub async fn renew(self, lease: Lease<'_>) -> Result<(), StoreError> {
        let mut tx = self.store.begin_inbox().await?;
        beat(&mut tx, lease).await?;
        tx.commit().await
    }

    /// Marks rows admitted (they stay, for recognizing redeliveries, until the clean-up).
    pub async fn admitted(self, ids: &[i64], at: OffsetDateTime) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        let rows = ids.iter().map(|id| vec![Param::from(*id), Param::from(to_ms(at))]).collect();
        // A mark lost with a crash of the database reads as a redelivery: it need not be flushed.
        let mut tx = self.store.inbox_db.begin_losable(self.store.health.clone()).await?;
        let (set, matching) = ("admitted_at = v.column2", "inbox.id = v.column1");
        update_rows(&mut tx, ("inbox", set, matching), 2, rows).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The rows not yet admitted, and when the oldest of them was stored.
    pub async fn backlog(self) -> Result<(i64, Option<OffsetDateTime>), StoreError> {
        let sql = "SELECT COUNT(*) AS pending, MIN(received_at) AS oldest FROM inbox
                   WHERE admitted_at IS NULL AND awaiting_address IS NULL";
        let row = sqlx::query(sql).fetch_one(self.store.inbox_pool()).await?;
        Ok((int(&row, "pending")?, opt_int(&row, "oldest")?.map(from_ms).transpose()?))
    }

    /// Removes the admitted rows of the conversations with any of `names` (an erasure).
    pub async fn forget_admitted_of(self, names: &[String]) -> Result<(), StoreError> {
        let mut tx = self.store.begin_inbox().await?;
        for name in names {
            let conversation = format!("%:{}", crate::store::directory::like_escaped(name));
            sqlx::query("DELETE FROM inbox WHERE admitted_at IS NOT NULL AND conversation_id LIKE $1 ESCAPE '\\'")
                .bind(conversation)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await
    }

    /// Removes rows admitted before `before`, and instances dead since then with nothing left to
    /// admit; returns how many rows.
    /// At `pace`: the inbox's rows are what the webhooks' answers write.
    pub async fn forget_admitted(self, before: OffsetDateTime, pace: &mut Pace) -> Result<u64, StoreError> {
        let rows = self.store.delete_done(&ADMITTED, to_ms(before), Door::Inbox, pace).await?;
        self.store.delete_done(&DEAD_OWNERS, to_ms(before), Door::Inbox, pace).await?;
        Ok(rows)
    }
}

/// The columns a claim reads.
const CLAIMED: &str = "id, channel, provider_message_id, conversation_id, payload, hold_ms, trace_parent, received_at, \
                       owner, released";

/// The other instances alive at `now` (none on SQLite, which one process writes: rows another
/// owner left are a dead process's).
async fn others_alive(
    conn: &mut sqlx::AnyConnection,
    backend: BackendKind,
    owner: &str,
    now: OffsetDateTime,
) -> Result<Vec<String>, StoreError> {
    if backend == BackendKind::Sqlite {
        return Ok(vec![]);
    }
    let rows = sqlx::query("SELECT owner FROM inbox_owners WHERE alive_until > $1 AND owner <> $2")
        .bind(to_ms(now))
        .bind(owner)
        .fetch_all(&mut *conn)
        .await?;
    rows.iter().map(|row| text(row, "owner")).collect()
}

async fn beat(conn: &mut sqlx::AnyConnection, lease: Lease<'_>) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO inbox_owners (owner, alive_until) VALUES ($1, $2)
         ON CONFLICT (owner) DO UPDATE SET alive_until = excluded.alive_until",
    )
    .bind(lease.owner)
    .bind(to_ms(lease.until))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

fn row(entry: &NewInboxEntry, lease: Lease<'_>, received_at: OffsetDateTime) -> Vec<Param> {
    let hold = entry.hold.map(|hold| i64::try_from(hold.as_millis()).unwrap_or(i64::MAX));
    vec![
        entry.channel.as_str().into(),
        entry.provider_message_id.as_str().into(),
        entry.conversation_id.as_str().into(),
        entry.payload.as_str().into(),
        hold.into(),
        entry.trace_parent.clone().into(),
        to_ms(received_at).into(),
        lease.owner.into(),
        i64::from(entry.answer_waits).into(),
    ]
}

/// A claimed row, and the instance it was whose.
fn entry(row: &sqlx::any::AnyRow) -> Result<(InboxEntry, String), StoreError> {
    let entry = InboxEntry {
        id: int(row, "id")?,
        channel: text(row, "channel")?,
        provider_message_id: text(row, "provider_message_id")?,
        conversation_id: text(row, "conversation_id")?,
        payload: text(row, "payload")?,
        hold: opt_int(row, "hold_ms")?.map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or_default())),
        trace_parent: crate::store::rows::opt_text(row, "trace_parent")?,
        received_at: from_ms(int(row, "received_at")?)?,
        released: crate::store::rows::opt_text(row, "released")?.as_deref().map(Released::parse).transpose()?,
    };
    Ok((entry, text(row, "owner")?))
}
