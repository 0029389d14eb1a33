//! `chatgate conformance run [--bin PATH] [--database-url URL] [DIR]`: the scenarios of
//! `conformance/` (SMCL §XI, IDS §XIII, the delivery machine's ACK rules) run as a black box. Each
//! scenario gets a gateway of its own (this binary or `--bin`), started with the scenario's
//! configuration on a fresh database, with the runner's stand-in executor and provider API; the
//! runner speaks to it only over HTTP and kills and restarts it where the scenario says so. One
//! line per scenario, a summary, and a non-zero exit when any failed. docs/CONFORMANCE.md.

mod checks;
pub mod gateway;
mod providers;
mod rig;
mod scenario;
mod standins;
mod steps;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use crate::cli::conformance::rig::Rig;
use crate::cli::conformance::scenario::Scenario;

/// Where a scenario failed: its step and the difference.
#[derive(Debug)]
pub struct Failure {
    pub step: String,
    pub difference: String,
}

/// Runs every `*.json` scenario of `dir` (in name order) and prints how each went.
/// `keep`: a failed scenario's folder (configuration, `gateway.log`) and database are left.
pub async fn run(
    bin: Option<PathBuf>,
    database_url: Option<String>,
    dir: &Path,
    keep: bool,
) -> anyhow::Result<ExitCode> {
    let bin = match bin {
        Some(bin) => bin,
        None => std::env::current_exe()?,
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "json") && !is_schema(path))
        .collect();
    files.sort();
    anyhow::ensure!(!files.is_empty(), "no scenarios (*.json) in {}", dir.display());
    let backend = if database_url.is_some() { "PostgreSQL" } else { "SQLite" };
    println!("conformance: {} scenario(s) from {}, {} on {backend}", files.len(), dir.display(), bin.display());
    let (mut passed, mut failed) = (0, vec![]);
    for file in &files {
        let name = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let started = Instant::now();
        let (clause, outcome) = match Scenario::read(file) {
            Ok(scenario) => (scenario.clause.clone(), run_one(&bin, database_url.as_deref(), &scenario, keep).await),
            Err(error) => (String::new(), Err(Failure { step: "reading it".into(), difference: error })),
        };
        let took = started.elapsed().as_secs_f64();
        match outcome {
            Ok(()) => {
                passed += 1;
                // The clause it checks, up to its colon (`CMB §6.3`).
                let clause = clause.split(':').next().unwrap_or_default();
                println!("ok    {name} ({took:.1} s) {clause}");
            }
            Err(failure) => {
                println!("FAIL  {name} ({took:.1} s): {}: {}", failure.step, failure.difference);
                failed.push(name);
            }
        }
    }
    println!("conformance: {passed} passed, {} failed", failed.len());
    if failed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        println!("failed: {}", failed.join(", "));
        Ok(ExitCode::FAILURE)
    }
}

fn is_schema(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n.to_string_lossy().ends_with(".schema.json"))
}

/// One scenario from start to end; the gateway and its database go afterwards (unless it failed
/// and `keep` says to leave them).
pub async fn run_one(bin: &Path, database_url: Option<&str>, scenario: &Scenario, keep: bool) -> Result<(), Failure> {
    let starting = |difference| Failure { step: "starting the gateway".into(), difference };
    let mut rig = Rig::start(bin, database_url, scenario).await.map_err(starting)?;
    let mut outcome = Ok(());
    for (index, step) in scenario.steps.iter().enumerate() {
        let done = match steps::perform(&mut rig, step).await {
            Ok(answered) => checks::check(&mut rig, step, &answered).await,
            Err(error) => Err(error),
        };
        // Whom a chat command is from: its step-up proofs name them (the API masks the actor).
        if let (Some(name), scenario::Action::Chat(chat)) = (&step.names, &step.action) {
            rig.actors.insert(name.clone(), rig::person(&chat.from).to_owned());
        }
        if let Err(difference) = done {
            outcome = Err(Failure { step: step.name(index), difference });
            break;
        }
    }
    if let Some(kept) = rig.finish(keep && outcome.is_err()).await {
        println!("      {kept}");
    }
    outcome
}
