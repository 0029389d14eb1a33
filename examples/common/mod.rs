//! What the benchmarks share (`pipeline`, `protections`): the gateway binary as a process,
//! signed WhatsApp deliveries, a load generator, percentiles, the process's memory.

#![allow(dead_code)]

pub mod anchors;
pub mod beside;
pub mod goals;
pub mod mix;
pub mod wire;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use chatgate::channels::whatsapp::{signature, simulate};

pub const SECRET: &str = "bench-app-secret";
pub const NUMBER: &str = "100000000000001";

/// What one load run saw.
pub struct Load {
    pub ok: usize,
    pub failed: usize,
    pub elapsed: Duration,
    pub latencies: Vec<Duration>,
    pub last_answer: Instant,
}

impl Load {
    pub fn rate(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64()
    }

    pub fn p(&self, q: f64) -> Duration {
        percentile(&self.latencies, q)
    }
}

/// One signed single-message delivery: its body and its `X-Hub-Signature-256`.
pub fn signed(id: &str, from: &str, text: &str) -> (Vec<u8>, String) {
    let message = simulate::text(id, from, text);
    let body = simulate::notification(NUMBER, vec![message], vec![]).to_string().into_bytes();
    let signature = signature::sign(SECRET.as_bytes(), &body);
    (body, signature)
}

/// The benchmark tenant's head in a directory file: its WhatsApp number and `routes` (other
/// channels' bots and pages), and the roles the shipped commands and approval policies name; its
/// people follow it.
pub fn tenant_head(routes: &str) -> String {
    format!(
        "[tenants.demo]\ndisplay_name = \"Bench\"\nphone_number_ids = [\"{NUMBER}\"]\n{routes}\
         unknown_sender = \"refuse\"\nlocale = \"en\"\n[tenants.demo.roles]\n\
         customer = [\"orders:read\", \"orders:refund\"]\nsupervisor = [\"approvals:decide\"]\n\
         admin = [\"approvals:decide\"]\n"
    )
}

/// A gateway configuration written to `dir/name`: the shipped commands and templates, this run's
/// port and database, the directory file `directory`, Graph's stand-in, rate limits that let every
/// webhook through, the builtin executors, and the sections in `extra`.
pub fn write_config(
    dir: &Path,
    name: &str,
    (port, database_url): (u16, &str),
    directory: &Path,
    graph: &str,
    extra: &str,
) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:{port}\"\ncpus = \"${{CHATGATE_CPUS:-}}\"\n[storage]\ndatabase_url = \"{database_url}\"\n\
         [registry]\ncommands = \"{commands}\"\ndirectory = \"{directory}\"\ntemplates = \"{templates}\"\n\
         [whatsapp]\napi_base = \"{graph}\"\naccess_token = \"bench-token\"\n\
         [whatsapp.apps.default]\napp_secret = \"{SECRET}\"\nverify_token = \"bench\"\n\
         [ingest]\nbackground_cpus = \"${{CHATGATE_BACKGROUND_CPUS:-}}\"\n\
         [rate_limits]\nactor = {{ per_minute = 10000000, burst = 1000000 }}\n\
         tenant = {{ per_minute = 10000000, burst = 1000000 }}\n\
         [executors.orders]\nurl = \"builtin:echo\"\n[executors.gateway]\nurl = \"builtin:gateway\"\n{extra}",
        commands = root.join("config/commands.toml").display(),
        directory = directory.display(),
        templates = root.join("templates").display(),
    );
    let path = dir.join(name);
    std::fs::write(&path, config).expect("config");
    path
}

