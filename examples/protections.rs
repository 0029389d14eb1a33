//! What one caller can cost everyone else, measured by hand (never a timed test; issue 27):
//!
//!   cargo run --release --example protections                        # this build
//!   cargo run --release --example protections -- --gateway ../before/target/release/chatgate
//!
//! On SQLite, with a fresh database each time:
//! 1. event streams: `--streams` clients each hold `/v1/events` open (each its own token, so no
//!    per-client cap applies), then `--commands` read commands are sent one after another; the
//!    time until the last one executed and the gateway's CPU time meanwhile, against the same
//!    with no stream open;
//! 2. `/metrics`: `--deliveries` closed deliveries stored, then `--webhooks` signed webhooks
//!    flat out over 64 connections, alone and while `--scrapes` scrapes a second hit `/metrics`;
//!    webhooks/s and latency;
//! 3. one scrape's time (the median of five, a second and more apart, so that each reads the
//!    database), before and after `--recent` deliveries closed within the hour are stored (issue
//!    44.2: a scrape read the last hour's rows).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Parser;
use sqlx::Connection;

mod common;
use common::{Gateway, fire, free_port, gateway_binary, percentile, signed, start_gateway};

#[derive(Parser, Clone)]
struct Args {
    #[arg(long, default_value_t = 120)]
    streams: usize,
    #[arg(long, default_value_t = 150)]
    commands: usize,
    #[arg(long, default_value_t = 1_000_000)]
    deliveries: usize,
    #[arg(long, default_value_t = 5_000)]
    webhooks: usize,
    #[arg(long, default_value_t = 12)]
    scrapes: u64,
    #[arg(long, default_value_t = 1_000_000)]
    recent: usize,
    /// The gateway binary to measure (another build, for a before/after); built when absent.
    #[arg(long)]
    gateway: Option<PathBuf>,
}

const CUSTOMER: &str = "15550000001";

/// A gateway on a fresh SQLite file: the shipped registry and directory, the demo executor
/// built in, rate limits out of the way.
struct Running {
    gateway: Gateway,
    base: String,
    config: PathBuf,
    database: PathBuf,
    _dir: tempfile::TempDir,
}

async fn start(binary: &Path) -> anyhow::Result<Running> {
    let dir = tempfile::tempdir()?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (port, database) = (free_port(), dir.path().join("chatgate.db"));
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:{port}\"\n[storage]\ndatabase_url = \"sqlite://{db}\"\n\
         [registry]\ncommands = \"{commands}\"\ndirectory = \"{directory}\"\ntemplates = \"{templates}\"\n\
         [whatsapp.apps.default]\napp_secret = \"{secret}\"\nverify_token = \"bench\"\n\
         [auth.issuers.bench]\nissuer = \"bench\"\nalgorithms = [\"HS256\"]\nsecret = \"bench-api-secret\"\n\
         [rate_limits]\nactor = {{ per_minute = 10000000, burst = 1000000 }}\n\
         tenant = {{ per_minute = 10000000, burst = 1000000 }}\napi_client = {{ per_minute = 10000000, burst = 1000000 }}\n\
         [executors.orders]\nurl = \"builtin:echo\"\n[executors.gateway]\nurl = \"builtin:gateway\"\n",
        db = database.display(),
        commands = root.join("config/commands.toml").display(),
        directory = root.join("config/directory.toml").display(),
        templates = root.join("templates").display(),
        secret = common::SECRET,
    );
    let path = dir.path().join("chatgate.toml");
    std::fs::write(&path, config)?;
    let (gateway, base) = start_gateway(binary, &path, port, &dir.path().join("serve.log")).await?;
    Ok(Running { gateway, base, config: path, database, _dir: dir })
}

/// The gateway's CPU time so far (user and system), from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or_default().split_whitespace().collect();
    let ticks: f64 = [11, 12].iter().filter_map(|i| fields.get(*i)?.parse::<f64>().ok()).sum();
    ticks / 100.0
}

/// A token of `subject` for the demo tenant, minted by the binary under test.
fn token(binary: &Path, config: &Path, subject: &str) -> anyhow::Result<String> {
    let output = std::process::Command::new(binary)
        .args([
            "--config",
            &config.display().to_string(),
            "token",
            "mint",
            "--tenant",
            "demo",
            "--scope",
            "commands:read",
        ])
        .args(["--subject", subject])
        .output()?;
    anyhow::ensure!(output.status.success(), "token mint: {}", String::from_utf8_lossy(&output.stderr));
    Ok(String::from_utf8(output.stdout)?.trim().to_owned())
}

