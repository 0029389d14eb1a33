//! Issue 27.4: a gateway started under a low file-descriptor limit (`ulimit -n 1024`) with 1,100
//! idle clients still answers every health probe at once. It raises its soft limit to the hard one
//! at start, and keeps `server.max_connections` below what it may open, so that a connection over
//! the limit is answered 503 and closed instead of waiting in the kernel's queue while `accept`
//! fails for want of a descriptor.

use std::path::Path;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use crate::process::ConfigDir;

/// `chatgate` run by a shell that first sets `limits` (`ulimit` arguments).
fn limited_binary(dir: &Path, limits: &str) -> std::path::PathBuf {
    let script = dir.join("chatgate-limited");
    let bin = env!("CARGO_BIN_EXE_chatgate");
    std::fs::write(&script, format!("#!/bin/sh\nulimit {limits} || exit 99\nexec {bin} \"$@\"\n")).expect("script");
    let mut permissions = std::fs::metadata(&script).expect("script").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&script, permissions).expect("executable");
    script
}

async fn gateway_under(limits: &str) -> (ConfigDir, crate::process::Gateway) {
    let config = ConfigDir::shipped(|c| c);
    let bin = limited_binary(config.dir.path(), limits);
    let database = format!("sqlite://{}/chatgate.db", config.dir.path().display());
    let env = [("CHATGATE_DATABASE_URL", database.as_str())];
    let gateway = chatgate::cli::conformance::gateway::Gateway::start(&bin, &config.path(), &owned(&env), None).await;
    (config, gateway.unwrap_or_else(|e| panic!("the gateway under `ulimit {limits}`: {e}")))
}

fn owned(env: &[(&str, &str)]) -> Vec<(String, String)> {
    env.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect()
}

/// `n` clients that connect and say nothing.
async fn idle_clients(base: &str, n: usize) -> Vec<TcpStream> {
    let address = base.trim_start_matches("http://").to_owned();
    let mut clients = Vec::with_capacity(n);
    for _ in 0..n {
        if let Ok(stream) = TcpStream::connect(&address).await {
            clients.push(stream);
        }
    }
    clients
}

/// `path`'s status, or `None` when it did not answer within a second.
async fn probe(client: &reqwest::Client, base: &str, path: &str) -> Option<u16> {
    let answer = tokio::time::timeout(Duration::from_secs(1), client.get(format!("{base}{path}")).send()).await;
    answer.ok().and_then(Result::ok).map(|r| r.status().as_u16())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_clients_past_the_descriptor_limit_never_hold_up_the_health_check() {
    // This test's own 1,100 clients need descriptors too.
    let ours = chatgate::http::listen::raise_open_file_limit();
    if ours.is_some_and(|n| n < 2_500) {
        eprintln!("skipped: this process may open only {ours:?} files");
        return;
    }
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().expect("client");

    // A soft limit of 1,024 under a higher hard one: raised at start, so 1,000 idle clients fit
    // within the default 1,024 connections and the probe is served.
    let (_dir, raised) = gateway_under("-S -n 1024").await;
    let held = idle_clients(&raised.base, 1_000).await;
    // Served, not turned away (`/readyz` over the limit would be 503).
    assert_eq!(probe(&client, &raised.base, "/readyz").await, Some(200), "the soft limit was raised to the hard one");
    drop(held);
    drop(raised);

    // A hard limit of 1,024: the connections served stay below it, and every probe is answered at
    // once, never left waiting: the liveness probe is told the process is alive (a restart would
    // not help), anything else 503 while the idle clients hold the connections.
    let (_dir, capped) = gateway_under("-n 1024").await;
    let held = idle_clients(&capped.base, 1_100).await;
    assert!(held.len() >= 1_000, "the clients connected: {}", held.len());
    let started = Instant::now();
    let mut answers = vec![];
    for _ in 0..6 {
        answers.push((probe(&client, &capped.base, "/healthz").await, probe(&client, &capped.base, "/readyz").await));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(answers.iter().all(|a| *a == (Some(200), Some(503))), "answered at once: {answers:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(5);
    while probe(&client, &capped.base, "/readyz").await != Some(200) {
        assert!(Instant::now() < deadline, "served again once the idle clients left");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Issue 44.3: over the connection limit, with more idle clients waiting to be turned away than
/// may linger, a liveness probe that takes its time to send its request after connecting (a probe
/// process just started, a busy machine: the first probe was answered 503 when it took over 20 ms)
/// is read and answered 200; a request for anything else 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_liveness_probe_behind_idle_clients_over_the_limit_is_answered_200() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let db = crate::helpers::TestDb::sqlite().await;
    let mut config = db.config.clone();
    config.server.max_connections = 8;
    let app = crate::helpers::spawn_app_with(&db, config).await;
    // The limit's 8, then 300 more than may linger, all idle.
    let mut idle = Vec::with_capacity(308);
    for _ in 0..308 {
        idle.push(TcpStream::connect(app.addr).await.expect("connect"));
    }
    let probe = |path: &'static str| async move {
        let mut stream = TcpStream::connect(app.addr).await.expect("connect");
        tokio::time::sleep(Duration::from_millis(150)).await;
        let request = format!("GET {path} HTTP/1.1\r\nHost: chatgate\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("request");
        let mut answer = String::new();
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut answer)).await;
        assert!(read.is_ok(), "answered within 5 s");
        answer.lines().next().unwrap_or_default().to_owned()
    };
    for _ in 0..3 {
        assert_eq!(probe("/healthz").await, "HTTP/1.1 200 OK", "the liveness probe, every time");
    }
    assert_eq!(probe("/readyz").await, "HTTP/1.1 503 Service Unavailable", "anything else");
    drop(idle);
    app.stop().await.expect("stop");
}
