//! Issue 50, goal 4: `chatgate backup PATH` copies SQLite's two files while webhooks arrive; a
//! gateway started on the copies (docs/OPERATING.md, "Backups") has every message acknowledged
//! before the backup began, and knows each of them when it is delivered again.

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

/// Waits until `sql` (one text parameter) counts `wanted` rows in the database `url` (15 s at most).
async fn until_count(url: &str, sql: &'static str, bind: &str, wanted: i64) {
    let deadline = Instant::now() + Duration::from_secs(15);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_taken_while_webhooks_arrive_restores_all_that_was_acknowledged_before_it() {
    let db = TestDb::sqlite().await;
    let mut config = db.config.clone();
    config.ingest.acknowledge = Acknowledge::Durable;
    let app = spawn_app_with(&db, config).await;
    let stop = Arc::new(AtomicBool::new(false));
    let (acknowledged, senders) = keep_sending(&app, &db, &stop);
    let deadline = Instant::now() + Duration::from_secs(20);
    while acknowledged.lock().expect("the list").len() < 100 {
        assert!(Instant::now() < deadline, "100 webhooks answered");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let before: Vec<String> = acknowledged.lock().expect("the list").clone();
    let folder = tempfile::tempdir().expect("a folder");
    let backup = folder.path().join("backup");
    let mut command = chatgate(folder.path());
    command.env("CHATGATE_DATABASE_URL", db.url.as_str()).arg("backup").arg(&backup);
    let made = tokio::task::spawn_blocking(move || command.output().expect("chatgate runs")).await.expect("joined");
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    stop.store(true, Ordering::Relaxed);
    for sender in senders {
        sender.await.expect("the sender ends");
    }
    let sent = acknowledged.lock().expect("the list").len();
    app.stop().await.expect("stop");
    assert!(!folder.path().join("backup.partial").exists(), "the copies were moved into place");

    // The restore: the backup's two files put where a new gateway's configuration names them.
    let restored = folder.path().join("restored");
    std::fs::create_dir_all(&restored).expect("a folder");
    for file in ["chatgate.db", "chatgate-inbox.db"] {
        std::fs::copy(backup.join(file), restored.join(file)).expect("copied into place");
    }
    let url = format!("sqlite://{}", restored.join("chatgate.db").display());
    let mut config = db.config.clone();
    config.storage.database_url = DatabaseUrl::new(url.clone());
    let app = respawn_app_with(config).await;
    let once = "SELECT COUNT(*) FROM inbound_messages WHERE provider_message_id = $1";
    for id in &before {
        until_count(&url, once, id, 1).await;
    }
    // Those acknowledged while the backup ran, in the copy of the inbox, are admitted too.
    let inbox = chatgate::store::inbox_url(&url).expect("the inbox beside it");
    until_count(&inbox, "SELECT COUNT(*) FROM inbox WHERE admitted_at IS NULL AND channel = $1", "whatsapp", 0).await;
    let commands = "SELECT COUNT(*) FROM commands WHERE tenant_id = $1";
    let mut conn = AnyConnection::connect(&url).await.expect("the restored database");
    let made: i64 = sqlx::query_scalar(commands).bind("demo").fetch_one(&mut conn).await.expect("count");
    assert!(made >= before.len() as i64, "{made} commands for {} messages acknowledged before", before.len());

    // Delivered again after the restore: each is known, nothing new is made.
    let meta = Meta::new(&app, &db);
    for (n, id) in before.iter().enumerate() {
        assert_eq!(meta.text(id, CUSTOMER, &format!("order status {n}")).await.status(), 200);
    }
    for id in &before {
        until_count(&url, once, id, 1).await;
    }
    let again: i64 = sqlx::query_scalar(commands).bind("demo").fetch_one(&mut conn).await.expect("count");
    assert_eq!(again, made, "redeliveries made no command");
    eprintln!("{} acknowledged before the backup, {sent} by the end; {made} commands restored", before.len());
    conn.close().await.expect("closed");
    app.stop().await.expect("stop");
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
