//! One event stream: a tenant's moves after a given id, live, until what opened it ends — the
//! token's expiry, the console session's end (sign-out, or its time), or the gateway stopping.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use time::OffsetDateTime;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::hub::{BATCH, MoveHub};
use super::slots::StreamSlot;
use crate::domain::command::TenantId;
use crate::service::security::Principal;
use crate::store::{StoreError, StoredMove};

/// How often a stream opened by a console session checks that the session is still open (a
/// sign-out on this instance closes it at once; on another one, within this).
pub const SESSION_CHECK: Duration = Duration::from_secs(5);

pub struct TenantStream {
    hub: MoveHub,
    head: watch::Receiver<i64>,
    tenant: TenantId,
    /// The last move this stream has gone past.
    after: i64,
    pending: VecDeque<Arc<StoredMove>>,
    lifetime: Lifetime,
    stopping: CancellationToken,
    _slot: StreamSlot,
}

/// Until when a stream may live, and the session it depends on.
struct Lifetime {
    ends_at: Option<OffsetDateTime>,
    /// The console session that opened the stream (its id's hash), checked now and then.
    session: Option<String>,
    /// When the session was last found open (`None`: ask at the next chance).
    checked: Option<Instant>,
    sessions_ended: Arc<Notify>,
}

impl TenantStream {
    /// A stream of `principal`'s tenant after move `after` (`None`: from now on), in `slot`.
    pub async fn open(
        streams: &super::EventStreams,
        principal: &Principal,
        after: Option<i64>,
        slot: StreamSlot,
        stopping: CancellationToken,
    ) -> Result<Self, StoreError> {
        let head = streams.hub.subscribe().await?;
        let after = after.unwrap_or(*head.borrow());
        let lifetime = Lifetime {
            ends_at: principal.expires_at,
            session: principal.session.clone(),
            checked: Some(Instant::now()),
            sessions_ended: streams.sessions_ended(),
        };
        let (hub, tenant) = (streams.hub.clone(), principal.tenant.clone());
        Ok(Self { hub, head, tenant, after, pending: VecDeque::new(), lifetime, stopping, _slot: slot })
    }

    /// The next move, or `None` when the stream ends.
    pub async fn next(&mut self) -> Option<Arc<StoredMove>> {
        loop {
            if let Some(next) = self.pending.pop_front() {
                return Some(next);
            }
            if self.stopping.is_cancelled() || !self.lifetime.still_open(&self.hub).await {
                return None;
            }
            let head = *self.head.borrow_and_update();
            if head > self.after {
                self.take_up_to(head).await;
                continue;
            }
            let ended = self.lifetime.ends_at.map(until);
            let ended = async move {
                match ended {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => std::future::pending().await,
                }
            };
            let session_ended = self.lifetime.sessions_ended.clone();
            tokio::select! {
                () = self.stopping.cancelled() => return None,
                changed = self.head.changed() => if changed.is_err() { return None },
                () = ended => return None,
                () = session_ended.notified(), if self.lifetime.session.is_some() => self.lifetime.recheck(),
                () = tokio::time::sleep(SESSION_CHECK), if self.lifetime.session.is_some() => {}
            }
        }
    }

    /// The tenant's moves after `after` up to `head`: from the hub's memory, or from the database
    /// when the stream is further behind than the memory reaches.
    async fn take_up_to(&mut self, head: i64) {
        if let Some(moves) = self.hub.recent(&self.tenant, self.after, head) {
            self.pending.extend(moves);
            self.after = head;
            return;
        }
        match self.hub.store().commands().moves_since(self.after, BATCH).await {
            Ok(moves) => {
                let complete = (moves.len() as i64) < BATCH || moves.last().is_some_and(|m| m.id >= head);
                let upto: Vec<StoredMove> = moves.into_iter().take_while(|m| m.id <= head).collect();
                let reached = upto.last().map_or(head, |m| m.id);
                self.after = if complete { head } else { reached };
                self.pending.extend(upto.into_iter().filter(|m| m.tenant_id == self.tenant).map(Arc::new));
            }
            Err(error) => {
                tracing::warn!(%error, "an event stream cannot catch up from the database");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

impl Lifetime {
    /// Whether the token or session that opened the stream still stands.
    async fn still_open(&mut self, hub: &MoveHub) -> bool {
        let now = OffsetDateTime::now_utc();
        if self.ends_at.is_some_and(|end| now >= end) {
            return false;
        }
        let Some(session) = &self.session else { return true };
        if self.checked.is_some_and(|at| at.elapsed() < SESSION_CHECK) {
            return true;
        }
        self.checked = Some(Instant::now());
        // A database that cannot answer does not end the stream; the next check decides.
        hub.store().console().find(session, now).await.map_or(true, |found| found.is_some())
    }

    /// The next `still_open` asks the database again.
    fn recheck(&mut self) {
        self.checked = None;
    }
}

fn until(end: OffsetDateTime) -> Duration {
    Duration::try_from(end - OffsetDateTime::now_utc()).unwrap_or(Duration::ZERO)
}