/// Sends every body flat out over `connections` and waits for every answer.
pub async fn fire(url: &str, bodies: Arc<Vec<(Vec<u8>, String)>>, connections: usize) -> Load {
    let client = reqwest::Client::builder().pool_max_idle_per_host(connections).build().expect("client");
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..connections)
        .map(|_| {
            let (client, url, bodies, next) = (client.clone(), url.to_owned(), bodies.clone(), next.clone());
            tokio::spawn(async move {
                let (mut latencies, mut failed) = (vec![], 0);
                while let Some((body, signed)) = bodies.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let at = Instant::now();
                    let request = client.post(&url).header("content-type", "application/json");
                    let request = request.header(signature::HEADER, signed).body(body.clone());
                    match request.send().await {
                        Ok(response) if response.status().is_success() => {
                            let _ = response.bytes().await;
                            latencies.push(at.elapsed());
                        }
                        _ => failed += 1,
                    }
                }
                (latencies, failed)
            })
        })
        .collect();
    let (mut latencies, mut failed) = (vec![], 0);
    for worker in workers {
        let (mut l, f) = worker.await.expect("a load worker");
        latencies.append(&mut l);
        failed += f;
    }
    let elapsed = started.elapsed();
    latencies.sort();
    Load { ok: latencies.len(), failed, elapsed, latencies, last_answer: Instant::now() }
}

pub async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a free port");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{address}")
}

/// The release binary, built if it is not there yet.
pub fn gateway_binary() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = std::process::Command::new(cargo)
        .args(["build", "--release", "--quiet", "--bin", "chatgate"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("cargo build");
    assert!(status.success(), "the release binary builds");
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/chatgate")
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a port")
}

pub fn peak_rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

/// The CPU time the process has used so far (user and system, all its threads), in seconds: what
/// a phase cost, whatever else the machine was doing meanwhile.
pub fn cpu_seconds(pid: u32) -> f64 {
    stat_fields(pid).map_or(0.0, |(_, fields)| ticks_seconds(&fields, &[11, 12]))
}

/// The CPU time every PostgreSQL server process on this machine has used so far, in seconds: its
/// backends, writers and autovacuum, and the children the postmaster has reaped (their time is
/// added to its own `cutime`/`cstime` when they end). What the database itself spent on a phase,
/// read beside the gateway's when the server runs on the same machine; 0 where none does.
pub fn postgres_cpu_seconds() -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0.0 };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(stat_fields)
        .filter(|(name, _)| name == "postgres")
        .map(|(_, fields)| ticks_seconds(&fields, &[11, 12, 13, 14]))
        .sum()
}

/// `/proc/PID/stat`: the command's name and the fields after it (the name is in parentheses and
/// may hold spaces).
fn stat_fields(pid: u32) -> Option<(String, Vec<String>)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(').map_or("", |(_, name)| name).to_owned();
    Some((name, rest.split_whitespace().map(str::to_owned).collect()))
}

/// The sum of the clock-tick fields `at` (utime, stime, cutime, cstime are fields 14 to 17 of the
/// whole line, 11 to 14 after the name), in seconds.
fn ticks_seconds(fields: &[String], at: &[usize]) -> f64 {
    let ticks: f64 = at.iter().filter_map(|&n| fields.get(n)?.parse::<f64>().ok()).sum();
    // SAFETY: sysconf only reads a constant of the system.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks / per_second.max(1.0)
}

