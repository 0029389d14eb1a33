//! Migrations are additive (issue #50, docs/OPERATING.md "Upgrading"): a migration written after
//! the rule adds tables, columns (nullable, or with a default), indexes and rows, and never drops,
//! renames or narrows what the previous release reads and writes. So the previous release keeps
//! running while the next one migrates the database under it (several instances on one
//! PostgreSQL are upgraded one at a time), and starts again after a rollback: it ignores the
//! migrations it does not know (`Store::migrate`). Taking something away is a second step, in a
//! later release, once no instance of the one before runs: a statement after a line
//! `-- contract: <why>` is let through, and docs/OPERATING.md says when that is safe.

use std::path::Path;

use sqlx::Connection;

use crate::helpers::{TestDb, on_both_backends};

/// Each folder's last migration written before the rule; every later one is held to it.
const BEFORE_THE_RULE: [(&str, u32); 3] =
    [("migrations/postgres", 32), ("migrations/sqlite", 32), ("migrations/sqlite-inbox", 2)];

/// What takes away or narrows something the previous release uses, and why that breaks it.
const NOT_ADDITIVE: [(&str, &str); 8] = [
    ("DROP ", "drops what the previous release reads or writes"),
    ("RENAME", "renames what the previous release names"),
    ("ALTER COLUMN", "changes a column the previous release writes (its type, its default, NOT NULL)"),
    ("SET NOT NULL", "refuses the previous release's rows without the value"),
    ("TRUNCATE", "empties a table the previous release uses"),
    ("DELETE FROM", "removes rows the previous release may be working on"),
    ("ADD CONSTRAINT", "may refuse what the previous release writes"),
    ("ADD CHECK", "may refuse what the previous release writes"),
];

/// The statements of `sql` that are not additive, each with why; a statement after a
/// `-- contract:` line is the second step of a change and is let through.
fn violations(sql: &str) -> Vec<String> {
    let mut found = vec![];
    for statement in statements(sql) {
        if statement.to_ascii_lowercase().contains("-- contract:") {
            continue;
        }
        let words = statement.lines().flat_map(|line| code_of(line).split_whitespace()).collect::<Vec<_>>();
        let words = words.join(" ").to_ascii_uppercase();
        let shown: String = words.chars().take(80).collect();
        // The first reason is enough: a statement is refused once.
        if let Some((_, why)) = NOT_ADDITIVE.iter().find(|(pattern, _)| words.contains(pattern)) {
            found.push(format!("`{shown}`: {why}"));
        } else if words.contains("ADD COLUMN") && words.contains("NOT NULL") && !words.contains("DEFAULT") {
            found.push(format!("`{shown}`: a NOT NULL column without a default refuses the previous release's rows"));
        }
    }
    found
}

/// A line without its comment.
fn code_of(line: &str) -> &str {
    line.split("--").next().unwrap_or_default()
}

/// `sql` cut at each `;` that ends a line (the migrations write one statement a line's end),
/// each with its comments; a piece of comments alone is none.
fn statements(sql: &str) -> Vec<String> {
    let (mut statements, mut current) = (vec![], String::new());
    for line in sql.lines() {
        current.push_str(line);
        current.push('\n');
        if code_of(line).trim_end().ends_with(';') {
            statements.push(std::mem::take(&mut current));
        }
    }
    statements.push(current);
    statements.retain(|s| s.lines().any(|line| !code_of(line).trim().is_empty()));
    statements
}

/// The migrations of `folder` numbered after `last_before`: (file name, text).
fn after_the_rule(folder: &str, last_before: u32) -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(folder);
    let mut found = vec![];
    for entry in std::fs::read_dir(&root).expect("the migrations folder") {
        let name = entry.expect("an entry").file_name().to_string_lossy().into_owned();
        let number: u32 = name.split('_').next().and_then(|n| n.parse().ok()).expect("a numbered migration");
        if number > last_before {
            found.push((name.clone(), std::fs::read_to_string(root.join(&name)).expect("readable")));
        }
    }
    found
}

#[test]
fn every_migration_after_the_rule_is_additive() {
    let mut problems = vec![];
    for (folder, last_before) in BEFORE_THE_RULE {
        for (name, sql) in after_the_rule(folder, last_before) {
            problems.extend(violations(&sql).into_iter().map(|why| format!("{folder}/{name}: {why}")));
        }
    }
    assert!(
        problems.is_empty(),
        "migrations that are not additive (docs/OPERATING.md, \"Upgrading\"):\n{}",
        problems.join("\n")
    );
}

