//! Rows handed over in memory. While this process's dispatcher (or sender) runs, a dispatch row
//! (a message to a person) that one of its own commits writes is written already leased to it,
//! as a claim would lease it, and is handed to it once the transaction commits: it reaches its
//! worker without a claim of its own, a write transaction fewer on each command's way and a
//! commit fewer of its latency. The lease keeps it safe as it keeps a claim safe: a row handed
//! over and then not worked on (the process stopped, the worker fell behind) is claimed again
//! when its lease ends, by this process or another. A row a claim would not take now stays in
//! the table: a dispatch to a paused agent, a message held for a provider's HTTP answer, or one
//! to a person an earlier message still waits for (their order is kept).

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::{ClaimedMessage, DISPATCH_KIND, MESSAGE_KIND, NewOutboxMessage};
use crate::config::BackendKind;
use crate::store::rows::text;
use crate::store::{Store, StoreError, Tx};

/// The rows of one kind this process's commits handed to its worker, oldest first.
#[derive(Debug, Default)]
pub struct Handoff {
    open: AtomicBool,
    lease_ms: AtomicU64,
    rows: Mutex<VecDeque<(ClaimedMessage, Instant)>>,
    /// When the worker last claimed from the table (rows other instances wrote, retries).
    looked: Mutex<Option<Instant>>,
}

