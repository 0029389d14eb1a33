//! The soak run of issue #50 (run by hand, never as a timed test): bounded growth under a short
//! retention.
//!
//!   cargo run --release --example soak -- --commands 1000000 --rate 400 --retention 6m
//!   cargo run --release --example soak -- --commands 150000 --rate 400 --retention 400d   # baseline
//!   cargo run --release --example soak -- --commands 300000 --rate 125 --retention 6m --beside 400d
//!
//! The release gateway on a fresh SQLite database (`--database-url postgres://…` for a fresh
//! PostgreSQL database beside the one named, dropped after), with a registry whose windows and
//! TTLs are a minute (so that a retention of minutes is allowed: `retention.*` must outlast them),
//! the clean-up every 10 s, `retention.texts` and `retention.records` both `--retention`. Signed
//! WhatsApp webhooks (`order status N` from `--people` people) are sent open loop at `--rate`, each
//! at its scheduled time; each is answered by a Graph API stand-in that notes when the reply to
//! it came. Every `--every-secs` it prints one row: commands sent, the database's size on disk,
//! the webhooks' answer time and the replies' time from each webhook's schedule (p50 / p99 of
//! that interval), replies still owed, the gateway's CPU and disk writes per command over the
//! interval, and what the purge deleted so far (`chatgate_retention_records_deleted_total`). The
//! size must level off once the purge keeps pace; compared with a baseline run whose retention
//! never bites, the latencies must not be more than 10% worse.
//!
//! Two runs an hour apart on this machine differed by more than that before any purge (the disk's
//! speed moves), so `--beside RETENTION` runs the baseline at the same moment: a second gateway,
//! its own database on the same disk, with that retention, the same `--commands` at the same
//! `--rate`, the webhooks of the two alternating (and which has a pair's first). What the purge
//! costs the machine (CPU, writes) is then shared by both sides' latencies and shows in the
//! purging side's own CPU and writes per command; what it costs its own pipeline (locks, a busy
//! database) shows in its latencies. At the end it prints the purging side's webhook answer and
//! reply p50 and p99 over the baseline's, before its first purge and after (the median of the
//! intervals' ratios, and the ratio of the times pooled), and how much the purge slowed them (the
//! goal: at most 10%). `--gateway PATH` runs another build on both sides (a before/after).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use chatgate::channels::whatsapp::signature;
use clap::Parser;
use tokio::sync::Mutex;

mod common;
use common::beside::{Minute, summary};
use common::{
    Gateway, cpu_seconds, free_port, gateway_binary, percentile, serve, signed, start_gateway, written_bytes,
};

#[derive(Parser)]
struct Args {
    /// Commands sent to each gateway.
    #[arg(long, default_value_t = 1_000_000)]
    commands: usize,
    /// Webhooks a second to each gateway, open loop: below what the pipeline sustains end to end.
    #[arg(long, default_value_t = 400.0)]
    rate: f64,
    /// `retention.texts` and `retention.records`: at least the registry's windows (a minute here)
    /// and its default confirmation TTL (5 minutes).
    #[arg(long, default_value = "6m")]
    retention: String,
    /// A second gateway beside the first, at the same moment, with this retention (the baseline).
    #[arg(long)]
    beside: Option<String>,
    /// `retention.share` (the gateway's default when absent): the most of the time the purge's
    /// transactions take, to try another pace without another build.
    #[arg(long)]
    purge_share: Option<f64>,
    /// `retention.transaction_ms` (the gateway's default when absent).
    #[arg(long)]
    purge_ms: Option<u64>,
    #[arg(long, default_value_t = 500)]
    people: usize,
    #[arg(long, default_value_t = 30)]
    every_secs: u64,
    /// PostgreSQL instead of SQLite: a fresh database beside the one this URL names.
    #[arg(long)]
    database_url: Option<String>,
    /// The gateway binary to run on both sides (another build, for a before/after); built when
    /// absent.
    #[arg(long)]
    gateway: Option<PathBuf>,
}

/// Webhooks waiting for their reply (by message id, with their scheduled time), and what one
/// interval saw: answer times and reply times.
#[derive(Default)]
struct Seen {
    owed: HashMap<String, Instant>,
    answers: Vec<Duration>,
    replies: Vec<Duration>,
}

type Shared = Arc<Mutex<Seen>>;

async fn graph_send(
    axum::extract::State(seen): axum::extract::State<Shared>,
    axum::Json(body): axum::Json<serde_json::Value>,
) -> axum::Json<serde_json::Value> {
    if let Some(quoted) = body["context"]["message_id"].as_str() {
        let mut seen = seen.lock().await;
        if let Some(due) = seen.owed.remove(quoted) {
            seen.replies.push(due.elapsed());
        }
    }
    let id = format!("wamid.OUT{}", uuid::Uuid::now_v7().simple());
    axum::Json(serde_json::json!({"messaging_product": "whatsapp", "messages": [{"id": id}]}))
}

fn person(n: usize) -> String {
    format!("1666{n:07}")
}

