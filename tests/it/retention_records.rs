//! Issue 50, goals 1 and 2 (records): `retention.records`. A person asks, refunds and confirms,
//! says something that is no command, and starts a second refund left waiting. An export of the
//! evidence is taken; a pass as of 400 days on deletes the ended commands with their rows and the
//! message of none, cuts the tenant's chain before the waiting refund's first artifact and keeps
//! that place as a checkpoint. `audit verify` then verifies from the checkpoint and says so; the
//! export taken before the cut still verifies offline and ends at the checkpoint's hash, and an
//! artifact altered in it before the checkpoint is named; the database refuses to delete an
//! artifact after the checkpoint. A tenant's own retention in the directory takes the place of
//! `[retention]`'s.

use std::time::Duration;

use chatgate::domain::directory::DirectoryFile;
use chatgate::domain::evidence::ExportedLink;
use chatgate::service::database::Database;
use chatgate::service::retention::{PurgeMode, PurgedRecords, RetentionPolicy};
use time::OffsetDateTime;

use crate::cli::{chatgate, run, stderr};
use crate::fake_graph::{FakeGraph, sending_through};
use crate::helpers::{CUSTOMER, Meta, TestDb, command_of_message, on_both_backends, settled, spawn_app_with};
use crate::retention::{replies_sent, tenants_of};

on_both_backends!(
    records_past_their_retention_are_deleted_and_the_chain_verifies_from_its_checkpoint,
    a_tenants_own_retention_takes_the_place_of_the_default,
    a_purge_of_records_running_while_webhooks_arrive_loses_nothing
);

const DAY: Duration = Duration::from_secs(86_400);

/// `chatgate audit ARGS` against `db`, in a folder of its own.
fn audit(db: &TestDb, dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    run(chatgate(dir).arg("audit").args(args).env("CHATGATE_DATABASE_URL", &db.url))
}

/// Every link an export holds now.
async fn exported(database: &Database) -> Vec<ExportedLink> {
    let mut export = database.export_evidence(OffsetDateTime::now_utc()).await.expect("an export");
    let mut links = vec![];
    while let Some(page) = export.next_page().await.expect("a page") {
        links.extend(page);
    }
    links
}

fn lines(links: &[ExportedLink]) -> String {
    links.iter().map(|link| serde_json::to_string(link).expect("JSON") + "\n").collect()
}