/// The check refuses what breaks the previous release, and lets through what does not.
#[test]
fn the_rule_refuses_what_takes_away_and_lets_additions_through() {
    let additive = "CREATE TABLE retention (tenant_id TEXT PRIMARY KEY, texts_secs BIGINT);\n\
                    ALTER TABLE commands ADD COLUMN purged_at BIGINT;\n\
                    ALTER TABLE commands ADD COLUMN kept BOOLEAN NOT NULL DEFAULT FALSE; -- old rows: kept\n\
                    CREATE INDEX commands_by_purge ON commands (purged_at);\n\
                    INSERT INTO retention (tenant_id) VALUES ('demo');";
    assert_eq!(violations(additive), Vec::<String>::new());
    for broken in [
        "ALTER TABLE commands DROP COLUMN short_ref;",
        "DROP TABLE link_codes;",
        "DROP INDEX outbox_claim_order;",
        "ALTER TABLE confirmations_next RENAME TO confirmations;",
        "ALTER TABLE commands RENAME COLUMN state TO status;",
        "ALTER TABLE commands ALTER COLUMN payload TYPE JSONB USING payload::jsonb;",
        "ALTER TABLE commands ALTER COLUMN short_ref SET NOT NULL;",
        "ALTER TABLE commands ADD COLUMN region TEXT NOT NULL;",
        "ALTER TABLE deliveries ADD CONSTRAINT deliveries_state_check CHECK (state IN ('a'));",
        "DELETE FROM dedupe_records;",
    ] {
        assert_eq!(violations(broken).len(), 1, "{broken}: {:?}", violations(broken));
    }
    let second_step = "-- contract: the column is unused since 0.9, whose instances are all gone\n\
                       ALTER TABLE commands DROP COLUMN legacy;";
    assert_eq!(violations(second_step), Vec::<String>::new());
    // Every migration from before the rule that took something away would have been refused.
    let sqlite_0028 = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/sqlite/0028_executor_approvals.sql"),
    )
    .expect("0028");
    assert!(!violations(&sqlite_0028).is_empty(), "0028 rebuilt two tables: not additive");
}

/// This release keeps starting on a database the next one migrated: the next release's
/// migrations are ours and one more (an added table), and `Store::migrate`, as it runs at every
/// start, goes on past the one it does not know — where sqlx, by default, refuses to start, which
/// would make a rolling upgrade stop every old instance that restarts, and a rollback impossible.
async fn this_release_starts_on_a_database_the_next_one_migrated(db: &TestDb) {
    let folder = match db.config.storage.database_url.backend().expect("a backend") {
        chatgate::config::BackendKind::Postgres => "migrations/postgres",
        chatgate::config::BackendKind::Sqlite => "migrations/sqlite",
    };
    let (ours, next) = (Path::new(env!("CARGO_MANIFEST_DIR")).join(folder), tempfile::tempdir().expect("a folder"));
    for entry in std::fs::read_dir(&ours).expect("migrations") {
        let name = entry.expect("an entry").file_name();
        std::fs::copy(ours.join(&name), next.path().join(&name)).expect("copied");
    }
    let added = "CREATE TABLE next_release_notes (id BIGINT PRIMARY KEY, note TEXT);\n";
    std::fs::write(next.path().join("9999_next_release_notes.sql"), added).expect("written");
    let mut connection = sqlx::AnyConnection::connect(&db.url).await.expect("the database");
    let next = sqlx::migrate::Migrator::new(next.path()).await.expect("the next release's migrations");
    next.run(&mut connection).await.expect("the next release migrates");
    // A session's migration lock is its own; a refused run keeps it until the session ends.
    let strict = sqlx::migrate::Migrator::new(ours.as_path()).await.expect("ours").run(&mut connection).await;
    assert!(strict.is_err(), "sqlx refuses a database with a migration it does not know, unless told to ignore it");
    connection.close().await.expect("closed");
    db.store.migrate().await.expect("this release starts on the database the next one migrated");
}

on_both_backends!(this_release_starts_on_a_database_the_next_one_migrated);
