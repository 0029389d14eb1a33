//! Retention: one pass of the purge, run by the clean-up worker and by `chatgate purge`. Texts
//! past `retention.texts` are overwritten; the commands that ended past `retention.records` are
//! deleted with their rows, and each tenant's evidence chain is cut before them at a checkpoint.
//! A tenant's own retention in the directory takes the place of `[retention]`'s. Each tenant's
//! purge is recorded in its chain and counted (`chatgate_retention_*_total`). A dry run counts
//! what a pass as of a given time would take, and writes nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::config::RetentionConfig;
use crate::domain::directory::Tenants;
use crate::domain::evidence::decision::Decision;
use crate::domain::evidence::{Checkpoint, EvidenceDraft};
use crate::domain::lifecycle::EvidenceKind;
use crate::service::database::{Database, StoreError};
use crate::store::{RetentionPace, RetentionScope};

pub use crate::store::{PurgedRecords, PurgedTexts};

/// What one pass took (or would) of one tenant's (`None`: messages of no tenant).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantPurge {
    pub texts: PurgedTexts,
    pub records: PurgedRecords,
    /// Where its chain is cut now, if it is.
    pub checkpoint: Option<Checkpoint>,
}

/// What one pass took (or would), by tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionPass {
    pub tenants: BTreeMap<Option<String>, TenantPurge>,
}

impl RetentionPass {
    pub fn texts(&self) -> PurgedTexts {
        let mut sum = PurgedTexts::default();
        self.tenants.values().for_each(|purge| sum.add(&purge.texts));
        sum
    }

    pub fn records(&self) -> PurgedRecords {
        let mut sum = PurgedRecords::default();
        self.tenants.values().for_each(|purge| sum.add(&purge.records));
        sum
    }
}

/// Whether a pass purges, or only counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PurgeMode {
    Purge,
    DryRun,
}

/// How long each tenant's texts and records are kept: its own retention, or `[retention]`'s.
#[derive(Debug, Clone, Copy)]
pub struct RetentionPolicy<'a> {
    pub default: &'a RetentionConfig,
    pub tenants: &'a Tenants,
}

impl RetentionPolicy<'_> {
    fn texts_of(&self, tenant: &str) -> Option<Duration> {
        self.tenants.tenant(tenant).and_then(|tenant| tenant.retention.texts)
    }

    fn records_of(&self, tenant: Option<&str>) -> Duration {
        let own = tenant.and_then(|id| self.tenants.tenant(id)).and_then(|tenant| tenant.retention.records);
        own.unwrap_or(self.default.records)
    }
}

impl Database {
    /// One pass as of `now`: records and chains, then the texts of what is left, tenant by
    /// tenant; each tenant's purge recorded in its chain once done.
    pub async fn purge(
        &self,
        policy: RetentionPolicy<'_>,
        now: OffsetDateTime,
        mode: PurgeMode,
    ) -> Result<RetentionPass, StoreError> {
        let pace = RetentionPace::of(policy.default);
        let mut passing = Passing { policy, now, mode, pace, pass: RetentionPass { tenants: BTreeMap::new() } };
        // Records first: what they delete needs no text overwritten before (with both
        // retentions alike, the texts' pass would otherwise rewrite every row it then deletes).
        self.purge_records(&mut passing).await?;
        self.purge_texts(&mut passing).await?;
        let mut pass = passing.pass;
        pass.tenants.retain(|_, purge| *purge != TenantPurge::default());
        if mode == PurgeMode::Purge {
            for (tenant, purge) in &pass.tenants {
                count(purge);
                if let Some(tenant) = tenant {
                    for draft in evidence(policy, tenant, now, purge) {
                        self.store().record_for_tenant(tenant, draft).await?;
                    }
                }
            }
        }
        Ok(pass)
    }

