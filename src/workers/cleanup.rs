//! Removes dedupe records whose window has passed (IDS §VIII.C), used step-up tokens an hour
//! after they expired (by then no clock skew can make them valid again), inbox rows an hour
//! after their admission (a later redelivery is still recognized by its inbound record), and the
//! per-minute figures older than the hour `/metrics` adds up.

use std::time::Duration;

use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::store::Store;

pub(super) async fn run(store: Store, every: Duration, stopping: CancellationToken) {
    crate::workers::periodically(every, stopping, || async {
        match store.dedupe().purge_expired(OffsetDateTime::now_utc()).await {
            Ok(0) => {}
            Ok(removed) => tracing::info!(removed, "expired dedupe records removed"),
            // The next tick tries again; a database that is down is reported by /readyz.
            Err(error) => tracing::warn!(%error, "dedupe cleanup failed"),
        }
        let an_hour_ago = OffsetDateTime::now_utc() - Duration::from_secs(3600);
        if let Err(error) = store.tokens().purge_consumed(an_hour_ago).await {
            tracing::warn!(%error, "used-token cleanup failed");
        }
        if let Err(error) = store.inbox().forget_admitted(an_hour_ago).await {
            tracing::warn!(%error, "inbox cleanup failed");
        }
        // The per-minute figures a scrape no longer adds up (it reads the last hour's).
        if let Err(error) = store.forget_figures(an_hour_ago - Duration::from_secs(120)).await {
            tracing::warn!(%error, "figures cleanup failed");
        }
    })
    .await;
}
