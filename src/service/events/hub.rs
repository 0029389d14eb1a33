//! One reader of moves for every event stream of the process. A commit of moves (this process's,
//! or any instance's on PostgreSQL) wakes it; it reads what is new once, in id order and past any
//! gap (`MoveCursor`), keeps the latest moves in memory and says how far it has read. Streams take
//! their tenant's moves from that memory, so an open stream costs no query per commit; one that
//! fell further behind than the memory reaches reads the database itself, up to where the hub is.

use std::collections::VecDeque;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use tokio::sync::{Mutex, watch};

use super::cursor::MoveCursor;
use crate::domain::command::TenantId;
use crate::store::{Store, StoreError, StoredMove};

/// How many of the latest moves are kept for the streams.
const KEPT: usize = 4_096;
/// How many moves one read takes.
pub(super) const BATCH: i64 = 500;
/// How often the hub reads when nothing wakes it (a listener reconnecting may miss a commit).
const FALLBACK_POLL: Duration = Duration::from_secs(10);
/// How often it reads while it waits for a gap in the ids.
const GAP_POLL: Duration = Duration::from_millis(250);

#[derive(Debug, Clone)]
pub struct MoveHub {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Store,
    /// The latest moves, in id order, every one up to `head`.
    recent: RwLock<VecDeque<Arc<StoredMove>>>,
    /// The id the hub has read up to: every move up to it is committed and read.
    head: watch::Sender<i64>,
    /// Whether the reader runs; held while a stream subscribes and while the reader stops.
    running: Mutex<bool>,
}

impl MoveHub {
    pub fn new(store: Store) -> Self {
        let inner = Inner { store, recent: RwLock::default(), head: watch::Sender::new(0), running: Mutex::new(false) };
        Self { inner: Arc::new(inner) }
    }

    /// How far the hub has read, told on every change; the hub reads while anyone listens. A
    /// hub that starts (again) begins with what commits from now on.
    pub async fn subscribe(&self) -> Result<watch::Receiver<i64>, StoreError> {
        let mut running = self.inner.running.lock().await;
        if !*running {
            let last = self.inner.store.commands().last_move_id().await?;
            self.inner.recent.write().unwrap_or_else(PoisonError::into_inner).clear();
            self.inner.head.send_replace(last);
            tokio::spawn(read_while_listened(self.inner.clone()));
            *running = true;
        }
        Ok(self.inner.head.subscribe())
    }

    /// The tenant's moves after `after` up to `upto`, from memory; `None` when memory no longer
    /// reaches back to `after` (the caller reads the database).
    pub fn recent(&self, tenant: &TenantId, after: i64, upto: i64) -> Option<Vec<Arc<StoredMove>>> {
        let recent = self.inner.recent.read().unwrap_or_else(PoisonError::into_inner);
        let oldest = recent.front().map_or(*self.inner.head.borrow(), |m| m.id - 1);
        if after < oldest {
            return None;
        }
        let from = recent.partition_point(|m| m.id <= after);
        let mine = recent.range(from..).take_while(|m| m.id <= upto).filter(|m| &m.tenant_id == tenant);
        Some(mine.cloned().collect())
    }

    pub(super) fn store(&self) -> &Store {
        &self.inner.store
    }
}

/// Reads new moves whenever moves are committed, for as long as any stream listens.
async fn read_while_listened(inner: Arc<Inner>) {
    let mut moved = inner.store.moves_feed();
    let mut cursor = MoveCursor::new(*inner.head.borrow());
    loop {
        // What this read covers: a commit after it wakes the hub again.
        moved.mark_unchanged();
        let wait = match inner.store.commands().moves_since(cursor.after(), BATCH).await {
            Ok(moves) => {
                let full = moves.len() as i64 == BATCH;
                let numbered = moves.into_iter().map(|m| (m.id, Some(m)));
                let (ready, waiting) = cursor.take(numbered.collect(), std::time::Instant::now());
                keep(&inner, ready.into_iter().map(|(_, m)| Arc::new(m)), cursor.after());
                match (full, waiting) {
                    (true, false) => continue,
                    (_, true) => GAP_POLL,
                    _ => FALLBACK_POLL,
                }
            }
            Err(error) => {
                tracing::warn!(%error, "the event streams cannot read the moves");
                Duration::from_secs(1)
            }
        };
        tokio::select! {
            () = inner.head.closed() => {}
            _ = moved.changed() => {}
            () = tokio::time::sleep(wait) => {}
        }
        if inner.head.receiver_count() == 0 {
            // Streams subscribe holding this: none can come between the count and the stop.
            let mut running = inner.running.lock().await;
            if inner.head.receiver_count() == 0 {
                *running = false;
                return;
            }
        }
    }
}

/// Keeps `moves` (in id order) and tells the streams the hub has read up to `head`.
fn keep(inner: &Inner, moves: impl Iterator<Item = Arc<StoredMove>>, head: i64) {
    let mut recent = inner.recent.write().unwrap_or_else(PoisonError::into_inner);
    recent.extend(moves);
    let over = recent.len().saturating_sub(KEPT);
    recent.drain(..over);
    drop(recent);
    inner.head.send_if_modified(|current| std::mem::replace(current, head) != head);
}