/// The bytes the process has caused to be written to storage so far (`write_bytes` of
/// `/proc/PID/io`): what a phase cost the disk, whatever other processes wrote meanwhile.
pub fn written_bytes(pid: u32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
    io.lines().find_map(|line| line.strip_prefix("write_bytes:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

/// The child `command` starts is sent SIGTERM (it drains and stops) when the benchmark's process
/// ends however it ends: a benchmark stopped by a signal runs no `Drop`, and its gateway went on
/// running, holding its port and its database.
fn stopped_with_its_parent(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: `prctl` is async-signal-safe and only sets the child's own parent-death signal.
    unsafe {
        command.pre_exec(|| match libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) {
            -1 => Err(std::io::Error::last_os_error()),
            _ => Ok(()),
        });
    }
}

/// The gateway process, stopped however the run ends.
pub struct Gateway(pub std::process::Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn percentile(sorted: &[Duration], q: f64) -> Duration {
    let n = sorted.len().max(1) - 1;
    sorted.get((n as f64 * q) as usize).copied().unwrap_or_default()
}

/// A token for `scope` from the gateway's own CLI (`token mint`, the configuration's issuer).
pub fn mint_token(binary: &Path, config: &Path, scope: &str) -> anyhow::Result<String> {
    let out = std::process::Command::new(binary)
        .args(["--config", &config.display().to_string(), "token", "mint", "--tenant", "demo", "--scope", scope])
        .output()?;
    anyhow::ensure!(out.status.success(), "token mint: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8(out.stdout)?.trim().to_owned())
}

/// `lines` (JSON lines) through `POST /v1/directory/import`: the report, and how long it took.
pub async fn import_people(base: &str, token: &str, lines: String) -> anyhow::Result<(serde_json::Value, Duration)> {
    let started = Instant::now();
    let response = reqwest::Client::new()
        .post(format!("{base}/v1/directory/import"))
        .bearer_auth(token)
        .header("content-type", "application/x-ndjson")
        .body(lines)
        .send()
        .await?;
    anyhow::ensure!(response.status().is_success(), "import: {}", response.status());
    let report = response.json().await?;
    Ok((report, started.elapsed()))
}

/// `lines` imported twice (the second changes nothing), each timed and printed.
pub async fn import_twice(base: &str, token: &str, backend: &str, lines: String) -> anyhow::Result<()> {
    let count = lines.lines().count();
    for pass in ["import", "the same again"] {
        let (report, took) = import_people(base, token, lines.clone()).await?;
        let (created, updated, unchanged) = (&report["created"], &report["updated"], &report["unchanged"]);
        println!(
            "{backend}: {pass}: {count} people in {took:.2?} ({:.0}/s): created {created}, updated {updated}, \
             unchanged {unchanged}, refused {}",
            count as f64 / took.as_secs_f64(),
            report["refused"]
        );
    }
    Ok(())
}

/// `binary serve` with `config` on `port`, its log in `log`, once `/readyz` answers 200.
pub async fn start_gateway(binary: &Path, config: &Path, port: u16, log: &Path) -> anyhow::Result<(Gateway, String)> {
    let mut command = std::process::Command::new(binary);
    command
        .args(["--config", &config.display().to_string(), "serve"])
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(log)?);
    stopped_with_its_parent(&mut command);
    let child = command.spawn()?;
    let (gateway, base) = (Gateway(child), format!("http://127.0.0.1:{port}"));
    let client = reqwest::Client::new();
    let up = Instant::now();
    while !client.get(format!("{base}/readyz")).send().await.is_ok_and(|r| r.status().is_success()) {
        // Long enough for a start that seeds a large directory file on a busy database.
        if up.elapsed() > Duration::from_secs(120) {
            // The log's folder goes with the run: what it said is kept in the error.
            let said = std::fs::read_to_string(log).unwrap_or_default();
            let tail: Vec<&str> = said.lines().rev().take(20).collect();
            anyhow::bail!(
                "the gateway did not start; its log ends:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok((gateway, base))
}

/// A fresh PostgreSQL database beside the one `url` names; its URL and its name.
pub async fn fresh_postgres(url: &str) -> anyhow::Result<(String, String)> {
    use sqlx::Connection;
    let name = format!("chatgate_bench_{}", uuid::Uuid::now_v7().simple());
    let mut admin = sqlx::postgres::PgConnection::connect(url).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut admin).await?;
    // The database named in the URL is replaced; its parameters (`?statement-cache-capacity=...`) kept.
    let (path, query) = url.split_once('?').map_or((url, None), |(path, query)| (path, Some(query)));
    let base = path.rsplit_once('/').map_or(path, |(base, _)| base);
    let query = query.map(|query| format!("?{query}")).unwrap_or_default();
    Ok((format!("{base}/{name}{query}"), name))
}

/// Drops the database `name` on the server `url` names.
pub async fn drop_postgres(url: &str, name: &str) -> anyhow::Result<()> {
    use sqlx::Connection;
    let mut admin = sqlx::postgres::PgConnection::connect(url).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
        .execute(&mut admin)
        .await?;
    Ok(())
}