    /// Texts: those of the tenants with their own retention, each under it, then everyone else's.
    async fn purge_texts(&self, passing: &mut Passing<'_>) -> Result<(), StoreError> {
        let Passing { policy, now, mode, pace, pass } = passing;
        let (policy, now) = (*policy, *now);
        let own: Vec<(String, Duration)> = policy
            .tenants
            .tenants()
            .filter_map(|tenant| policy.texts_of(tenant.id.as_str()).map(|kept| (tenant.id.to_string(), kept)))
            .collect();
        let others: Vec<String> = own.iter().map(|(tenant, _)| tenant.clone()).collect();
        let scopes = own.iter().map(|(tenant, kept)| (RetentionScope::Tenant(tenant), *kept));
        let store = self.store();
        for (scope, kept) in scopes.chain([(RetentionScope::AllBut(&others), policy.default.texts)]) {
            let by_tenant = match mode {
                PurgeMode::DryRun => store.count_old_texts(scope, now - kept).await?,
                PurgeMode::Purge => store.purge_old_texts(scope, now - kept, pace).await?,
            };
            for (tenant, texts) in by_tenant {
                pass.tenants.entry(tenant).or_default().texts = texts;
            }
        }
        Ok(())
    }

    /// Records: each tenant's commands that ended and rows of none, then its chain; then the
    /// messages of no tenant.
    async fn purge_records(&self, passing: &mut Passing<'_>) -> Result<(), StoreError> {
        let Passing { policy, now, mode, pace, pass } = passing;
        let (policy, now) = (*policy, *now);
        let store = self.store();
        let mut tenants: BTreeSet<String> = store.chains().await?.into_iter().collect();
        tenants.extend(policy.tenants.tenants().map(|tenant| tenant.id.to_string()));
        for tenant in tenants.iter().map(|tenant| Some(tenant.as_str())).chain([None]) {
            let before = now - policy.records_of(tenant);
            let purge = pass.tenants.entry(tenant.map(str::to_owned)).or_default();
            match mode {
                PurgeMode::DryRun => {
                    purge.records = store.count_old_records(tenant, before, now).await?;
                    if let Some(chain) = tenant {
                        purge.records.evidence = store.count_cut(chain, before).await?;
                    }
                }
                PurgeMode::Purge => {
                    purge.records = store.purge_old_records(tenant, before, now, pace).await?;
                    if let Some(chain) = tenant {
                        (purge.records.evidence, purge.checkpoint) = store.cut_chain(chain, before, pace).await?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// One pass under way: under which policy, as of when, purging or counting, at what pace.
struct Passing<'a> {
    policy: RetentionPolicy<'a>,
    now: OffsetDateTime,
    mode: PurgeMode,
    pace: RetentionPace,
    pass: RetentionPass,
}

/// What a tenant's chain records of its purge: the texts overwritten, the records deleted.
fn evidence(policy: RetentionPolicy<'_>, tenant: &str, now: OffsetDateTime, purge: &TenantPurge) -> Vec<EvidenceDraft> {
    let time = |at: OffsetDateTime| at.format(&Rfc3339).unwrap_or_else(|_| at.unix_timestamp().to_string());
    let mut decisions = vec![];
    if purge.texts.total() > 0 {
        let (texts, kept) = (&purge.texts, policy.texts_of(tenant).unwrap_or(policy.default.texts));
        let (messages, replies, prompts) = (texts.messages, texts.replies, texts.prompts);
        decisions.push(Decision::TextsExpired { texts_before: time(now - kept), messages, replies, prompts });
    }
    // A cut that took evidence alone is not recorded: otherwise each pass would cut the record
    // the one before it wrote, and write another.
    if purge.records.rows() > 0 {
        let records = &purge.records;
        decisions.push(Decision::RecordsDeleted {
            records_before: time(now - policy.records_of(Some(tenant))),
            commands: records.commands,
            deliveries: records.deliveries,
            messages: records.messages,
            replies: records.replies,
            idempotency_keys: records.idempotency_keys,
            evidence: records.evidence,
            checkpoint: purge.checkpoint.clone(),
        });
    }
    decisions
        .into_iter()
        .map(|decision| EvidenceDraft::of_tenant(EvidenceKind::RetentionPurged, decision.into()))
        .collect()
}

fn count(purge: &TenantPurge) {
    let texts = &purge.texts;
    for (text, n) in [("message", texts.messages), ("reply", texts.replies), ("prompt", texts.prompts)] {
        metrics::counter!("chatgate_retention_texts_purged_total", "text" => text).increment(n);
    }
    let records = &purge.records;
    let deleted = [
        ("command", records.commands),
        ("delivery", records.deliveries),
        ("message", records.messages),
        ("reply", records.replies),
        ("idempotency_key", records.idempotency_keys),
        ("evidence", records.evidence),
    ];
    for (record, n) in deleted {
        metrics::counter!("chatgate_retention_records_deleted_total", "record" => record).increment(n);
    }
}