async fn records_past_their_retention_are_deleted_and_the_chain_verifies_from_its_checkpoint(db: &TestDb) {
    let graph = FakeGraph::start().await;
    let app = spawn_app_with(db, sending_through(&db.config, &graph)).await;
    let meta = Meta::new(&app, db);
    for (id, text) in [("wamid.D1", "order status 4242"), ("wamid.D2", "refund 4242 9.99"), ("wamid.D5", "hello")] {
        assert_eq!(meta.text(id, CUSTOMER, text).await.status(), 200);
    }
    replies_sent(db).await;
    assert_eq!(meta.text("wamid.D3", CUSTOMER, "yes").await.status(), 200);
    assert_eq!(settled(db, command_of_message(db, "wamid.D2").await).await, "executed");
    assert_eq!(meta.text("wamid.D4", CUSTOMER, "refund 4243 5.00").await.status(), 200);
    replies_sent(db).await;
    let waiting = command_of_message(db, "wamid.D4").await.to_string();

    // "hello" starts no command: its answer is a notice of none, sent and timed by our clock.
    let notices = "SELECT COUNT(*) FROM outbound_messages WHERE command_id IS NULL AND tenant_id = $1";
    assert!(db.count(notices, "demo").await >= 1, "the notice was sent");

    let database = Database::from(db.store.clone());
    let tenants = tenants_of(&db.config);
    let policy = RetentionPolicy { default: &db.config.retention, tenants: &tenants };
    let within = database.purge(policy, OffsetDateTime::now_utc() + 395 * DAY, PurgeMode::Purge).await;
    assert_eq!(within.expect("a pass").records(), PurgedRecords::default(), "records are kept 396 days");
    let before_cut = exported(&database).await;
    let later = OffsetDateTime::now_utc() + 400 * DAY;
    let counted = database.purge(policy, later, PurgeMode::DryRun).await.expect("a dry run").records();
    let pass = database.purge(policy, later, PurgeMode::Purge).await.expect("a pass");
    let purged = pass.records();
    assert_eq!((purged.commands, counted.commands), (2, 2), "the question and the confirmed refund");
    assert_eq!(purged.messages, 4, "their three messages and the one that started none: {purged:?}");
    assert!(purged.replies >= 4 && purged.deliveries == 2 && purged.evidence > 0, "{purged:?}");
    assert_eq!((counted.messages, counted.deliveries), (purged.messages, purged.deliveries));

    // What is under way stays: the waiting refund, its message, its prompt.
    let commands = "SELECT COUNT(*) FROM commands WHERE tenant_id = $1";
    assert_eq!(db.count(commands, "demo").await, 1);
    assert_eq!(db.count(notices, "demo").await, 0, "the notice of no command went too");
    assert_eq!(db.count("SELECT COUNT(*) FROM inbound_messages WHERE command_id = $1", &waiting).await, 1);
    assert_eq!(db.count("SELECT COUNT(*) FROM confirmations WHERE command_id = $1", &waiting).await, 1);
    for table in ["command_transitions", "deliveries", "dedupe_records", "outbound_messages"] {
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE command_id <> $1");
        let mut conn = db.raw().await;
        let left: i64 =
            sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(&waiting).fetch_one(&mut conn).await.expect("count");
        assert_eq!(left, 0, "{table}");
    }

    // The chain is cut right before the waiting refund's first artifact, and verifies from there.
    let checkpoint = pass.tenants[&Some("demo".to_owned())].checkpoint.clone().expect("the chain is cut");
    let first_kept = before_cut.iter().find(|link| link.command_id.as_deref() == Some(waiting.as_str()));
    assert_eq!(first_kept.expect("the refund's artifacts").seq, checkpoint.seq + 1);
    let cut_link = before_cut.iter().find(|link| link.seq == checkpoint.seq).expect("exported before the cut");
    assert_eq!(cut_link.hash, checkpoint.hash, "the export taken before ends where the chain now starts");
    let report = db.store.evidence().verify().await.expect("verified");
    assert!(report.first_break.is_none(), "{:?}", report.first_break);
    assert_eq!(report.chains[0].checkpoint.as_ref(), Some(&checkpoint));
    let mut conn = db.raw().await;
    let recorded = "SELECT COUNT(*) FROM evidence WHERE chain_id = 'demo' AND seq <= $1";
    let left: i64 = sqlx::query_scalar(recorded).bind(checkpoint.seq).fetch_one(&mut conn).await.expect("count");
    assert_eq!(left, 0, "nothing before the checkpoint is left");
    let says = "SELECT COUNT(*) FROM evidence WHERE kind = 'retention.purged' AND body LIKE $1";
    assert_eq!(db.count(says, &format!("%{}%", checkpoint.hash)).await, 1, "the chain records its own cut");

    // After the checkpoint, evidence stays append-only.
    let refused = sqlx::query("DELETE FROM evidence WHERE chain_id = 'demo' AND seq = $1")
        .bind(checkpoint.seq + 1)
        .execute(&mut conn)
        .await;
    assert!(refused.is_err_and(|e| e.to_string().contains("append-only")), "an artifact after the checkpoint");

    // The command line says the same, and checks both exports offline.
    let dir = tempfile::tempdir().expect("a folder");
    let verified = audit(db, dir.path(), &["verify"]);
    assert!(verified.status.success(), "{}", stderr(&verified));
    let said = String::from_utf8_lossy(&verified.stdout).into_owned();
    assert!(said.contains(&format!("from the checkpoint at #{}", checkpoint.seq)), "{said}");
    let now = audit(db, dir.path(), &["export"]);
    let after_file = dir.path().join("after.jsonl");
    std::fs::write(&after_file, &now.stdout).expect("written");
    let offline = audit(db, dir.path(), &["verify", "--file", after_file.to_str().expect("UTF-8")]);
    assert!(offline.status.success(), "{}", stderr(&offline));
    assert!(String::from_utf8_lossy(&offline.stdout).contains(&format!("from the checkpoint at #{}", checkpoint.seq)));
    let before_file = dir.path().join("before.jsonl");
    std::fs::write(&before_file, lines(&before_cut)).expect("written");
    let kept = audit(db, dir.path(), &["verify", "--file", before_file.to_str().expect("UTF-8")]);
    assert!(kept.status.success(), "the part cut, kept elsewhere: {}", stderr(&kept));
    let mut altered = before_cut.clone();
    let target = altered.iter_mut().find(|link| link.seq == 2).expect("the second artifact");
    target.body = target.body.replacen("\"seq\":2", "\"seq\":2,\"note\":\"edited\"", 1);
    std::fs::write(&before_file, lines(&altered)).expect("written");
    let broken = audit(db, dir.path(), &["verify", "--file", before_file.to_str().expect("UTF-8")]);
    assert_eq!(broken.status.code(), Some(1));
    assert!(stderr(&broken).contains("chain `demo` breaks at #2"), "{}", stderr(&broken));

    // A second pass finds nothing more: the waiting refund holds the chain where it is, and a
    // chain whose every artifact was old (the other tenant's, its directory's) stays cut whole.
    let again = database.purge(policy, later, PurgeMode::Purge).await.expect("a pass");
    assert_eq!(again.records(), PurgedRecords::default());
    let other = db.count("SELECT COUNT(*) FROM evidence WHERE chain_id = $1", "other").await;
    assert_eq!(other, 0, "nothing recorded of a cut that took evidence alone");
    app.stop().await.expect("stop");
}