/// `--commands` read commands one after another, with `streams` streams open: (seconds until the
/// last executed, the gateway's CPU seconds meanwhile).
async fn commands_with_streams(args: &Args, binary: &Path, streams: usize) -> anyhow::Result<(f64, f64)> {
    let running = start(binary).await?;
    let client = reqwest::Client::new();
    let mut open = vec![];
    for n in 0..streams {
        let token = token(binary, &running.config, &format!("reader-{n}"))?;
        let response = client.get(format!("{}/v1/events", running.base)).bearer_auth(token).send().await?;
        anyhow::ensure!(response.status().is_success(), "stream {n}: {}", response.status());
        open.push(response);
    }
    let pid = running.gateway.0.id();
    let (cpu, started) = (cpu_seconds(pid), Instant::now());
    for n in 0..args.commands {
        let (body, signature) = signed(&format!("wamid.S{n}"), CUSTOMER, &format!("order status {n}"));
        let request = client.post(format!("{}/webhooks/whatsapp", running.base)).body(body);
        let answer = request.header("content-type", "application/json").header("x-hub-signature-256", signature);
        anyhow::ensure!(answer.send().await?.status().is_success(), "webhook {n}");
    }
    let url = format!("sqlite://{}", running.database.display());
    let mut db = sqlx::SqliteConnection::connect(&url).await?;
    loop {
        let executed: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM commands WHERE state = 'executed'").fetch_one(&mut db).await?;
        if executed as usize >= args.commands || started.elapsed() > Duration::from_secs(120) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok((started.elapsed().as_secs_f64(), cpu_seconds(pid) - cpu))
}

/// `n` deliveries of one command closed at `closed_at` (Unix milliseconds), written straight into
/// the database (`tag` makes their ids).
async fn store_deliveries(running: &Running, n: usize, closed_at: i64, tag: &str) -> anyhow::Result<()> {
    let (body, signature) = signed(&format!("wamid.{tag}"), CUSTOMER, "order status 1");
    let request = reqwest::Client::new().post(format!("{}/webhooks/whatsapp", running.base)).body(body);
    request.header("content-type", "application/json").header("x-hub-signature-256", signature).send().await?;
    let url = format!("sqlite://{}", running.database.display());
    let mut db = sqlx::SqliteConnection::connect(&url).await?;
    // The webhook is answered once stored; its command follows its admission.
    let mut command = None;
    for _ in 0..500 {
        command = sqlx::query_scalar("SELECT command_id FROM commands LIMIT 1").fetch_optional(&mut db).await?;
        if command.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let command: String = command.ok_or_else(|| anyhow::anyhow!("the seed webhook made no command"))?;
    sqlx::query(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1)
         INSERT INTO deliveries (id, tenant_id, command_id, target, state, version, outcome, created_at, updated_at)
         SELECT $3 || '-' || i, 'demo', $2, $3 || '-target-' || i, 'closed', 3, 'succeeded', $4, $4 FROM n",
    )
    .bind(n as i64)
    .bind(command)
    .bind(tag)
    .bind(closed_at)
    .execute(&mut db)
    .await?;
    Ok(())
}

/// One scrape of `/metrics`: the median of five, 1.1 s apart (the figures are read at most once
/// a second).
async fn scrape_time(running: &Running) -> anyhow::Result<Duration> {
    let client = reqwest::Client::new();
    let mut took = vec![];
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(1_100)).await;
        let started = Instant::now();
        client.get(format!("{}/metrics", running.base)).send().await?.bytes().await?;
        took.push(started.elapsed());
    }
    took.sort();
    Ok(took[2])
}

/// Webhooks flat out, with `scrapes` scrapes of `/metrics` a second meanwhile.
async fn webhooks_while_scraped(args: &Args, running: &Running, scrapes: u64, tag: &str) -> common::Load {
    let scraping = (scrapes > 0).then(|| {
        let url = format!("{}/metrics", running.base);
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut every = tokio::time::interval(Duration::from_millis(1000 / scrapes));
            loop {
                every.tick().await;
                let client = client.clone();
                let url = url.clone();
                tokio::spawn(async move { client.get(url).send().await.map(|r| r.bytes()) });
            }
        })
    });
    let bodies = (0..args.webhooks)
        .map(|n| signed(&format!("wamid.{tag}{n}"), CUSTOMER, &format!("order status {n}")))
        .collect();
    let load = fire(&format!("{}/webhooks/whatsapp", running.base), std::sync::Arc::new(bodies), 64).await;
    if let Some(scraping) = scraping {
        scraping.abort();
    }
    load
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let binary = args.gateway.clone().unwrap_or_else(gateway_binary);
    println!("gateway: {}", binary.display());
    let (quiet, quiet_cpu) = commands_with_streams(&args, &binary, 0).await?;
    let (busy, busy_cpu) = commands_with_streams(&args, &binary, args.streams).await?;
    println!(
        "streams: {} commands executed in {quiet:.2} s with no stream open (gateway CPU {quiet_cpu:.2} s); \
         in {busy:.2} s with {} streams open (gateway CPU {busy_cpu:.2} s)",
        args.commands, args.streams
    );
    let running = start(&binary).await?;
    let quiet = scrape_time(&running).await?;
    let seeded = Instant::now();
    store_deliveries(&running, args.recent, time::OffsetDateTime::now_utc().unix_timestamp() * 1000, "recent").await?;
    println!("metrics: {} deliveries closed within the hour stored in {:.1?}", args.recent, seeded.elapsed());
    let busy = scrape_time(&running).await?;
    println!("metrics: one scrape took {quiet:.1?} on a fresh database, {busy:.1?} with them (medians of five)");
    let seeded = Instant::now();
    store_deliveries(&running, args.deliveries, 0, "seed").await?;
    println!("metrics: {} deliveries stored in {:.1?}", args.deliveries, seeded.elapsed());
    for (scrapes, tag) in [(0, "A"), (args.scrapes, "B")] {
        let load = webhooks_while_scraped(&args, &running, scrapes, tag).await;
        println!(
            "metrics: {scrapes} scrapes/s: {:.0} webhooks/s, p50 {:.1?} p99 {:.1?}, {} failed",
            load.rate(),
            percentile(&load.latencies, 0.5),
            percentile(&load.latencies, 0.99),
            load.failed
        );
    }
    Ok(())
}