impl Handoff {
    /// How long a handed row is leased for.
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms.load(Ordering::Relaxed))
    }

    fn is_open(&self) -> bool {
        self.open.load(Ordering::SeqCst)
    }

    /// No row is handed over any more (the worker stops): the ids of those handed and not
    /// taken, whose leases the caller lets go ([`Store::release_handed`]).
    pub fn close(&self) -> Vec<uuid::Uuid> {
        self.open.store(false, Ordering::SeqCst);
        self.queue().drain(..).map(|(row, _)| row.id).collect()
    }

    /// Up to `limit` handed rows, oldest first, each with at least half its lease left (one
    /// older is left to whoever claims it when the lease ends, as a claimed row that waited
    /// too long for its executor's lane is).
    fn take(&self, limit: usize) -> Vec<ClaimedMessage> {
        let half = self.lease() / 2;
        let mut queue = self.queue();
        let mut taken = Vec::with_capacity(limit.min(queue.len()));
        while taken.len() < limit {
            match queue.pop_front() {
                Some((row, leased)) if leased.elapsed() <= half => taken.push(row),
                Some((row, _)) => tracing::debug!(id = %row.id, "a handed row waited too long; claimed later"),
                None => break,
            }
        }
        taken
    }

    /// Whether the worker should claim from the table now: nothing was handed, or it last did
    /// `every` ago or longer (so that rows handed without a pause never starve the others);
    /// `true` records that it does.
    fn claim_now(&self, handed: usize, every: Duration) -> bool {
        let mut looked = self.looked.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let due = handed == 0 || looked.is_none_or(|at| at.elapsed() >= every);
        if due {
            *looked = Some(Instant::now());
        }
        due
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<(ClaimedMessage, Instant)>> {
        self.rows.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The handoffs of a store and of every clone of it, each made when its worker first opens it.
#[derive(Debug, Default)]
pub(crate) struct Handoffs {
    dispatch: OnceLock<Arc<Handoff>>,
    message: OnceLock<Arc<Handoff>>,
}

/// The people of a JSON list an earlier message waits for. SQLite's only (messages are handed
/// over on SQLite only), through the pending rows' index by person: left to itself the planner
/// reads every pending message (`outbox_claim_due`), a backlog's worth per transaction.
const WAITING: &str = "SELECT DISTINCT destination FROM outbox INDEXED BY outbox_pending_by_destination \
     WHERE status = 'pending' AND kind = 'message' AND destination IN (SELECT value FROM json_each($1))";

impl Handoffs {
    fn slot(&self, kind: &str) -> Option<&OnceLock<Arc<Handoff>>> {
        match kind {
            DISPATCH_KIND => Some(&self.dispatch),
            MESSAGE_KIND => Some(&self.message),
            _ => None,
        }
    }

    /// The handoff of `kind` while its worker takes from it.
    fn open(&self, kind: &str) -> Option<&Arc<Handoff>> {
        self.slot(kind)?.get().filter(|handoff| handoff.is_open())
    }

    /// Whether any worker takes rows now (a transaction then notes what it hands over).
    pub(crate) fn any_open(&self) -> bool {
        self.open(DISPATCH_KIND).is_some() || self.open(MESSAGE_KIND).is_some()
    }

    /// Called once a transaction that wrote `rows` leased committed.
    pub(crate) fn hand(&self, rows: Vec<(ClaimedMessage, Instant)>) {
        for (row, leased) in rows {
            if let Some(handoff) = self.open(&row.kind) {
                handoff.queue().push_back((row, leased));
            }
        }
    }
}

impl Store {
    /// Opens the handoff of `kind`'s rows for a worker that leases for `lease`. Messages are
    /// handed over on SQLite only, where the one writer at a time makes "no earlier message to
    /// this person waits" true until the commit; on PostgreSQL another instance's transaction
    /// could write one meanwhile, and the claim's order is what keeps a person's messages in
    /// theirs.
    pub fn open_handoff(&self, kind: &str, lease: Duration) -> Option<Arc<Handoff>> {
        if kind == MESSAGE_KIND && self.backend() != BackendKind::Sqlite {
            return None;
        }
        let handoff = self.handoffs.slot(kind)?.get_or_init(Arc::default).clone();
        handoff.lease_ms.store(u64::try_from(lease.as_millis()).unwrap_or(u64::MAX), Ordering::Relaxed);
        handoff.open.store(true, Ordering::SeqCst);
        Some(handoff)
    }

    /// Up to `limit` handed rows of `kind` to work on (none while no worker opened its handoff).
    pub fn handed(&self, kind: &str, limit: usize) -> Vec<ClaimedMessage> {
        self.handoffs.open(kind).map(|handoff| handoff.take(limit)).unwrap_or_default()
    }

    /// Up to `limit` rows of `kind` to work on, leased for `lease`: those this process's
    /// commits handed over first, then, when none was or the table was last looked at `every`
    /// ago, due rows claimed from it (other instances' rows, retries, rows whose lease ended);
    /// and whether the table was looked at.
    pub async fn take_due(
        &self,
        kind: &str,
        limit: i64,
        (lease, every): (Duration, Duration),
        now: time::OffsetDateTime,
    ) -> Result<(Vec<ClaimedMessage>, bool), StoreError> {
        let mut rows = self.handed(kind, usize::try_from(limit).unwrap_or(0));
        let left = limit - i64::try_from(rows.len()).unwrap_or(limit);
        let handed = rows.len();
        let look = left > 0 && self.handoffs.open(kind).is_none_or(|handoff| handoff.claim_now(handed, every));
        if look {
            rows.extend(self.outbox().claim(kind, left, lease, now).await?);
        }
        Ok((rows, look))
    }

    /// Lets go of the leases of handed rows no one took (a stopping worker's), so that the
    /// next worker, here or on another instance, claims them at once.
    pub async fn release_handed(&self, ids: &[uuid::Uuid]) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        let list = serde_json::to_string(ids).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let sql = format!(
            "UPDATE outbox SET locked_until = NULL WHERE status = 'pending' AND id IN ({})",
            self.dialect().texts_of_list()
        );
        let mut tx = self.begin().await?;
        sqlx::query(sqlx::AssertSqlSafe(sql)).bind(list).execute(&mut *tx).await?;
        tx.commit().await
    }
}

/// What keeps rows of a transaction in the table though their worker takes them in memory.
#[derive(Debug, Default)]
pub(super) struct Holds {
    /// The paused agents.
    paused: BTreeSet<String>,
    /// The people an earlier message still waits for.
    waiting: BTreeSet<String>,
}

/// Whether `message`, written in `tx`, is written leased and handed over: its worker takes
/// them, it is due at once, and nothing in `holds` keeps it: the lease it is written with.
pub(super) fn handed_over(tx: &Tx, message: &NewOutboxMessage, holds: &Holds) -> Option<Duration> {
    let handoff = tx.handoffs.as_ref()?.open(&message.kind)?;
    let held = match message.kind.as_str() {
        DISPATCH_KIND => holds.paused.contains(&message.destination),
        _ => holds.waiting.contains(&message.destination),
    };
    (message.hold.is_none() && !held).then(|| handoff.lease())
}

/// What keeps `messages` in the table, read only where one of them may be handed over.
pub(super) async fn holds(
    tx: &mut Tx,
    messages: &[(&str, Option<uuid::Uuid>, &NewOutboxMessage, time::OffsetDateTime)],
) -> Result<Holds, StoreError> {
    let Some(handoffs) = tx.handoffs.clone() else { return Ok(Holds::default()) };
    let handing = |kind: &str| handoffs.open(kind).is_some() && messages.iter().any(|(_, _, m, _)| m.kind == kind);
    let mut holds = Holds::default();
    if handing(DISPATCH_KIND) {
        let names: Vec<String> =
            sqlx::query_scalar("SELECT name FROM agents WHERE state = 'paused'").fetch_all(&mut **tx).await?;
        holds.paused = names.into_iter().collect();
    }
    if handing(MESSAGE_KIND) {
        let people: Vec<&str> = messages.iter().map(|(_, _, m, _)| m.destination.as_str()).collect();
        let list = serde_json::to_string(&people).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let rows = sqlx::query(WAITING).bind(list).fetch_all(&mut **tx).await?;
        holds.waiting = rows.iter().map(|row| text(row, "destination")).collect::<Result<_, _>>()?;
    }
    Ok(holds)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;
    use time::OffsetDateTime;

    use super::super::{DISPATCH_KIND, MESSAGE_KIND, NewOutboxMessage, insert_outboxes};
    use crate::store::Store;

    fn row(kind: &str, destination: &str) -> NewOutboxMessage {
        NewOutboxMessage { kind: kind.into(), destination: destination.into(), payload: json!({}), hold: None }
    }

    /// Written as of an hour ago, as an admission writes a message received long before: a
    /// handed row's lease still counts from its writing.
    async fn write(store: &Store, rows: &[NewOutboxMessage], commit: bool) {
        let now = OffsetDateTime::now_utc() - Duration::from_secs(3_600);
        let mut tx = store.begin().await.expect("begin");
        let messages = rows.iter().map(|row| ("demo", None, row, now)).collect();
        let moved = insert_outboxes(&mut tx, messages).await.expect("insert");
        tx.figures.merge(moved);
        match commit {
            true => tx.commit().await.expect("commit"),
            false => tx.rollback().await.expect("rollback"),
        }
    }

    async fn claimable(store: &Store, kind: &str) -> usize {
        let lease = Duration::from_secs(60);
        store.outbox().claim(kind, 10, lease, OffsetDateTime::now_utc()).await.expect("claim").len()
    }

    fn destinations(store: &Store, kind: &str) -> Vec<(String, i64)> {
        store.handed(kind, 10).into_iter().map(|r| (r.destination, r.attempt)).collect()
    }

    /// A dispatch row written while a dispatcher takes them reaches it leased, once its
    /// transaction commits, and no claim finds it; a paused agent's dispatch or a rolled back
    /// one is never handed; closing lets go of the leases of rows not taken.
    #[tokio::test]
    async fn a_committed_dispatch_is_handed_over_leased_and_a_closed_handoff_lets_go_of_what_it_kept() {
        let (_folder, store) = Store::scratch().await;
        store.migrate().await.expect("migrated");
        write(&store, &[row(DISPATCH_KIND, "orders")], true).await;
        assert!(destinations(&store, DISPATCH_KIND).is_empty(), "nothing is handed while no worker takes them");
        assert_eq!(claimable(&store, DISPATCH_KIND).await, 1, "written as before: claimed from the table");

        let handoff = store.open_handoff(DISPATCH_KIND, Duration::from_secs(60)).expect("a handoff");
        let pause = "INSERT INTO agents (name, state, version, pre_pause_state, updated_by, entered_at) \
                     VALUES ('paused-one', 'paused', 1, 'idle', 'test', 0)";
        sqlx::query(pause).execute(store.pool()).await.expect("a paused agent");
        write(&store, &[row(DISPATCH_KIND, "orders"), row(DISPATCH_KIND, "paused-one")], true).await;
        write(&store, &[row(DISPATCH_KIND, "orders")], false).await;
        assert_eq!(destinations(&store, DISPATCH_KIND), [("orders".to_owned(), 1)]);
        sqlx::query("UPDATE agents SET state = 'idle'").execute(store.pool()).await.expect("resumed");
        assert_eq!(claimable(&store, DISPATCH_KIND).await, 1, "the paused agent's row waited in the table");

        write(&store, &[row(DISPATCH_KIND, "orders"), row(DISPATCH_KIND, "orders")], true).await;
        assert_eq!(store.handed(DISPATCH_KIND, 1).len(), 1, "at most the limit");
        let kept = handoff.close();
        assert_eq!(kept.len(), 1);
        assert_eq!(claimable(&store, DISPATCH_KIND).await, 0, "still leased until let go");
        store.release_handed(&kept).await.expect("release");
        assert_eq!(claimable(&store, DISPATCH_KIND).await, 1, "let go: claimed at once");
        write(&store, &[row(DISPATCH_KIND, "orders")], true).await;
        assert!(destinations(&store, DISPATCH_KIND).is_empty(), "closed: nothing handed");
    }

    /// A message is handed to the sender only where no earlier message to its person waits in
    /// the table (sent or held): the later one waits its turn there, so a person's messages
    /// keep their order. Two to a person nothing waited for go together, in order.
    #[tokio::test]
    async fn a_message_is_handed_over_only_where_none_to_its_person_waits_before_it() {
        let (_folder, store) = Store::scratch().await;
        store.migrate().await.expect("migrated");
        write(&store, &[row(MESSAGE_KIND, "whatsapp:waiting")], true).await;
        store.open_handoff(MESSAGE_KIND, Duration::from_secs(60)).expect("a handoff on SQLite");
        let (waiting, free) = (row(MESSAGE_KIND, "whatsapp:waiting"), row(MESSAGE_KIND, "whatsapp:free"));
        let mut later = row(MESSAGE_KIND, "whatsapp:free");
        later.payload = json!({"second": true});
        write(&store, &[waiting, free, later], true).await;
        let handed = store.handed(MESSAGE_KIND, 10);
        let seen: Vec<_> = handed.iter().map(|r| (r.destination.as_str(), r.payload.get("second").is_some())).collect();
        assert_eq!(seen, [("whatsapp:free", false), ("whatsapp:free", true)]);
        let from_table = claimable(&store, MESSAGE_KIND).await;
        assert_eq!(from_table, 2, "both to the waiting person, from the table, in order");
    }
}