/// The shipped registry with every window and TTL a minute.
fn short_windows() -> String {
    let shipped = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("config/commands.toml"))
        .expect("the shipped registry");
    shipped
        .lines()
        .map(|line| {
            let key = line.split('=').next().unwrap_or_default().trim();
            if ["ttl", "confirmation_ttl", "dedupe_window"].contains(&key) {
                format!("{key} = \"1m\"")
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn configure(dir: &Path, (port, database_url): (u16, &str), graph: &str, (args, retention): (&Args, &str)) -> PathBuf {
    let mut directory = common::tenant_head("");
    for n in 0..args.people {
        directory.push_str(&format!("[tenants.demo.actors.{}]\nroles = [\"customer\"]\n", person(n)));
    }
    std::fs::write(dir.join("directory.toml"), directory).expect("directory");
    std::fs::write(dir.join("commands.toml"), short_windows()).expect("registry");
    let mut extra = format!(
        "[idempotency]\ndefault_window_secs = 60\ncleanup_interval_secs = 10\n\
         [retention]\ntexts = \"{0}\"\nrecords = \"{0}\"\n",
        retention
    );
    if let Some(share) = args.purge_share {
        extra.push_str(&format!("share = {share}\n"));
    }
    if let Some(ms) = args.purge_ms {
        extra.push_str(&format!("transaction_ms = {ms}\n"));
    }
    let config =
        common::write_config(dir, "chatgate.toml", (port, database_url), &dir.join("directory.toml"), graph, &extra);
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/commands.toml").display().to_string();
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, text.replace(&shipped, &dir.join("commands.toml").display().to_string())).expect("config");
    config
}

/// The database's size on disk, in MB: SQLite's two files and their WALs, or PostgreSQL's.
async fn size_mb(dir: &Path, postgres: Option<&str>) -> (f64, f64) {
    if let Some(url) = postgres {
        use sqlx::Connection;
        let Ok(mut conn) = sqlx::PgConnection::connect(url).await else { return (f64::NAN, 0.0) };
        let bytes: i64 = sqlx::query_scalar("SELECT pg_database_size(current_database())")
            .fetch_one(&mut conn)
            .await
            .unwrap_or_default();
        return (bytes as f64 / 1e6, 0.0);
    }
    let files = std::fs::read_dir(dir).into_iter().flatten().flatten();
    let (mut data, mut wal) = (0, 0);
    for file in files.filter(|file| file.file_name().to_string_lossy().starts_with("soak")) {
        let bytes = file.metadata().map_or(0, |meta| meta.len());
        match file.file_name().to_string_lossy().ends_with(".db") {
            true => data += bytes,
            false => wal += bytes,
        }
    }
    (data as f64 / 1e6, wal as f64 / 1e6)
}

/// The commands the purge deleted so far, from `/metrics`.
async fn purged(base: &str) -> u64 {
    let text = reqwest::get(format!("{base}/metrics")).await.ok();
    let text = match text {
        Some(response) => response.text().await.unwrap_or_default(),
        None => String::new(),
    };
    text.lines()
        .find(|line| line.starts_with("chatgate_retention_records_deleted_total{record=\"command\"}"))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|n| n.parse::<f64>().ok())
        .unwrap_or(0.0) as u64
}

/// One gateway under the soak: its folder and database, its process, its Graph stand-in's
/// record, and where its last row left off (commands sent, CPU seconds, bytes written).
struct Side {
    retention: String,
    dir: PathBuf,
    fresh: Option<(String, String)>,
    gateway: Gateway,
    base: String,
    seen: Shared,
    at_row: (usize, f64, u64),
}

impl Side {
    async fn start(args: &Args, retention: &str, dir: PathBuf) -> anyhow::Result<Self> {
        std::fs::create_dir_all(&dir)?;
        let seen: Shared = Arc::default();
        let graph =
            serve(Router::new().route("/{version}/{phone}/messages", post(graph_send)).with_state(seen.clone())).await;
        let fresh = match &args.database_url {
            Some(url) => Some(common::fresh_postgres(url).await?),
            None => None,
        };
        let database_url = match &fresh {
            Some((url, _)) => url.clone(),
            None => format!("sqlite://{}/soak.db?mode=rwc", dir.display()),
        };
        let port = free_port();
        let config = configure(&dir, (port, &database_url), &graph, (args, retention));
        let binary = args.gateway.clone().unwrap_or_else(gateway_binary);
        let (gateway, base) = start_gateway(&binary, &config, port, &dir.join("serve.log")).await?;
        let pid = gateway.0.id();
        let at_row = (0, cpu_seconds(pid), written_bytes(pid));
        Ok(Self { retention: retention.to_owned(), dir, fresh, gateway, base, seen, at_row })
    }

    /// The interval's row, printed and returned; the next interval starts at `sent`.
    async fn row(&mut self, elapsed: Duration, sent: usize) -> Minute {
        let pid = self.gateway.0.id();
        let (cpu, written) = (cpu_seconds(pid), written_bytes(pid));
        let commands = (sent - self.at_row.0).max(1) as f64;
        let per_command = ((cpu - self.at_row.1) / commands, (written - self.at_row.2) as f64 / commands);
        let size = size_mb(&self.dir, self.fresh.as_ref().map(|(url, _)| url.as_str())).await;
        let head = (elapsed, sent, self.retention.as_str());
        let minute = row(&self.seen, head, size, per_command, purged(&self.base).await).await;
        self.at_row = (sent, cpu, written);
        minute
    }

    /// Sends the webhook `n` (scheduled for `due`), noting when it was answered.
    async fn send(&self, client: &reqwest::Client, (run, n): (&str, usize), people: usize, due: Instant) {
        let id = format!("wamid.S{run}{n}");
        let (body, signature) = signed(&id, &person(n % people), &format!("order status {n}"));
        let request = client
            .post(format!("{}/webhooks/whatsapp", self.base))
            .header("content-type", "application/json")
            .header(signature::HEADER, signature);
        let seen = self.seen.clone();
        seen.lock().await.owed.insert(id.clone(), due);
        tokio::spawn(async move {
            if request.body(body).send().await.is_ok_and(|r| r.status().is_success()) {
                seen.lock().await.answers.push(due.elapsed());
            } else {
                // Not acknowledged (a 503 while the disk stalled, say): a provider would send it
                // again, this run does not, and no reply is owed for it.
                seen.lock().await.owed.remove(&id);
            }
        });
    }

    async fn owed(&self) -> usize {
        self.seen.lock().await.owed.len()
    }
}

async fn owed(sides: &[Side]) -> usize {
    futures_util::future::join_all(sides.iter().map(Side::owed)).await.into_iter().sum()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let mut sides = vec![Side::start(&args, &args.retention, dir.path().join("soak")).await?];
    if let Some(beside) = &args.beside {
        sides.push(Side::start(&args, beside, dir.path().join("beside")).await?);
    }
    println!(
        "soak: {} commands at {}/s to each of {} gateway(s), {} people, {}",
        args.commands,
        args.rate,
        sides.len(),
        args.people,
        if args.database_url.is_some() { "PostgreSQL" } else { "SQLite" }
    );
    println!(
        "| minute | retention | commands sent | database MB (WAL) | webhook p50 / p99 ms | reply p50 / p99 ms | \
         replies owed | CPU µs/command | written KB/command | commands purged |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let client = reqwest::Client::builder().pool_max_idle_per_host(64).build()?;
    let run = uuid::Uuid::now_v7().simple().to_string();
    let start = tokio::time::Instant::now();
    let (every, total_rate) = (Duration::from_secs(args.every_secs), args.rate * sides.len() as f64);
    let mut next_row = every;
    let mut pairs = vec![];
    for n in 0..args.commands * sides.len() {
        let due = start + Duration::from_secs_f64(n as f64 / total_rate);
        tokio::time::sleep_until(due).await;
        if due.duration_since(start) >= next_row {
            let sent = n / sides.len();
            let mut minutes = vec![];
            for side in &mut sides {
                minutes.push(side.row(start.elapsed(), sent).await);
            }
            if let Ok([purging, baseline]) = <[_; 2]>::try_from(minutes) {
                pairs.push((purging, baseline));
            }
            next_row += every;
        }
        // Each gateway sees the same webhooks, the same people in the same order; which of them has
        // a pair's webhook first alternates (the second's meets the first's work more often).
        let side = &sides[(n + n / sides.len()) % sides.len()];
        side.send(&client, (&run, n / sides.len()), args.people, due.into_std()).await;
    }
    let drained = Instant::now();
    while drained.elapsed() < Duration::from_secs(300) && owed(&sides).await > 0 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for side in &mut sides {
        side.row(start.elapsed(), args.commands).await;
    }
    if args.beside.is_some() {
        // The drain's row is left out: it measures the backlog's end, not a minute's load.
        summary(&pairs);
    }
    for side in sides {
        drop(side.gateway);
        if let (Some(admin), Some((_, name))) = (&args.database_url, &side.fresh) {
            common::drop_postgres(admin, name).await?;
        }
    }
    Ok(())
}

/// One row of the table: the interval's percentiles, then a fresh interval.
async fn row(
    seen: &Shared,
    (elapsed, sent, retention): (Duration, usize, &str),
    (size, wal): (f64, f64),
    (cpu, written): (f64, f64),
    purged: u64,
) -> Minute {
    let mut seen = seen.lock().await;
    let (mut answers, mut replies) = (std::mem::take(&mut seen.answers), std::mem::take(&mut seen.replies));
    answers.sort();
    replies.sort();
    let ms = |sorted: &[Duration], q: f64| percentile(sorted, q).as_secs_f64() * 1e3;
    println!(
        "| {:.1} | {retention} | {sent} | {size:.1} ({wal:.1}) | {:.1} / {:.1} | {:.1} / {:.1} | {} | {:.0} | {:.1} | \
         {purged} |",
        elapsed.as_secs_f64() / 60.0,
        ms(&answers, 0.5),
        ms(&answers, 0.99),
        ms(&replies, 0.5),
        ms(&replies, 0.99),
        seen.owed.len(),
        cpu * 1e6,
        written / 1e3,
    );
    Minute { answers, replies, purged }
}
