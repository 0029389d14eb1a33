//! Issue 50, goal 2 (the export): `chatgate audit export [--until TIME]` writes each chain as JSON
//! lines from its first link, and `chatgate audit verify --file` checks such a file offline by the
//! database's own rules: an altered, a missing or an unreadable line is named.

use chatgate::domain::lifecycle::State;
use time::format_description::well_known::Rfc3339;

use crate::cli::{assert_one_line_failure, chatgate, run, stderr};
use crate::conformance::{drive, path_to};
use crate::helpers::{TestDb, on_both_backends, refund};

/// `chatgate audit ARGS` against `db`, in a folder of its own.
fn audit(db: &TestDb, dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    run(chatgate(dir).arg("audit").args(args).env("CHATGATE_DATABASE_URL", &db.url))
}

async fn an_export_verifies_offline_and_names_what_was_altered(db: &TestDb) {
    drive(db, refund("demo", "1234", "25.00", "m1"), path_to(State::Executed)).await;
    let mut conn = db.raw().await;
    let cut: i64 = sqlx::query_scalar("SELECT MAX(recorded_at) FROM evidence").fetch_one(&mut conn).await.expect("max");
    drive(db, refund("demo", "1235", "5.00", "m2"), path_to(State::Executed)).await;
    let dir = tempfile::tempdir().expect("tempdir");

    // Up to a time: what was recorded by then, from the chain's first link.
    let until = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(cut) * 1_000_000).expect("a time");
    let early = audit(db, dir.path(), &["export", "--until", &until.format(&Rfc3339).expect("RFC 3339")]);
    assert!(early.status.success(), "{}", stderr(&early));
    let by_then: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM evidence WHERE recorded_at <= $1")
        .bind(cut)
        .fetch_one(&mut conn)
        .await
        .expect("count");
    let early_lines = String::from_utf8(early.stdout).expect("utf-8");
    assert_eq!(early_lines.lines().count() as i64, by_then, "{early_lines}");
    assert!(by_then >= 7, "the first refund's seven artifacts");

    // Everything: verified offline as the database verifies itself.
    let all = audit(db, dir.path(), &["export"]);
    assert!(all.status.success(), "{}", stderr(&all));
    let lines = String::from_utf8(all.stdout).expect("utf-8");
    let total: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM evidence").fetch_one(&mut conn).await.expect("count");
    assert_eq!(lines.lines().count() as i64, total);
    let file = dir.path().join("evidence.jsonl");
    std::fs::write(&file, &lines).expect("written");
    let file_arg = file.to_str().expect("a UTF-8 path");
    let intact = audit(db, dir.path(), &["verify", "--file", file_arg]);
    assert!(intact.status.success(), "{}", stderr(&intact));
    let said = String::from_utf8_lossy(&intact.stdout).into_owned();
    assert!(said.contains(&format!("chain demo: intact, {total} artifacts")), "{said}");

    // An artifact altered in the file: named, by its place.
    let altered: Vec<String> = lines
        .lines()
        .map(|line| if line.contains("\"seq\":7,") { line.replace("executed", "failed") } else { line.to_owned() })
        .collect();
    assert_ne!(altered.join("\n"), lines.trim_end(), "the seventh artifact says executed");
    std::fs::write(&file, altered.join("\n")).expect("written");
    let broken = audit(db, dir.path(), &["verify", "--file", file_arg]);
    assert_eq!(broken.status.code(), Some(1));
    let err = stderr(&broken);
    assert!(err.contains("chain `demo` breaks at #7") && err.contains("altered"), "{err}");

    // A line left out: the gap is named; a line that is no artifact: named by its number.
    let without: Vec<&str> = lines.lines().filter(|line| !line.contains("\"seq\":3,")).collect();
    std::fs::write(&file, without.join("\n")).expect("written");
    let gap = audit(db, dir.path(), &["verify", "--file", file_arg]);
    assert_eq!(gap.status.code(), Some(1));
    assert!(stderr(&gap).contains("breaks at #4"), "{}", stderr(&gap));
    std::fs::write(&file, format!("{lines}not json\n")).expect("written");
    assert_one_line_failure(&audit(db, dir.path(), &["verify", "--file", file_arg]), &format!("line {}", total + 1));

    // The database itself, untouched by any of this, still verifies.
    let database = audit(db, dir.path(), &["verify"]);
    assert!(database.status.success(), "{}", stderr(&database));
}

on_both_backends!(an_export_verifies_offline_and_names_what_was_altered);
