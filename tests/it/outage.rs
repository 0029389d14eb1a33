//! Issue 44.1: the database goes away under a steady stream of webhooks — PostgreSQL stopped and
//! started again by the test (a server of the test's own, so that no other test loses its
//! database), SQLite's inbox locked by another process — and every webhook is still answered,
//! within `ingest.store_timeout_ms` (0.8 s as shipped): 200, or 503 with `Retry-After`. Once the
//! database is back, the answers are 200 again at once, and every delivery answered 200 is
//! admitted exactly once.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use reqwest::StatusCode;

use crate::helpers::{CUSTOMER, DEMO_NUMBER, TestApp, TestDb, spawn_app_with};

/// Webhooks a second, as the outage was first seen under.
const RATE: u64 = 100;
/// The most a webhook may take to be answered: the shipped bound and some room for a busy machine.
const SLOWEST: Duration = Duration::from_millis(1_500);

/// A PostgreSQL server of the test's own: Debian's binaries, run as the `postgres` user (as root,
/// which CI is; elsewhere the test says it was skipped), on a free port, in a temporary folder.
struct OwnPostgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
}

impl OwnPostgres {
    fn start() -> Option<Self> {
        // SAFETY: geteuid only reads the process's effective user id.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: starting a PostgreSQL server of the test's own needs root (as in CI)");
            return None;
        }
        let versions = std::fs::read_dir("/usr/lib/postgresql").ok()?;
        let bin = versions.filter_map(Result::ok).map(|v| v.path().join("bin")).find(|b| b.join("initdb").exists());
        let Some(bin) = bin else {
            eprintln!("skipped: no PostgreSQL server binaries under /usr/lib/postgresql");
            return None;
        };
        let dir = tempfile::tempdir().expect("folder");
        let owner = Command::new("chown").args(["postgres:postgres"]).arg(dir.path()).status();
        assert!(owner.is_ok_and(|s| s.success()), "the folder is the postgres user's");
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
        let server = Self { dir, bin, port };
        let data = server.data();
        let made = server.run("initdb", &["-D", &data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]);
        assert!(made, "initdb");
        server.up();
        Some(server)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    /// `program` of the server's binaries, as the `postgres` user; whether it succeeded.
    fn run(&self, program: &str, args: &[&str]) -> bool {
        let program = self.bin.join(program);
        let output = Command::new("runuser").args(["-u", "postgres", "--"]).arg(program).args(args).output();
        output.is_ok_and(|o| o.status.success())
    }

    /// Started, and accepting connections, when this returns.
    fn up(&self) {
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c fsync=off -c max_connections=200",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("postgres.log").display().to_string();
        assert!(self.run("pg_ctl", &["-D", &self.data(), "-l", &log, "-o", &options, "-w", "start"]), "pg_ctl start");
    }

    /// Stopped (`-m fast`: every connection is ended, as an administrator's stop does).
    fn down(&self) {
        assert!(self.run("pg_ctl", &["-D", &self.data(), "-m", "fast", "-w", "stop"]), "pg_ctl stop");
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        self.run("pg_ctl", &["-D", &self.data(), "-m", "immediate", "stop"]);
    }
}

/// One webhook's fate: when it was sent (from the start), its message id, and its answer — the
/// status, whether it said when to retry, how long it took — or `None` when no answer came.
type Sent = (Duration, String, Option<(StatusCode, bool, Duration)>);

/// Sends `RATE` webhooks a second (each a new message) until `stop`; what each came to.
async fn steady_stream(app: &TestApp, db: &TestDb, stop: tokio_util::sync::CancellationToken) -> Vec<Sent> {
    use chatgate::channels::whatsapp::simulate;
    let meta = crate::helpers::Meta::new(app, db);
    let started = Instant::now();
    let mut ticks = tokio::time::interval(Duration::from_millis(1_000 / RATE));
    let mut sending = vec![];
    for n in 0.. {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = ticks.tick() => {}
        }
        let id = format!("wamid.STREAM{n}");
        let message = simulate::text(&id, CUSTOMER, &format!("order status {n}"));
        let request = meta.request(&simulate::notification(DEMO_NUMBER, vec![message], vec![]));
        let at = started.elapsed();
        sending.push(tokio::spawn(async move {
            let sent = Instant::now();
            let answer = request.timeout(Duration::from_secs(30)).send().await.ok();
            let answer = answer.map(|r| (r.status(), r.headers().contains_key("retry-after"), sent.elapsed()));
            (at, id, answer)
        }));
    }
    let mut sent = Vec::with_capacity(sending.len());
    for task in sending {
        sent.push(task.await.expect("a webhook's task"));
    }
    sent
}

