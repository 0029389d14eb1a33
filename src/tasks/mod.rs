//! Background workers fed by the database. Each stops when the token is cancelled.

mod cleanup;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::app::AppState;

/// The running workers; `wait` returns when all have stopped.
pub struct Workers {
    tracker: TaskTracker,
}

impl Workers {
    pub async fn wait(self) {
        self.tracker.wait().await;
    }
}

pub fn spawn(state: &AppState, stopping: CancellationToken) -> Workers {
    let tracker = TaskTracker::new();
    tracker.spawn(cleanup::run(state.store.clone(), state.config.idempotency.cleanup_interval(), stopping));
    tracker.close();
    Workers { tracker }
}
