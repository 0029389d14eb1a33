//! Issue 50, goal 4: `chatgate backup PATH` copies SQLite's two files while webhooks arrive; a
//! gateway started on the copies (docs/OPERATING.md, "Backups") has every message acknowledged
//! before the backup began, and knows each of them when it is delivered again.

use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chatgate::channels::whatsapp::simulate::{notification, text};
use chatgate::config::{Acknowledge, DatabaseUrl};
use sqlx::{AnyConnection, Connection};

use crate::cli::{assert_one_line_failure, chatgate};
use crate::helpers::{CUSTOMER, DEMO_NUMBER, Meta, TestApp, TestDb, respawn_app_with, spawn_app_with};

/// Sends texts from `senders` tasks until `stop`, each message id pushed once it is answered 200.
fn keep_sending(
    app: &TestApp,
    db: &TestDb,
    stop: &Arc<AtomicBool>,
) -> (Arc<Mutex<Vec<String>>>, Vec<tokio::task::JoinHandle<()>>) {
    let acknowledged = Arc::new(Mutex::new(Vec::new()));
    let tasks = (0..2)
        .map(|sender| {
            let secret = Meta::new(app, db).secret;
            let (url, client) = (app.url("/webhooks/whatsapp"), app.client.clone());
            let (acknowledged, stop) = (acknowledged.clone(), stop.clone());
            tokio::spawn(async move {
                for n in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let id = format!("wamid.BACKUP{sender}x{n}");
                    let body =
                        notification(DEMO_NUMBER, vec![text(&id, CUSTOMER, &format!("order status {n}"))], vec![]);
                    let bytes = body.to_string().into_bytes();
                    let signature = chatgate::channels::whatsapp::signature::sign(secret.as_bytes(), &bytes);
                    let sent = client
                        .post(&url)
                        .header("content-type", "application/json")
                        .header("x-hub-signature-256", signature)
                        .body(bytes)
                        .send()
                        .await;
                    if sent.is_ok_and(|answer| answer.status() == 200) {
                        acknowledged.lock().expect("the list").push(id);
                    }
                }
            })
        })
        .collect();
    (acknowledged, tasks)
}

