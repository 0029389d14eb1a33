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

    /// Fills the disk, then gives `kilobytes` back: room for a small write, not for a big one.
    fn fill_leaving(&self, kilobytes: u64) {
        self.fill();
        let file = std::fs::OpenOptions::new().write(true).open(self.filler()).expect("filler");
        let size = file.metadata().expect("size").len();
        file.set_len(size.saturating_sub(kilobytes * 1024)).expect("shrink the filler");
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

/// Whether `/readyz` answers `wanted` within 15 s, asked every quarter of a second (the probe
/// and the gateway's own writes settle it; a single read races them).
async fn readyz_becomes(app: &TestApp, wanted: StatusCode) -> bool {
    let deadline = Instant::now() + Duration::from_secs(15);
    while status_of(app, "/readyz").await != wanted {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    true
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

/// A gateway whose SQLite database is on a 16 MB disk of its own, which took a first webhook;
/// `None` where no disk can be mounted. It answers webhooks once their messages are stored (as
/// shipped), so that a webhook stored while admission cannot write is answered at once.
async fn gateway_on_a_small_disk() -> Option<(SmallDisk, TestDb, TestApp)> {
    let disk = SmallDisk::mount(16)?;
    let url = format!("sqlite://{}", disk.path.join("chatgate.db").display());
    let tweak = |c: &mut chatgate::config::Config| {
        c.storage.database_url = chatgate::config::DatabaseUrl::new(url);
        c.ingest.acknowledge = chatgate::config::Acknowledge::Durable;
    };
    let db = TestDb::new_with(Backend::Sqlite, tweak).await.expect("sqlite");
    let app = spawn_app_with(&db, db.config.clone()).await;
    assert_eq!(post_until(&app, &db, "A", StatusCode::OK, Duration::ZERO).await, [StatusCode::OK]);
    Some((disk, db, app))
}

/// Posts fresh messages (tagged `tag`) on a disk just filled until one is refused, for at most
/// 20 s. SQLite writes the WAL from its start again after each checkpoint (`workers::checkpoint`),
/// over space the file already holds, so writes go on being stored — and acknowledged, rightly —
/// until a checkpoint needs the database file to grow; the 503 comes then. Returns the ids that
/// were acknowledged on the way.
async fn post_until_refused(app: &TestApp, db: &TestDb, tag: &str) -> Vec<String> {
    let seen = post_until(app, db, tag, StatusCode::SERVICE_UNAVAILABLE, Duration::from_secs(20)).await;
    assert_eq!(seen.last(), Some(&StatusCode::SERVICE_UNAVAILABLE), "a full disk ends in a 503 (retry): {seen:?}");
    assert!(seen.iter().all(|s| [StatusCode::OK, StatusCode::SERVICE_UNAVAILABLE].contains(s)), "{seen:?}");
    seen.iter().enumerate().filter(|(_, s)| **s == StatusCode::OK).map(|(n, _)| format!("wamid.{tag}{n}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_recovers_from_a_full_disk_by_itself() {
    let Some((disk, db, app)) = gateway_on_a_small_disk().await else { return };

    disk.fill();
    let acknowledged = post_until_refused(&app, &db, "F").await;
    assert!(readyz_becomes(&app, StatusCode::SERVICE_UNAVAILABLE).await, "a database that cannot write is not ready");

    disk.free();
    let back = post_until(&app, &db, "B", StatusCode::OK, Duration::from_secs(10)).await;
    assert_eq!(back.last(), Some(&StatusCode::OK), "webhooks are taken again once space is back: {back:?}");
    assert!(readyz_becomes(&app, StatusCode::OK).await, "ready again once space is back");
    crate::helpers::each_admitted_once(&db, &acknowledged).await;
    let newest = chatgate::store::CommandFilter { limit: 1, ..Default::default() };
    let last = db.store.commands().list(&crate::helpers::tenant("demo"), &newest).await.expect("read");
    let id = last[0].envelope.command_id;
    assert_eq!(crate::helpers::settled(&db, id).await, "executed", "the dispatcher works again");
    app.stop().await.expect("stop");
}

/// Issue 27.3: `/readyz` is not ready while the gateway cannot store what it would acknowledge,
/// probe after probe (spaced past the store's half-second breaker, which hid it before), and is
/// ready again by itself once space is back, with no webhook needed to find out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_fails_for_as_long_as_the_disk_is_full() {
    let Some((disk, db, app)) = gateway_on_a_small_disk().await else { return };
    assert_eq!(status_of(&app, "/readyz").await, StatusCode::OK);

    // Room for the one page a small write needs, not for an admission: a webhook is either not
    // stored (503, the provider retries) or stored in the inbox (200), and admitted once space is
    // back; meanwhile admission cannot write, and the gateway says it is not ready.
    disk.fill_leaving(48);
    let acknowledged = post_until_refused(&app, &db, "F").await;
    let mut probes = vec![];
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        probes.push(status_of(&app, "/readyz").await);
    }
    assert!(probes.iter().all(|s| *s == StatusCode::SERVICE_UNAVAILABLE), "not ready while full: {probes:?}");

    disk.free();
    assert!(readyz_becomes(&app, StatusCode::OK).await, "ready again once space is back, without traffic");
    assert_eq!(post_until(&app, &db, "B", StatusCode::OK, Duration::from_secs(5)).await.last(), Some(&StatusCode::OK));
    crate::helpers::each_admitted_once(&db, &acknowledged).await;
    app.stop().await.expect("stop");
}

/// A JWT signed with HS256 over exactly the header and claims given (RFC 7515 §3.1).
fn hs256(secret: &str, header: &serde_json::Value, claims: &serde_json::Value) -> String {
    use base64::Engine as _;
    use hmac::{Hmac, Mac};
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let input = format!("{}.{}", b64(header.to_string().as_bytes()), b64(claims.to_string().as_bytes()));
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(input.as_bytes());
    format!("{input}.{}", b64(&mac.finalize().into_bytes()))
}

#[tokio::test]
async fn a_token_with_an_unknown_critical_header_or_a_far_expiry_is_refused() {
    use serde_json::json;
    let db = TestDb::sqlite().await;
    let app = spawn_app_with(&db, db.config.clone()).await;
    let issuer = &db.config.auth.issuers["demo"];
    let secret = issuer.secret.as_ref().expect("the demo issuer has a secret").expose().to_owned();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let claims = |exp: i64| {
        json!({"iss": issuer.issuer, "aud": db.config.auth.audience, "sub": "ops-1", "tenant": "demo",
               "scope": "commands:read", "iat": now, "nbf": now, "exp": exp})
    };
    let plain = json!({"alg": "HS256", "typ": "JWT"});
    let call = |token: String| {
        let request = app.client.get(app.url("/v1/commands")).bearer_auth(token);
        async move {
            let response = request.send().await.expect("request");
            (response.status(), response.text().await.unwrap_or_default())
        }
    };
    assert_eq!(call(hs256(&secret, &plain, &claims(now + 600))).await.0, StatusCode::OK, "the control");

    // RFC 7515 §4.1.11: an extension the recipient does not understand, marked critical.
    let critical = json!({"alg": "HS256", "typ": "JWT", "crit": ["urn:example:bound"], "urn:example:bound": true});
    let (status, body) = call(hs256(&secret, &critical, &claims(now + 600))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(body.contains("critical"), "{body}");

    let thirty_one_thousand_years = 31_000 * 365 * 86_400;
    let (status, body) = call(hs256(&secret, &plain, &claims(now + thirty_one_thousand_years))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(body.contains("longer than this gateway accepts"), "{body}");
    // Up to the configured maximum (a day by default) is fine.
    assert_eq!(call(hs256(&secret, &plain, &claims(now + 86_000))).await.0, StatusCode::OK);
    app.stop().await.expect("stop");
}

/// Reads what the server sends on `stream` until it closes it, for `within`; `None` if it is
/// still open then.
async fn read_until_closed(stream: &mut tokio::net::TcpStream, within: Duration) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut seen = vec![];
    let mut buffer = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some(String::from_utf8_lossy(&seen).into_owned()),
            Ok(Ok(n)) => seen.extend_from_slice(&buffer[..n]),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off_and_the_gateway_keeps_answering() {
    use tokio::io::AsyncWriteExt;
    let db = TestDb::sqlite().await;
    let mut config = db.config.clone();
    config.server.header_read_timeout_ms = 1_000;
    config.server.max_connections = 64;
    let app = spawn_app_with(&db, config).await;
    // A slowloris: a request line and `Host`, then nothing, on more connections than allowed.
    let mut slow = vec![];
    for _ in 0..100 {
        let mut stream = tokio::net::TcpStream::connect(app.addr).await.expect("connect");
        stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: chatgate\r\n").await.expect("write");
        slow.push(stream);
    }
    let started = Instant::now();
    let mut turned_away = 0;
    let mut cut_off = 0;
    for stream in &mut slow {
        match read_until_closed(stream, Duration::from_secs(4)).await {
            Some(answer) if answer.starts_with("HTTP/1.1 503") => turned_away += 1,
            Some(_) => cut_off += 1,
            None => panic!("a connection that sent no whole request is still open after {:?}", started.elapsed()),
        }
    }
    assert!(turned_away >= 36, "connections over the limit get a 503 at once ({turned_away})");
    assert!(cut_off >= 1 && turned_away + cut_off == 100, "the others are closed when their headers are late");
    // Meanwhile, and after, the gateway answers.
    let health = app.client.get(app.url("/healthz")).send().await.expect("healthz");
    assert_eq!(health.status(), StatusCode::OK);
    app.stop().await.expect("stop");
}

/// The delivery's failure detail, once it closed.
async fn closed_delivery(db: &TestDb, id: uuid::Uuid) -> (Option<String>, serde_json::Value) {
    let deliveries = db.store.deliveries().of_command(id).await.expect("deliveries");
    let d = deliveries.into_iter().next().expect("a delivery");
    (d.failure_class, d.detail.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_down_longer_than_eight_attempts_is_retried_until_the_delivery_timeout() {
    use serde_json::json;
    let executor = crate::fake_graph::FakeServer::executor().await;
    let db = TestDb::sqlite().await;
    let mut config = db.config.clone();
    config.outbound.poll_interval_ms = 10;
    let orders = config.executors.get_mut("orders").expect("orders");
    orders.url = executor.url.clone();
    orders.backoff_initial_ms = 10;
    orders.backoff_max_ms = 40;
    orders.delivery_timeout_ms = 4_000;
    let app = spawn_app_with(&db, config).await;
    // Down for 15 attempts (eight used to be all there was), then up.
    for _ in 0..15 {
        executor.answer_next(503, json!({"error": "starting"}), None);
    }
    executor.answer_next(200, json!({"status": "succeeded", "result": {}}), None);
    let meta = Meta::new(&app, &db);
    meta.text("wamid.DOWN1", CUSTOMER, "order status 1").await;
    let first = crate::helpers::command_of_message(&db, "wamid.DOWN1").await;
    assert_eq!(crate::helpers::settled(&db, first).await, "executed", "retried until it came back");
    assert_eq!(executor.requests().len(), 16);

    // Down for good: it ends at the delivery timeout, and says so.
    for _ in 0..1_000 {
        executor.answer_next(503, json!({"error": "down"}), None);
    }
    meta.text("wamid.DOWN2", CUSTOMER, "order status 2").await;
    let second = crate::helpers::command_of_message(&db, "wamid.DOWN2").await;
    let started = Instant::now();
    assert_eq!(crate::helpers::settled(&db, second).await, "failed");
    assert!(started.elapsed() >= Duration::from_secs(3), "not before the delivery timeout: {:?}", started.elapsed());
    let (class, detail) = closed_delivery(&db, second).await;
    assert_eq!(class.as_deref(), Some("DELIVERY_TIMEOUT"), "{detail}");
    assert_eq!(detail["ended_by"], "delivery_timeout", "{detail}");
    app.stop().await.expect("stop");
}

pub(crate) struct KillOnDrop(pub(crate) std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The example executor (`examples/executor.py`) does the work once when two calls with one key
/// arrive together — what a redelivery after a kill can cause — and tells the second to retry.
#[tokio::test]
async fn the_example_executor_dedupes_concurrent_calls_by_key() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/executor.py");
    // The executor chooses its own port and says which: a port picked here and handed over could
    // be taken meanwhile by another test's server.
    let mut child = Command::new("python3")
        .args([script, "--port", "0", "--work-ms", "700"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs the example executor");
    let mut first_line = String::new();
    let stdout = child.stdout.take().expect("stdout");
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut first_line).expect("its first line");
    let _executor = KillOnDrop(child);
    let address = first_line.trim().rsplit(' ').next().expect("an address").to_owned();
    let url = format!("http://{address}");
    let client = reqwest::Client::new();
    let call = || {
        client
            .post(&url)
            .header("idempotency-key", "cmd-key-1")
            .json(&serde_json::json!({"intent": {"action": "refund"}, "args": {"amount": "25.00"}}))
            .send()
    };
    let (first, second) = tokio::join!(call(), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        call().await
    });
    let (first, second) = (first.expect("first"), second.expect("second"));
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(second.status(), StatusCode::SERVICE_UNAVAILABLE, "the duplicate is told to come back");
    assert_eq!(second.headers()["retry-after"], "1");
    let first_body: serde_json::Value = first.json().await.expect("json");
    let again = call().await.expect("again");
    assert_eq!(again.status(), StatusCode::OK);
    assert_eq!(again.json::<serde_json::Value>().await.expect("json"), first_body, "the first answer again");
    let effects: serde_json::Value = client.get(&url).send().await.expect("effects").json().await.expect("json");
    assert_eq!(effects["effects"], 1, "the work was done once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_executor_holds_up_no_other() {
    // An executor that takes every connection and never answers.
    let hanging = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("port");
    let hanging_url = format!("http://{}", hanging.local_addr().expect("addr"));
    tokio::spawn(async move {
        let mut held = vec![];
        while let Ok((stream, _)) = hanging.accept().await {
            held.push(stream);
        }
    });
    let db = TestDb::sqlite().await;
    let mut config = db.config.clone();
    config.outbound.poll_interval_ms = 10;
    let orders = config.executors.get_mut("orders").expect("orders");
    orders.url = hanging_url;
    orders.request_timeout_ms = 30_000;
    // The stop waits for calls under way up to its grace period: the hanging ones, here.
    config.server.shutdown_grace_ms = 500;
    let app = spawn_app_with(&db, config).await;
    let meta = Meta::new(&app, &db);
    for n in 0..3 {
        meta.text(&format!("wamid.HANG{n}"), CUSTOMER, &format!("order status {n}")).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The built-in `status` goes to the gateway's own executor, not to the hanging one.
    let asked = Instant::now();
    meta.text("wamid.STATUS", CUSTOMER, "status").await;
    let id = crate::helpers::command_of_message(&db, "wamid.STATUS").await;
    assert_eq!(crate::helpers::settled(&db, id).await, "executed");
    assert!(asked.elapsed() < Duration::from_secs(3), "`status` waited {:?} for the hanging executor", asked.elapsed());
    app.stop().await.ok();
}

/// A TCP proxy in front of PostgreSQL that the test can cut: down, it drops every connection and
/// every new one at once, as a stopped database does.
struct DatabaseLink {
    addr: std::net::SocketAddr,
    up: std::sync::Arc<std::sync::atomic::AtomicBool>,
    cut: tokio::sync::watch::Sender<u64>,
}

impl DatabaseLink {
    async fn start(upstream: std::net::SocketAddr) -> Self {
        use std::sync::atomic::Ordering;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("port");
        let addr = listener.local_addr().expect("addr");
        let up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (cut, cuts) = tokio::sync::watch::channel(0u64);
        let link_up = up.clone();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if !link_up.load(Ordering::Acquire) {
                    continue; // dropped: the connection is closed at once
                }
                let mut cuts = cuts.clone();
                // Only a cut from now on ends this connection.
                cuts.mark_unchanged();
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cuts.changed() => {}
                    }
                });
            }
        });
        Self { addr, up, cut }
    }

    fn down(&self) {
        self.up.store(false, std::sync::atomic::Ordering::Release);
        self.cut.send_modify(|n| *n += 1);
    }

    fn up(&self) {
        self.up.store(true, std::sync::atomic::Ordering::Release);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_database_outage_is_answered_503_at_once_and_the_gateway_comes_back() {
    let Some(db) = TestDb::postgres().await else { return };
    let mut url = url::Url::parse(&db.url).expect("url");
    let upstream = format!("{}:{}", url.host_str().expect("host"), url.port().unwrap_or(5432));
    let upstream = tokio::net::lookup_host(upstream).await.expect("resolve").next().expect("an address");
    let link = DatabaseLink::start(upstream).await;
    url.set_port(Some(link.addr.port())).expect("port");
    let mut config = db.config.clone();
    config.storage.database_url = chatgate::config::DatabaseUrl::new(url.to_string());
    config.storage.max_waiting_admissions = 16;
    let app = crate::helpers::respawn_app_with(config).await;
    assert_eq!(post_until(&app, &db, "UP", StatusCode::OK, Duration::ZERO).await, [StatusCode::OK]);

    link.down();
    let meta = Meta::new(&app, &db);
    let started = Instant::now();
    let answers = futures_util::future::join_all((0..200).map(|n| {
        let request = meta.request(&chatgate::channels::whatsapp::simulate::notification(
            crate::helpers::DEMO_NUMBER,
            vec![chatgate::channels::whatsapp::simulate::text(&format!("wamid.OUT{n}"), CUSTOMER, "order status 1")],
            vec![],
        ));
        async move {
            let sent = Instant::now();
            let response = request.send().await.expect("answered");
            (response.status(), response.headers().contains_key("retry-after"), sent.elapsed())
        }
    }))
    .await;
    let slowest = answers.iter().map(|(_, _, took)| *took).max().expect("answers");
    assert!(answers.iter().all(|(status, retry_after, _)| *status == StatusCode::SERVICE_UNAVAILABLE && *retry_after));
    assert!(slowest < Duration::from_secs(7), "200 webhooks while the database is down: the slowest took {slowest:?}");
    assert!(started.elapsed() < Duration::from_secs(8));

    link.up();
    let back = post_until(&app, &db, "BACK", StatusCode::OK, Duration::from_secs(10)).await;
    let ready = app.client.get(app.url("/readyz")).send().await.expect("readyz").text().await.unwrap_or_default();
    assert_eq!(back.last(), Some(&StatusCode::OK), "taken again once the database is back: {back:?} ({ready})");
    app.stop().await.ok();
}
