//! Expires confirmations nobody answered in time: their commands are canceled and the person is
//! told, without waiting for anyone to write again.

use std::time::Duration;

use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::service::confirmations::answers;
use crate::service::engine::Engine;

const PER_SWEEP: i64 = 100;

pub(super) async fn run(engine: Engine, every: Duration, stopping: CancellationToken) {
    crate::workers::periodically(every, stopping, || async {
        match answers::expire_due(&engine, OffsetDateTime::now_utc(), PER_SWEEP).await {
            Ok(0) => {}
            Ok(expired) => tracing::info!(expired, "confirmations expired"),
            Err(error) => tracing::warn!(%error, "confirmation sweep failed"),
        }
    })
    .await;
}
