//! Removes dedupe records whose window has passed (IDS §VIII.C), used step-up tokens an hour
//! after they expired (by then no clock skew can make them valid again), inbox rows an hour
//! after their admission (a later redelivery is still recognized by its inbound record), and the
//! per-minute figures older than the hour `/metrics` adds up, and the conversations that ended
//! quietly (a command written in turns left alone past `ingest.conversation_idle_secs`); and
//! overwrites the texts past `retention.texts` (`service::retention`).

use std::time::Duration;

use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::config::RetentionConfig;
use crate::service::database::Database;
use crate::service::retention::PurgeMode;

pub(super) async fn run(database: Database, retention: RetentionConfig, every: Duration, stopping: CancellationToken) {
    crate::workers::periodically(every, stopping, || async {
        let now = OffsetDateTime::now_utc();
        match database.purge_texts(&retention, now, PurgeMode::Purge).await {
            Ok(pass) if pass.total().total() > 0 => {
                let total = pass.total();
                let (messages, replies, prompts) = (total.messages, total.replies, total.prompts);
                tracing::info!(messages, replies, prompts, "texts past their retention overwritten");
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "the purge of texts past their retention failed"),
        }
        let tidied = database.tidy(now, now - Duration::from_secs(3600)).await;
        match tidied.duplicate_markers {
            Ok(0) => {}
            Ok(removed) => tracing::info!(removed, "expired dedupe records removed"),
            // The next tick tries again; a database that is down is reported by /readyz.
            Err(error) => tracing::warn!(%error, "dedupe cleanup failed"),
        }
        let parts = [
            ("used-token", tidied.tokens),
            ("inbox", tidied.inbox_rows),
            ("figures", tidied.figures),
            ("conversation", tidied.conversations),
            ("link-code", tidied.link_codes),
        ];
        for (part, error) in parts.into_iter().filter_map(|(part, done)| done.err().map(|error| (part, error))) {
            tracing::warn!(%error, "{part} cleanup failed");
        }
    })
    .await;
}
