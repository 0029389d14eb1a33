//! Sends due prompts and replies: each tick drains what is due, batch after batch.

use std::time::Duration;

use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::workers::sender::Sender;

pub(super) async fn run(sender: Sender, every: Duration, stopping: CancellationToken) {
    let draining = stopping.clone();
    let handoff = sender.open_handoff();
    let wakes = sender.engine().sending().signals();
    crate::workers::woken_or_periodically(every, stopping, wakes, || async {
        loop {
            match sender.send_due(OffsetDateTime::now_utc()).await {
                Ok(claimed) if claimed < sender.batch() || draining.is_cancelled() => break,
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, "outbound sender cannot reach the database");
                    break;
                }
            }
        }
    })
    .await;
    let kept = handoff.map(|handoff| handoff.close()).unwrap_or_default();
    if let Err(error) = sender.engine().sending().release_handed(&kept).await {
        tracing::warn!(%error, "handed messages not let go; they are claimed when their lease ends");
    }
}
