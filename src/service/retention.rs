//! Retention: one pass of the purge of texts (`retention.texts`), run by the clean-up worker and
//! by `chatgate purge`, tenant by tenant, each tenant's purge recorded in its evidence chain and
//! counted (`chatgate_retention_texts_purged_total`). A dry run counts what a pass as of a given
//! time would overwrite, and writes nothing.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::config::RetentionConfig;
use crate::domain::evidence::EvidenceDraft;
use crate::domain::evidence::decision::Decision;
use crate::domain::lifecycle::EvidenceKind;
use crate::service::database::{Database, StoreError};

pub use crate::store::PurgedTexts;

/// What one pass overwrote (or would), by tenant (`None`: messages of no tenant).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionPass {
    /// Texts received or sent before this were past their retention.
    pub texts_before: OffsetDateTime,
    pub tenants: Vec<(Option<String>, PurgedTexts)>,
}

impl RetentionPass {
    pub fn total(&self) -> PurgedTexts {
        self.tenants.iter().fold(PurgedTexts::default(), |sum, (_, purged)| PurgedTexts {
            messages: sum.messages + purged.messages,
            replies: sum.replies + purged.replies,
            prompts: sum.prompts + purged.prompts,
        })
    }
}

/// Whether a pass overwrites, or only counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PurgeMode {
    Purge,
    DryRun,
}

impl Database {
    /// One pass as of `now`: the texts older than `now - retention.texts`; each tenant's purge
    /// recorded in its chain once its texts are overwritten.
    pub async fn purge_texts(
        &self,
        retention: &RetentionConfig,
        now: OffsetDateTime,
        mode: PurgeMode,
    ) -> Result<RetentionPass, StoreError> {
        let before = now - retention.texts;
        let store = self.store();
        let by_tenant = match mode {
            PurgeMode::DryRun => store.count_old_texts(before).await?,
            PurgeMode::Purge => store.purge_old_texts(before, retention.batch).await?,
        };
        if mode == PurgeMode::Purge {
            for (tenant, purged) in &by_tenant {
                count(purged);
                if let Some(tenant) = tenant {
                    store.record_for_tenant(tenant, evidence(before, purged)).await?;
                }
            }
        }
        Ok(RetentionPass { texts_before: before, tenants: by_tenant.into_iter().collect() })
    }
}

fn evidence(before: OffsetDateTime, purged: &PurgedTexts) -> EvidenceDraft {
    let decision = Decision::TextsExpired {
        texts_before: before.format(&Rfc3339).unwrap_or_else(|_| before.unix_timestamp().to_string()),
        messages: purged.messages,
        replies: purged.replies,
        prompts: purged.prompts,
    };
    EvidenceDraft::of_tenant(EvidenceKind::RetentionPurged, decision.into())
}

fn count(purged: &PurgedTexts) {
    for (text, n) in [("message", purged.messages), ("reply", purged.replies), ("prompt", purged.prompts)] {
        metrics::counter!("chatgate_retention_texts_purged_total", "text" => text).increment(n);
    }
}
