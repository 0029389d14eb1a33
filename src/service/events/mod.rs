//! The event streams (`GET /v1/events`): each tenant's moves, live, to every open stream.
//!
//! - `cursor`: reading moves in the order of their ids, waiting out a gap a slower transaction
//!   leaves (move 41 may commit after 42).
//! - `hub`: one reader per process. A commit wakes it, it reads the new moves once and keeps the
//!   latest in memory; every stream takes its tenant's from there. A commit costs one read,
//!   whether one stream is open or a hundred.
//! - `slots`: how many streams may be open, per client and in all; one more is refused.
//! - `stream`: one stream: from where it starts (or resumes with `Last-Event-ID`), through the
//!   hub, until the token or console session that opened it ends, or the gateway stops.

mod cursor;
mod hub;
mod slots;
mod stream;

pub use cursor::{GAP_GRACE, MoveCursor};
pub use hub::MoveHub;
pub use slots::{StreamSlot, StreamSlots, TooManyStreams};
pub use stream::TenantStream;

use std::sync::Arc;

use tokio::sync::Notify;

use crate::config::EventsConfig;
use crate::store::Store;

/// What the event streams of a process share: the hub, the slots and the news of console
/// sessions that ended here.
#[derive(Debug, Clone)]
pub struct EventStreams {
    pub hub: MoveHub,
    pub slots: Arc<StreamSlots>,
    sessions_ended: Arc<Notify>,
}

impl EventStreams {
    pub fn new(store: Store, config: &EventsConfig) -> Self {
        Self {
            hub: MoveHub::new(store),
            slots: Arc::new(StreamSlots::new(config.max_streams, config.max_streams_per_client)),
            sessions_ended: Arc::default(),
        }
    }

    /// A console session was ended here: the streams it opened close at once (those of other
    /// instances find out within `stream::SESSION_CHECK`).
    pub fn session_ended(&self) {
        self.sessions_ended.notify_waiters();
    }

    pub(crate) fn sessions_ended(&self) -> Arc<Notify> {
        self.sessions_ended.clone()
    }
}
