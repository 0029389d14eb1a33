//! Sends due prompts and replies: each tick drains what is due, batch after batch.

use std::time::Duration;

use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::workers::sender::Sender;

pub(super) async fn run(sender: Sender, every: Duration, stopping: CancellationToken) {
    let draining = stopping.clone();
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
}
