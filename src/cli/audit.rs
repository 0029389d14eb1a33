//! `chatgate audit verify [--file FILE] [--json]` and `chatgate audit export [--until TIME]`.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::config::Config;
use crate::domain::evidence::ExportedLink;
use crate::service::audit::verify_export;
use crate::service::database::Database;
use crate::service::reads::AuditReport;

#[derive(Subcommand)]
pub enum AuditCommand {
    /// Verify every evidence hash chain; exits 1 and names the first broken link if one breaks
    Verify {
        /// Print the report as JSON
        #[arg(long)]
        json: bool,
        /// Verify an export (`audit export`) instead of the database, offline
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// Print every chain's artifacts as JSON lines, each chain from its first link, verifiable
    /// offline with `audit verify --file`
    Export {
        /// Only what was recorded by TIME (RFC 3339, e.g. 2026-11-01T00:00:00Z) [default: now]
        #[arg(long, value_parser = rfc3339)]
        until: Option<OffsetDateTime>,
    },
}

pub(crate) fn rfc3339(text: &str) -> Result<OffsetDateTime, String> {
    OffsetDateTime::parse(text, &Rfc3339).map_err(|e| format!("not an RFC 3339 time ({e})"))
}

pub async fn run(config: &Config, command: AuditCommand) -> anyhow::Result<ExitCode> {
    match command {
        AuditCommand::Verify { json, file: Some(file) } => Ok(report(&verify_file(&file)?, json)?),
        AuditCommand::Verify { json, file: None } => {
            let database = Database::connect(&config.storage).await?;
            database.migrate().await?;
            let checked = database.reads().verify_evidence().await;
            database.close().await;
            Ok(report(&checked?, json)?)
        }
        AuditCommand::Export { until } => {
            let database = Database::connect(&config.storage).await?;
            database.migrate().await?;
            let exported = export(&database, until.unwrap_or_else(OffsetDateTime::now_utc)).await;
            database.close().await;
            eprintln!("exported {} artifact(s)", exported?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn export(database: &Database, until: OffsetDateTime) -> anyhow::Result<u64> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut export = database.export_evidence(until).await?;
    let mut count = 0;
    while let Some(page) = export.next_page().await? {
        for link in &page {
            serde_json::to_writer(&mut out, link)?;
            out.write_all(b"\n")?;
            count += 1;
        }
    }
    out.flush()?;
    Ok(count)
}

/// An export's lines checked offline as they are read; a line that is not an exported artifact
/// is an error.
fn verify_file(file: &Path) -> anyhow::Result<AuditReport> {
    let reader = std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?;
    let mut unreadable = None;
    let links = std::io::BufReader::new(reader)
        .lines()
        .enumerate()
        .filter(|(_, line)| line.as_ref().map_or(true, |text| !text.trim().is_empty()))
        .map_while(|(number, line)| match read_link(file, number + 1, line) {
            Ok(link) => Some(link),
            Err(error) => {
                unreadable = Some(error);
                None
            }
        });
    let report = verify_export(links);
    match unreadable {
        Some(error) => Err(error),
        None => Ok(report),
    }
}

fn read_link(file: &Path, number: usize, line: std::io::Result<String>) -> anyhow::Result<ExportedLink> {
    let line = line.with_context(|| format!("cannot read {}", file.display()))?;
    serde_json::from_str(&line).with_context(|| format!("{} line {number}: not an exported artifact", file.display()))
}

fn report(report: &AuditReport, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        for chain in &report.chains {
            let verdict = if chain.intact { format!("intact, {} artifacts", chain.artifacts) } else { "BROKEN".into() };
            let from = match &chain.checkpoint {
                Some(cut) => format!(" (from the checkpoint at #{}, hash {})", cut.seq, cut.hash),
                None => String::new(),
            };
            println!("chain {}: {verdict}{from}", chain.chain_id);
        }
    }
    Ok(match &report.first_break {
        Some(broken) => {
            eprintln!("chatgate: audit failed: {broken}");
            ExitCode::FAILURE
        }
        None => {
            eprintln!("audit passed: {} chain(s) intact", report.chains.len());
            ExitCode::SUCCESS
        }
    })
}
