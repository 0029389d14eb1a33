//! `chatgate conformance run` on the scenarios of `conformance/` (docs/CONFORMANCE.md), as CI
//! runs it: the binary against itself, as a black box, on SQLite and on PostgreSQL; and a scenario
//! broken on purpose, which must make the runner fail naming the step and the difference.

use std::path::Path;
use std::process::{Command, Output};

use crate::helpers::POSTGRES_ENV;

fn run(dir: &Path, database_url: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_chatgate"));
    command.arg("conformance").arg("run");
    if let Some(url) = database_url {
        command.arg("--database-url").arg(url);
    }
    command.arg(dir).env("NO_COLOR", "1").output().expect("the runner runs")
}

fn scenarios() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance")
}

fn assert_all_pass(output: &Output) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let count = std::fs::read_dir(scenarios())
        .expect("conformance/")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .filter(|e| !e.file_name().to_string_lossy().ends_with(".schema.json"))
        .count();
    assert!(count >= 15, "the scenarios are there: {count}");
    assert!(stdout.contains(&format!("conformance: {count} passed, 0 failed")), "{stdout}");
    assert_eq!(stdout.lines().filter(|l| l.starts_with("ok ")).count(), count, "{stdout}");
}

#[test]
fn every_scenario_passes_on_sqlite() {
    assert_all_pass(&run(&scenarios(), None));
}

#[test]
fn every_scenario_passes_on_postgres() {
    let Ok(url) = std::env::var(POSTGRES_ENV) else {
        eprintln!("skipped: {POSTGRES_ENV} is not set");
        return;
    };
    assert_all_pass(&run(&scenarios(), Some(&url)));
}

/// A scenario that expects what the gateway does not do fails, naming its step and the difference;
/// one that is not a scenario fails naming why; the others still run, and the exit is non-zero.
#[test]
fn a_broken_scenario_fails_naming_the_step_and_the_difference() {
    let dir = tempfile::tempdir().expect("folder");
    let good = std::fs::read_to_string(scenarios().join("ids-redelivered-mutation-executes-once.json")).expect("read");
    std::fs::write(dir.path().join("a-good.json"), &good).expect("write");
    // The answer executes once; this copy claims twice.
    let broken = good.replace("\"executions\": 1", "\"executions\": 2");
    assert_ne!(broken, good);
    std::fs::write(dir.path().join("b-broken.json"), broken).expect("write");
    std::fs::write(
        dir.path().join("c-unreadable.json"),
        "{\"summary\": \"no steps\", \"clause\": \"SMCL §XI.1: x\", \"covers\": []}",
    )
    .expect("write");
    // A misspelt key is refused, not skipped: a check nobody runs cannot fail.
    let misspelt = good.replacen("\"expect\"", "\"expext\"", 1);
    std::fs::write(dir.path().join("d-misspelt.json"), misspelt).expect("write");
    let output = run(dir.path(), None);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "{stdout}");
    assert!(stdout.contains("ok    a-good"), "{stdout}");
    let broken_line = stdout.lines().find(|l| l.starts_with("FAIL  b-broken")).expect("the broken one fails");
    assert!(
        broken_line.contains("step 2 (the answer, delivered three times): expected 2 execution(s) so far, got 1"),
        "{broken_line}"
    );
    let unreadable = stdout.lines().find(|l| l.starts_with("FAIL  c-unreadable")).expect("the unreadable one fails");
    assert!(unreadable.contains("reading it: not a scenario: missing field `steps`"), "{unreadable}");
    let misspelt = stdout.lines().find(|l| l.starts_with("FAIL  d-misspelt")).expect("the misspelt one fails");
    assert!(misspelt.contains("a step does exactly one of chat, twilio"), "{misspelt}");
    assert!(misspelt.contains("\"expext\""), "{misspelt}");
    assert!(stdout.contains("conformance: 1 passed, 3 failed"), "{stdout}");
}
