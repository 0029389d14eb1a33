//! `chatgate purge [--dry-run] [--as-of TIME]`: one pass of the retention purge now, or what a
//! pass at TIME would overwrite (docs/OPERATING.md, "Retention").

use std::process::ExitCode;

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::config::Config;
use crate::service::database::Database;
use crate::service::retention::{PurgeMode, PurgedTexts};

#[derive(clap::Args)]
pub struct PurgeArgs {
    /// Count what would be overwritten, and write nothing
    #[arg(long)]
    dry_run: bool,
    /// As of TIME (RFC 3339): what a pass then would overwrite, to check a policy before it bites
    #[arg(long, value_parser = crate::cli::audit::rfc3339, requires = "dry_run")]
    as_of: Option<OffsetDateTime>,
}

pub async fn run(config: &Config, args: &PurgeArgs) -> anyhow::Result<ExitCode> {
    let database = Database::connect(&config.storage).await?;
    database.migrate().await?;
    let mode = if args.dry_run { PurgeMode::DryRun } else { PurgeMode::Purge };
    let now = args.as_of.unwrap_or_else(OffsetDateTime::now_utc);
    let pass = database.purge_texts(&config.retention, now, mode).await;
    database.close().await;
    let pass = pass?;
    let verb = if args.dry_run { "would overwrite" } else { "overwrote" };
    println!(
        "texts before {} (retention.texts: {})",
        pass.texts_before.format(&Rfc3339)?,
        humantime::format_duration(config.retention.texts)
    );
    for (tenant, purged) in &pass.tenants {
        println!("{}: {}", tenant.as_deref().unwrap_or("(no tenant)"), counts(purged));
    }
    eprintln!("{verb} {}", counts(&pass.total()));
    Ok(ExitCode::SUCCESS)
}

fn counts(purged: &PurgedTexts) -> String {
    format!("{} message(s), {} reply text(s), {} prompt(s)", purged.messages, purged.replies, purged.prompts)
}
