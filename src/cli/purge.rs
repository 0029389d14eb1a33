//! `chatgate purge [--dry-run] [--as-of TIME]`: one pass of the retention purge now, or what a
//! pass at TIME would take (docs/OPERATING.md, "Retention").

use std::process::ExitCode;

use time::OffsetDateTime;

use crate::config::in_days;
use crate::service::database::Database;
use crate::service::retention::{PurgeMode, RetentionPolicy, TenantPurge};
use crate::service::settings::Settings;

#[derive(clap::Args)]
pub struct PurgeArgs {
    /// Count what would be overwritten and deleted, and write nothing
    #[arg(long)]
    dry_run: bool,
    /// As of TIME (RFC 3339): what a pass then would take, to check a policy before it bites
    #[arg(long, value_parser = crate::cli::audit::rfc3339, requires = "dry_run")]
    as_of: Option<OffsetDateTime>,
}

pub async fn run(settings: &Settings, args: &PurgeArgs) -> anyhow::Result<ExitCode> {
    let config = &settings.config;
    let database = Database::connect(&config.storage).await?;
    database.migrate().await?;
    let mode = if args.dry_run { PurgeMode::DryRun } else { PurgeMode::Purge };
    let now = args.as_of.unwrap_or_else(OffsetDateTime::now_utc);
    let policy = RetentionPolicy { default: &config.retention, tenants: &settings.tenants };
    let pass = database.purge(policy, now, mode).await;
    database.close().await;
    let pass = pass?;
    let (texts, records) = (in_days(config.retention.texts), in_days(config.retention.records));
    println!("retention.texts: {texts}, retention.records: {records} (each tenant's own where it has one)");
    for (tenant, purge) in &pass.tenants {
        println!("{}: {}", tenant.as_deref().unwrap_or("(no tenant)"), counts(purge));
    }
    let verb = if args.dry_run { "would take" } else { "took" };
    let total = TenantPurge { texts: pass.texts(), records: pass.records(), checkpoint: None };
    eprintln!("{verb} {}", counts(&total));
    Ok(ExitCode::SUCCESS)
}

fn counts(purge: &TenantPurge) -> String {
    let (texts, records) = (&purge.texts, &purge.records);
    let checkpoint = purge.checkpoint.as_ref().map(|cut| format!("; chain cut at #{} ({})", cut.seq, cut.hash));
    format!(
        "texts of {} message(s), {} reply(ies), {} prompt(s); {} command(s), {} delivery(ies), {} message(s), \
         {} reply(ies), {} idempotency key(s), {} evidence artifact(s){}",
        texts.messages,
        texts.replies,
        texts.prompts,
        records.commands,
        records.deliveries,
        records.messages,
        records.replies,
        records.idempotency_keys,
        records.evidence,
        checkpoint.unwrap_or_default()
    )
}
