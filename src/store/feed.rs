//! Wakes the readers of moves (the event stream, the console's live pages) when moves are
//! committed: this process's commits at once, and on PostgreSQL every instance's through
//! `LISTEN/NOTIFY` (a trigger on `command_transitions` notifies `chatgate_moves` once per
//! transaction: migration `0016_move_notify`). The readers then read the table, which is what
//! they send; a wake-up carries nothing, so one lost (a listener reconnecting) costs only delay.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::postgres::PgListener;
use tokio::sync::watch;

/// The channel the trigger notifies.
const CHANNEL: &str = "chatgate_moves";

/// A counter that grows with every commit of moves seen; readers wait for it to change.
#[derive(Debug)]
pub struct MoveFeed {
    moved: watch::Sender<u64>,
    /// PostgreSQL's URL, listened to while anyone subscribes.
    listen_url: Option<String>,
    listening: Arc<AtomicBool>,
}

impl MoveFeed {
    pub(crate) fn new(listen_url: Option<String>) -> Self {
        Self { moved: watch::Sender::new(0), listen_url, listening: Arc::default() }
    }

    /// Moves were committed (here, or elsewhere as a notification says).
    pub(crate) fn bump(&self) {
        bump(&self.moved);
    }

    /// Changes whenever moves are committed; on PostgreSQL, by any instance.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        let receiver = self.moved.subscribe();
        if let Some(url) = &self.listen_url
            && !self.listening.swap(true, Ordering::AcqRel)
        {
            let (url, moved, listening) = (url.clone(), self.moved.clone(), self.listening.clone());
            tokio::spawn(async move {
                // Ends when the last subscriber leaves; one that came meanwhile keeps it going.
                loop {
                    listen(&url, &moved).await;
                    listening.store(false, Ordering::Release);
                    if moved.receiver_count() == 0 || listening.swap(true, Ordering::AcqRel) {
                        return;
                    }
                }
            });
        }
        receiver
    }
}

fn bump(moved: &watch::Sender<u64>) {
    moved.send_modify(|n| *n = n.wrapping_add(1));
}

/// Listens until no one subscribes, connecting again after a failure.
async fn listen(url: &str, moved: &watch::Sender<u64>) {
    loop {
        let connected = async {
            let mut listener = PgListener::connect(url).await?;
            listener.listen(CHANNEL).await?;
            // Whatever happened while not listening is read now.
            bump(moved);
            loop {
                tokio::select! {
                    () = moved.closed() => return Ok::<_, sqlx::Error>(()),
                    received = listener.try_recv() => {
                        // `None`: the connection was lost and is made again; moves may have
                        // been missed meanwhile, so the readers read.
                        received?;
                        bump(moved);
                    }
                }
            }
        };
        match connected.await {
            Ok(()) => return,
            Err(error) => tracing::warn!(%error, "not listening for moves; the event streams poll meanwhile"),
        }
        tokio::select! {
            () = moved.closed() => return,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}