/// What the stream came to, checked: every webhook answered within `SLOWEST`, each 200 or 503
/// with `Retry-After`; some refused while the database was away (`away`); every one sent from
/// `back` on (the database back, and a moment for the first connection) answered 200; and every
/// delivery answered 200 admitted exactly once.
async fn check(db: &TestDb, sent: &[Sent], away: Duration, back: Duration) {
    let unanswered: Vec<&str> = sent.iter().filter(|(_, _, a)| a.is_none()).map(|(_, id, _)| id.as_str()).collect();
    assert!(unanswered.is_empty(), "every request read is answered; these were not: {unanswered:?}");
    let answers: Vec<(Duration, &str, StatusCode, bool, Duration)> =
        sent.iter().filter_map(|(at, id, a)| a.map(|(s, r, took)| (*at, id.as_str(), s, r, took))).collect();
    let slowest = answers.iter().map(|a| a.4).max().unwrap_or_default();
    assert!(slowest < SLOWEST, "the slowest of {} answers took {slowest:?}", answers.len());
    let odd: Vec<_> = answers
        .iter()
        .filter(|(.., status, retry, _)| {
            !(*status == StatusCode::OK || (*status == StatusCode::SERVICE_UNAVAILABLE && *retry))
        })
        .collect();
    assert!(odd.is_empty(), "only 200, or 503 with Retry-After: {odd:?}");
    let refused = answers.iter().filter(|(at, _, status, ..)| *at >= away && *status != StatusCode::OK).count();
    assert!(refused > 0, "the outage was answered 503");
    eprintln!("{} webhooks: the slowest answer took {slowest:?}, {refused} answered 503", answers.len());
    let late: Vec<_> = answers.iter().filter(|(at, _, status, ..)| *at >= back && *status != StatusCode::OK).collect();
    assert!(late.is_empty(), "200 again once the database is back: {late:?}");
    let taken: Vec<&str> = answers.iter().filter(|a| a.2 == StatusCode::OK).map(|a| a.1).collect();
    crate::helpers::each_admitted_once(db, &taken).await;
}

/// A stream of webhooks to a gateway on `db`, through `outage` (which takes the database away for
/// five seconds and gives it back) two seconds in, and four seconds after it; checked.
async fn through_an_outage(db: &TestDb, outage: impl std::future::Future<Output = ()>) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let stop = tokio_util::sync::CancellationToken::new();
    let stream = steady_stream(&app, db, stop.clone());
    let timeline = async {
        let started = Instant::now();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let away = started.elapsed();
        outage.await;
        let back = started.elapsed() + Duration::from_secs(2);
        tokio::time::sleep(Duration::from_secs(4)).await;
        stop.cancel();
        (away, back)
    };
    let (sent, (away, back)) = tokio::join!(stream, timeline);
    check(db, &sent, away, back).await;
    app.stop().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgresql_stopped_under_a_stream_of_webhooks_every_one_is_answered_within_a_second() {
    let Some(server) = OwnPostgres::start() else { return };
    let db = TestDb::postgres_on(&server.url(), shipped_bounds).await;
    let outage = async {
        server.down();
        tokio::time::sleep(Duration::from_secs(5)).await;
        server.up();
    };
    through_an_outage(&db, outage).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlites_inbox_locked_by_another_process_under_a_stream_of_webhooks_every_one_is_answered_within_a_second() {
    let db = TestDb::new_with(crate::helpers::Backend::Sqlite, shipped_bounds).await.expect("sqlite");
    let outage = async {
        // Another connection's write lock on the inbox file (a backup, a second process): no write
        // goes in while it is held.
        let mut locker = db.raw_inbox().await;
        sqlx::Executor::execute(&mut locker, "BEGIN EXCLUSIVE").await.expect("the inbox locked");
        tokio::time::sleep(Duration::from_secs(5)).await;
        sqlx::Executor::execute(&mut locker, "COMMIT").await.expect("the lock let go");
    };
    through_an_outage(&db, outage).await;
}

/// The shipped bounds on a webhook's wait (the test helpers give a busy suite more room).
fn shipped_bounds(config: &mut chatgate::config::Config) {
    let shipped = chatgate::config::IngestConfig::default();
    config.ingest.store_timeout_ms = shipped.store_timeout_ms;
    config.ingest.acknowledge = shipped.acknowledge;
}
