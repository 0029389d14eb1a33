//! Removes dedupe records whose window has passed (IDS §VIII.C), used step-up tokens an hour
//! after they expired (by then no clock skew can make them valid again), inbox rows an hour
//! after their admission (a later redelivery is still recognized by its inbound record), and the
//! per-minute figures older than the hour `/metrics` adds up, and the conversations that ended
//! quietly (a command written in turns left alone past `ingest.conversation_idle_secs`); and
//! runs a pass of the retention purge (`service::retention`): texts past `retention.texts`,
//! records past `retention.records`, each tenant's own where the directory gives one.

use std::time::Duration;

use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::config::RetentionConfig;
use crate::domain::directory::Tenants;
use crate::service::database::Database;
use crate::service::live::Live;
use crate::service::retention::{PurgeMode, RetentionPolicy};

/// What the clean-up reads: the database, `[retention]`, and the directory's tenants as reloaded.
pub(super) struct Cleanup {
    pub database: Database,
    pub retention: RetentionConfig,
    pub tenants: Live<Tenants>,
}

pub(super) async fn run(cleanup: Cleanup, every: Duration, stopping: CancellationToken) {
    let Cleanup { database, retention, tenants } = cleanup;
    crate::workers::periodically(every, stopping, || async {
        let now = OffsetDateTime::now_utc();
        let tenants = tenants.get();
        match database.purge(RetentionPolicy { default: &retention, tenants: &tenants }, now, PurgeMode::Purge).await {
            Ok(pass) => {
                let (texts, records) = (pass.texts(), pass.records());
                if texts.total() + records.total() > 0 {
                    let (messages, replies, prompts) = (texts.messages, texts.replies, texts.prompts);
                    tracing::info!(messages, replies, prompts, "texts past their retention overwritten");
                    let (commands, evidence) = (records.commands, records.evidence);
                    tracing::info!(commands, evidence, total = records.total(), "records past their retention deleted");
                }
            }
            Err(error) => tracing::warn!(%error, "the retention purge failed; the next pass takes what it left"),
        }
        let tidied = database.tidy(now, now - Duration::from_secs(3600), &retention).await;
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