/// Waits until `sql` (one text parameter) counts `wanted` rows in the database `url` (30 s at most:
/// on PostgreSQL, rows the stopped gateway held wait for its hold to end).
async fn until_count(url: &str, sql: &'static str, bind: &str, wanted: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut conn = AnyConnection::connect(url).await.expect("the database");
    loop {
        let count: i64 = sqlx::query_scalar(sql).bind(bind).fetch_one(&mut conn).await.expect("count");
        if count == wanted {
            break;
        }
        assert!(Instant::now() < deadline, "{sql} [{bind}] counts {count}, never {wanted}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    conn.close().await.expect("closed");
}

/// Runs `take` (a backup) while two senders keep posting to a gateway on `db`, answering at
/// durability as shipped: the messages acknowledged before it began.
async fn taken_under_traffic(db: &TestDb, take: impl FnOnce() -> Output + Send + 'static) -> Vec<String> {
    let mut config = db.config.clone();
    config.ingest.acknowledge = Acknowledge::Durable;
    let app = spawn_app_with(db, config).await;
    let stop = Arc::new(AtomicBool::new(false));
    let (acknowledged, senders) = keep_sending(&app, db, &stop);
    let deadline = Instant::now() + Duration::from_secs(20);
    while acknowledged.lock().expect("the list").len() < 100 {
        assert!(Instant::now() < deadline, "100 webhooks answered");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let before: Vec<String> = acknowledged.lock().expect("the list").clone();
    let made = tokio::task::spawn_blocking(take).await.expect("joined");
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    stop.store(true, Ordering::Relaxed);
    for sender in senders {
        sender.await.expect("the sender ends");
    }
    let sent = acknowledged.lock().expect("the list").len();
    eprintln!("{} acknowledged before the backup began, {sent} by the end", before.len());
    app.stop().await.expect("stop");
    before
}

/// A gateway on the restored database `url` (its inbox at `inbox`) admits each of `before` once,
/// and what its inbox holds as waiting; sent again, they make no command.
async fn restored_knows_them(db: &TestDb, url: &str, inbox: &str, before: &[String]) {
    let mut config = db.config.clone();
    config.storage.database_url = DatabaseUrl::new(url);
    let app = respawn_app_with(config).await;
    let once = "SELECT COUNT(*) FROM inbound_messages WHERE provider_message_id = $1";
    for id in before {
        until_count(url, once, id, 1).await;
    }
    until_count(inbox, "SELECT COUNT(*) FROM inbox WHERE admitted_at IS NULL AND channel = $1", "whatsapp", 0).await;
    let commands = "SELECT COUNT(*) FROM commands WHERE tenant_id = $1";
    let mut conn = AnyConnection::connect(url).await.expect("the restored database");
    let made: i64 = sqlx::query_scalar(commands).bind("demo").fetch_one(&mut conn).await.expect("count");
    assert!(made >= before.len() as i64, "{made} commands for {} messages acknowledged before", before.len());
    let meta = Meta::new(&app, db);
    for (n, id) in before.iter().enumerate() {
        assert_eq!(meta.text(id, CUSTOMER, &format!("order status {n}")).await.status(), 200);
    }
    for id in before {
        until_count(url, once, id, 1).await;
    }
    let again: i64 = sqlx::query_scalar(commands).bind("demo").fetch_one(&mut conn).await.expect("count");
    assert_eq!(again, made, "redeliveries made no command");
    conn.close().await.expect("closed");
    app.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sqlite_backup_taken_while_webhooks_arrive_restores_all_acknowledged_before_it() {
    let db = TestDb::sqlite().await;
    let folder = tempfile::tempdir().expect("a folder");
    let backup = folder.path().join("backup");
    let mut command = chatgate(folder.path());
    command.env("CHATGATE_DATABASE_URL", db.url.as_str()).arg("backup").arg(&backup);
    let before = taken_under_traffic(&db, move || command.output().expect("chatgate runs")).await;
    assert!(!folder.path().join("backup.partial").exists(), "the copies were moved into place");
    // The restore: the backup's two files put where a new gateway's configuration names them.
    let restored = folder.path().join("restored");
    std::fs::create_dir_all(&restored).expect("a folder");
    for file in ["chatgate.db", "chatgate-inbox.db"] {
        std::fs::copy(backup.join(file), restored.join(file)).expect("copied into place");
    }
    let url = format!("sqlite://{}", restored.join("chatgate.db").display());
    let inbox = chatgate::store::inbox_url(&url).expect("the inbox beside it");
    restored_knows_them(&db, &url, &inbox, &before).await;
}

/// PostgreSQL's procedure as docs/OPERATING.md gives it: `pg_dump --format=custom` while the
/// gateway serves, `pg_restore` into an empty database.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_postgresql_dump_taken_while_webhooks_arrive_restores_all_acknowledged_before_it() {
    let Some(db) = TestDb::postgres().await else { return };
    let folder = tempfile::tempdir().expect("a folder");
    let dump = folder.path().join("chatgate.dump");
    let mut command = std::process::Command::new("pg_dump");
    command.arg("--format=custom").arg(format!("--file={}", dump.display())).arg(&db.url);
    let before = taken_under_traffic(&db, move || command.output().expect("pg_dump runs")).await;
    let admin_url = std::env::var("CHATGATE_TEST_POSTGRES_URL").expect("set, as the database is");
    let name = format!("chatgate_restored_{}", uuid::Uuid::now_v7().simple());
    let mut admin = AnyConnection::connect(&admin_url).await.expect("the server");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut admin).await.expect("created");
    let mut url = url::Url::parse(&admin_url).expect("a URL");
    url.set_path(&name);
    let url = url.to_string();
    let restore = std::process::Command::new("pg_restore")
        .args(["--no-owner", "--exit-on-error"])
        .arg(format!("--dbname={url}"))
        .arg(&dump)
        .output()
        .expect("pg_restore runs");
    assert!(restore.status.success(), "{}", String::from_utf8_lossy(&restore.stderr));
    restored_knows_them(&db, &url, &url, &before).await;
    let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
    sqlx::query(sqlx::AssertSqlSafe(drop)).execute(&mut admin).await.expect("dropped");
    admin.close().await.expect("closed");
}

/// PostgreSQL is backed up with its own tools: the command says which, and writes nothing.
#[tokio::test]
async fn a_backup_of_postgresql_names_its_own_tools() {
    let folder = tempfile::tempdir().expect("a folder");
    let output = chatgate(folder.path())
        .env("CHATGATE_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
        .args(["backup", "copy"])
        .output()
        .expect("chatgate runs");
    assert_one_line_failure(&output, "pg_dump");
    assert!(!folder.path().join("copy").exists() && !folder.path().join("copy.partial").exists());
}
