//! Faults the gateway must recover from without a restart (issue #19), each reproduced for real.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use reqwest::StatusCode;

use crate::helpers::{Backend, CUSTOMER, Meta, TestApp, TestDb, spawn_app_with};

/// A small filesystem of its own (tmpfs), to fill up and free again. Mounting needs root, which CI
/// has; elsewhere the test says it was skipped.
struct SmallDisk {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(megabytes: u32) -> Option<Self> {
        let dir = tempfile::tempdir().expect("mount point");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={megabytes}m"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            eprintln!("skipped: cannot mount a tmpfs here (needs root, as in CI)");
            return None;
        }
        Some(Self { path: dir.path().to_owned(), _dir: dir })
    }

    fn filler(&self) -> PathBuf {
        self.path.join("filler")
    }

    /// Writes until the disk is full.
    fn fill(&self) {
        let mut file = std::fs::File::create(self.filler()).expect("filler");
        let chunk = vec![0u8; 64 * 1024];
        while file.write_all(&chunk).is_ok() {}
        let _ = file.sync_all();
    }

    fn free(&self) {
        std::fs::remove_file(self.filler()).expect("remove filler");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

async fn status_of(app: &TestApp, path: &str) -> StatusCode {
    app.client.get(app.url(path)).send().await.map(|r| r.status()).unwrap_or(StatusCode::BAD_GATEWAY)
}

/// Posts a fresh message until `wanted` answers it, for `within`; the statuses seen.
async fn post_until(app: &TestApp, db: &TestDb, tag: &str, wanted: StatusCode, within: Duration) -> Vec<StatusCode> {
    let meta = Meta::new(app, db);
    let deadline = Instant::now() + within;
    let mut seen = vec![];
    for n in 0.. {
        let status = meta.text(&format!("wamid.{tag}{n}"), CUSTOMER, &format!("order status {n}")).await.status();
        seen.push(status);
        if status == wanted || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_recovers_from_a_full_disk_by_itself() {
    let Some(disk) = SmallDisk::mount(16) else { return };
    let url = format!("sqlite://{}", disk.path.join("chatgate.db").display());
    let tweak = |c: &mut chatgate::config::Config| c.storage.database_url = chatgate::config::DatabaseUrl::new(url);
    let db = TestDb::new_with(Backend::Sqlite, tweak).await.expect("sqlite");
    let app = spawn_app_with(&db, db.config.clone()).await;
    assert_eq!(post_until(&app, &db, "A", StatusCode::OK, Duration::ZERO).await, [StatusCode::OK]);

    disk.fill();
    let full = post_until(&app, &db, "F", StatusCode::OK, Duration::from_secs(2)).await;
    assert!(full.iter().all(|s| *s == StatusCode::SERVICE_UNAVAILABLE), "a full disk is 503 (retry): {full:?}");
    assert_eq!(status_of(&app, "/readyz").await, StatusCode::SERVICE_UNAVAILABLE, "a database that cannot write");

    disk.free();
    let back = post_until(&app, &db, "B", StatusCode::OK, Duration::from_secs(10)).await;
    assert_eq!(back.last(), Some(&StatusCode::OK), "webhooks are taken again once space is back: {back:?}");
    assert_eq!(status_of(&app, "/readyz").await, StatusCode::OK);
    let newest = chatgate::store::CommandFilter { limit: 1, ..Default::default() };
    let last = db.store.commands().list(&crate::helpers::tenant("demo"), &newest).await.expect("read");
    let id = last[0].envelope.command_id;
    assert_eq!(crate::helpers::settled(&db, id).await, "executed", "the dispatcher works again");
    app.stop().await.expect("stop");
}