/// The shipped tenant with its own retention: texts 30 days, records 31.
fn with_own_retention() -> chatgate::domain::directory::Tenants {
    let text = chatgate::config::SHIPPED_DIRECTORY
        .replace("[tenants.demo]", "[tenants.demo]\nretention = { texts = \"30d\", records = \"31d\" }");
    let file: DirectoryFile = toml::from_str(&text).expect("the directory");
    file.build(&text).expect("built").0
}

async fn a_tenants_own_retention_takes_the_place_of_the_default(db: &TestDb) {
    let graph = FakeGraph::start().await;
    let app = spawn_app_with(db, sending_through(&db.config, &graph)).await;
    let meta = Meta::new(&app, db);
    assert_eq!(meta.text("wamid.O1", CUSTOMER, "order status 77").await.status(), 200);
    assert_eq!(settled(db, command_of_message(db, "wamid.O1").await).await, "executed");
    replies_sent(db).await;

    let database = Database::from(db.store.clone());
    let (shipped, own) = (tenants_of(&db.config), with_own_retention());
    let later = OffsetDateTime::now_utc() + 32 * DAY;
    let default = RetentionPolicy { default: &db.config.retention, tenants: &shipped };
    let under_default = database.purge(default, later, PurgeMode::DryRun).await.expect("a dry run");
    assert_eq!(under_default.texts().total() + under_default.records().total(), 0, "90 and 396 days by default");
    let policy = RetentionPolicy { default: &db.config.retention, tenants: &own };
    let texts_only = database.purge(policy, OffsetDateTime::now_utc() + 30 * DAY + DAY / 2, PurgeMode::Purge).await;
    let texts_only = texts_only.expect("a pass");
    assert_eq!(texts_only.records(), PurgedRecords::default(), "records are kept 31 days");
    assert!(texts_only.texts().messages == 1, "its texts, under 30 days: {:?}", texts_only.texts());
    let pass = database.purge(policy, later, PurgeMode::Purge).await.expect("a pass");
    assert_eq!(pass.records().commands, 1, "{:?}", pass.records());
    assert_eq!(db.count("SELECT COUNT(*) FROM commands WHERE tenant_id = $1", "demo").await, 0);
    let report = db.store.evidence().verify().await.expect("verified");
    assert!(report.first_break.is_none(), "{:?}", report.first_break);
    app.stop().await.expect("stop");
}

/// Passes as of 400 days on (every record then past its retention) run back to back while 40
/// webhooks arrive, each asking for a command that ends at once: every message acknowledged makes
/// exactly one command, deleted by a pass or still there once the passes stop, and the chain
/// verifies from its checkpoint.
async fn a_purge_of_records_running_while_webhooks_arrive_loses_nothing(db: &TestDb) {
    let graph = FakeGraph::start().await;
    let app = spawn_app_with(db, sending_through(&db.config, &graph)).await;
    let database = Database::from(db.store.clone());
    let (retention, tenants) = (db.config.retention.clone(), tenants_of(&db.config));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let purging = {
        let (stop, database) = (stop.clone(), database.clone());
        tokio::spawn(async move {
            let policy = RetentionPolicy { default: &retention, tenants: &tenants };
            let (mut passes, mut deleted) = (0, PurgedRecords::default());
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || passes == 0 {
                let later = OffsetDateTime::now_utc() + 400 * DAY;
                deleted.add(&database.purge(policy, later, PurgeMode::Purge).await.expect("a pass").records());
                passes += 1;
            }
            (passes, deleted)
        })
    };
    let meta = Meta::new(&app, db);
    for n in 0..40 {
        assert_eq!(meta.text(&format!("wamid.Q{n}"), CUSTOMER, &format!("order status {n}")).await.status(), 200);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (passes, deleted) = purging.await.expect("the purge ends");
    let kept = "SELECT COUNT(*) FROM inbound_messages WHERE provider_message_id LIKE $1 AND command_id IS NOT NULL";
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while db.count(kept, "wamid.Q%").await + deleted.messages as i64 != 40 {
        assert!(std::time::Instant::now() < deadline, "messages lost: {deleted:?}, {passes} passes");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let commands = "SELECT COUNT(*) FROM commands WHERE tenant_id = $1";
    assert_eq!(db.count(commands, "demo").await + deleted.commands as i64, 40, "{deleted:?}, {passes} passes");
    // Once every reply is sent, one more pass takes what is left: each command, once.
    replies_sent(db).await;
    let policy = RetentionPolicy { default: &db.config.retention, tenants: &tenants_of(&db.config) };
    let last = database.purge(policy, OffsetDateTime::now_utc() + 400 * DAY, PurgeMode::Purge).await;
    let last = last.expect("a pass").records();
    assert_eq!(deleted.commands + last.commands, 40, "{deleted:?} during the webhooks, then {last:?}");
    assert_eq!(db.count(commands, "demo").await, 0);
    let report = db.store.evidence().verify().await.expect("verified");
    assert!(report.first_break.is_none(), "{:?}", report.first_break);
    app.stop().await.expect("stop");
}
