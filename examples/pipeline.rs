//! The whole pipeline's benchmark, in one command (run by hand, never as a timed test):
//!
//!   cargo run --release --example pipeline                      # SQLite; PostgreSQL too when
//!   CHATGATE_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/postgres cargo run --release --example pipeline
//!
//! In one run, on the same machine and with the same load generator:
//! 1. the anchors: a bare axum handler that checks the same HMAC and parses the same JSON, and the
//!    same plus one durable SQLite row per webhook by group commit (`common::anchors`);
//! 2. chatgate (the release binary, a fresh database, rate limits lifted so that every webhook is a
//!    real admission): `--webhooks` signed single-message webhooks, read commands (`order status N`)
//!    from `--people` people, sent flat out over `--connections`: the ingest rate and latency; and
//!    end to end, each command admitted, authorized, dispatched (builtin echo), executed and its
//!    reply accepted by a Graph API stand-in: commands/s and the drain time (last reply after the
//!    last webhook's 200); the gateway's peak RSS; then webhooks paced at 25%, 50% and 80% of that
//!    end-to-end rate for `--paced-secs` each (an open loop, latency from each webhook's scheduled
//!    time): the reply's latency at loads the pipeline sustains, where people feel it, and the
//!    gateway's CPU per command at each;
//! 3. the realistic mix on a fresh database (`common::mix`): `--mix-refunds` refunds from people of
//!    a directory of `--mix-directory`, prompted and confirmed (two messages each), on WhatsApp,
//!    Messenger and Telegram, a tenth of the deliveries sent twice: refunds/s end to end;
//! 4. the same on PostgreSQL when `CHATGATE_TEST_POSTGRES_URL` is set (a fresh database, dropped after),
//!    with the PostgreSQL server's own CPU beside the gateway's (its processes' `/proc` times, when
//!    it runs on this machine).
//!
//! It prints each figure, chatgate's ingest as a fraction of both anchors, and issues #31's and
//! #49's goals, each met or not.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use chatgate::channels::whatsapp::signature;
use clap::Parser;

mod common;
use common::goals::{Anchors, Goals, Paced};
use common::mix::Mix;
use common::wire::Asked;
use common::{fire, free_port, gateway_binary, peak_rss_mb, percentile, serve, signed, start_gateway};
use tokio::sync::Mutex;

#[derive(Parser, Clone)]
struct Args {
    #[arg(long, default_value_t = 5_000)]
    webhooks: usize,
    #[arg(long, default_value_t = 500)]
    people: usize,
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// How long to wait for the last reply after the last webhook.
    #[arg(long, default_value_t = 300)]
    drain_timeout_secs: u64,
    /// Webhooks sent one at a time, each after the previous one's reply, for the latency from a
    /// webhook to its reply at light load.
    #[arg(long, default_value_t = 200)]
    latency_samples: usize,
    /// People in the directory, imported through the API before the run (the `--people` who
    /// write among them); 0: the directory file lists the `--people` themselves.
    #[arg(long, default_value_t = 0)]
    directory: usize,
    /// The gateway binary to measure (another build, for a before/after); built when absent.
    #[arg(long)]
    gateway: Option<PathBuf>,
    /// One backend only (`sqlite` or `postgres`), for profiling it.
    #[arg(long)]
    only: Option<String>,
    /// Times each anchor is measured, its median rate kept: its flood lasts a tenth of a second,
    /// and one such measurement alone varied between 34,000 and 64,000 webhooks/s from run to run.
    #[arg(long, default_value_t = 5)]
    anchor_runs: usize,
    /// How long each paced phase sends, at 25%, 50% and 80% of the end-to-end rate just measured.
    #[arg(long, default_value_t = 20)]
    paced_secs: u64,
    /// PostgreSQL through a relay that counts the statements the gateway sends (`common::wire`):
    /// statements per command, at the cost of a copy of every byte (the rates are then not
    /// comparable with a run without it). Trust authentication only: the relay's URL has no password.
    #[arg(long)]
    count_statements: bool,
    /// Refunds in the realistic mix, after the flood on a fresh database (`common::mix`): each
    /// prompted and confirmed, on three channels, a tenth of the deliveries sent twice; 0: none.
    #[arg(long, default_value_t = 3_000)]
    mix_refunds: usize,
    /// The people the mix's directory lists (its refunds come from as many of them).
    #[arg(long, default_value_t = 10_000)]
    mix_directory: usize,
}

/// The paced phases, as fractions of the end-to-end rate: where people feel the latency.
const PACED: [f64; 3] = [0.25, 0.5, 0.8];

/// Signed single-message deliveries: `order status N` from person `N % people`.
fn bodies(args: &Args, run: &str) -> Arc<Vec<(Vec<u8>, String)>> {
    let bodies = (0..args.webhooks)
        .map(|n| {
            let from = person(n % args.people);
            signed(&format!("wamid.B{run}{n}"), &from, &format!("order status {n}"))
        })
        .collect();
    Arc::new(bodies)
}

fn person(n: usize) -> String {
    format!("1666{n:07}")
}

/// The Graph API stand-in: accepts every message and notes when it came, and when the reply to
/// each webhook's message came (the `context.message_id` it quotes).
#[derive(Clone, Default)]
struct Graph {
    replies: Arc<Mutex<Vec<Instant>>>,
    answered: Arc<Mutex<std::collections::HashMap<String, Instant>>>,
}

async fn graph_send(
    axum::extract::State(graph): axum::extract::State<Graph>,
    axum::Json(body): axum::Json<serde_json::Value>,
) -> axum::Json<serde_json::Value> {
    if let Some(quoted) = body["context"]["message_id"].as_str() {
        graph.answered.lock().await.entry(quoted.to_owned()).or_insert_with(Instant::now);
    }
    let mut replies = graph.replies.lock().await;
    replies.push(Instant::now());
    // Unique for the whole run, as Graph's ids are (the store keeps them unique).
    let id = format!("wamid.OUT{}", uuid::Uuid::now_v7().simple());
    axum::Json(serde_json::json!({"messaging_product": "whatsapp", "messages": [{"id": id}]}))
}

/// A gateway configuration: the shipped one with this run's port, database, Graph stand-in,
/// a directory of `people` customers (and the roles the shipped approval policies name), and rate
/// limits that let every webhook through.
fn configure(dir: &Path, port: u16, database_url: &str, graph: &str, people: usize) -> PathBuf {
    let mut directory = common::tenant_head("");
    for n in 0..people {
        directory.push_str(&format!("[tenants.demo.actors.{}]\nroles = [\"customer\"]\n", person(n)));
    }
    std::fs::write(dir.join("directory.toml"), directory).expect("directory");
    let issuer = "[auth.issuers.bench]\nissuer = \"bench\"\nalgorithms = [\"HS256\"]\n\
                  secret = \"bench-api-token-secret-0123456789\"\n";
    common::write_config(dir, "chatgate.toml", (port, database_url), &dir.join("directory.toml"), graph, issuer)
}

/// The realistic mix on `database_url` (fresh): its end-to-end figure and what it cost.
async fn mix(args: &Args, backend: &str, database_url: &str) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (stand_in, stand) = common::mix::stand_ins().await;
    let port = free_port();
    let config = common::mix::configure(dir.path(), port, database_url, &stand_in, args.mix_directory);
    let binary = args.gateway.clone().unwrap_or_else(gateway_binary);
    let starting = Instant::now();
    let (gateway, base) = start_gateway(&binary, &config, port, &dir.path().join("mix.log")).await?;
    println!(
        "{backend}: the mix's gateway ready {:.2?} after its start (a fresh database, its directory file of {} people \
         seeded)",
        starting.elapsed(),
        args.mix_directory
    );
    let (pid, drain_timeout) = (gateway.0.id(), Duration::from_secs(args.drain_timeout_secs));
    let cpu_before = common::cpu_seconds(pid);
    let database_before = database_cpu_seconds(backend);
    let mix =
        Mix { refunds: args.mix_refunds, directory: args.mix_directory, connections: args.connections, drain_timeout };
    let run = stand.run(&base, mix).await;
    let cpu = common::cpu_seconds(pid) - cpu_before;
    let database_cpu = database_cpu_since(backend, database_before);
    let (seconds, peak_rss) = (run.elapsed.as_secs_f64().max(1e-9), peak_rss_mb(pid));
    println!(
        "{backend}: the mix ({} refunds from as many of {} people on WhatsApp, Messenger and Telegram, each prompted \
         and confirmed, a tenth of the deliveries sent twice: {} webhooks): {} settled ({} told \"Done\") in {:.2?}, \
         {:.0} refunds/s \
         ({:.0} webhooks/s) end to end; drained {:.2?} after the last refund; the gateway's CPU {:.0} µs per refund; \
         peak RSS {:.1} MB",
        args.mix_refunds,
        args.mix_directory,
        run.webhooks,
        run.settled,
        run.done,
        run.elapsed,
        run.settled as f64 / seconds,
        run.webhooks as f64 / seconds,
        run.drain,
        cpu * 1e6 / run.settled.max(1) as f64,
        peak_rss
    );
    if let Some(database_cpu) = database_cpu {
        println!(
            "{backend}: the mix's PostgreSQL's own CPU meanwhile: {database_cpu:.2} s, {:.0} µs per refund",
            database_cpu * 1e6 / run.settled.max(1) as f64
        );
    }
    println!("{backend}: the mix as one person saw it: {:?}", run.example);
    common::goals::print_mix(backend, peak_rss);
    Ok(())
}

/// PostgreSQL's CPU so far when `backend` is PostgreSQL (SQLite's is the gateway's own: it runs
/// inside the gateway's process).
fn database_cpu_seconds(backend: &str) -> Option<f64> {
    (backend == "postgres").then(common::postgres_cpu_seconds)
}

/// PostgreSQL's CPU since `before` (read by [`database_cpu_seconds`]), when `backend` is PostgreSQL.
fn database_cpu_since(backend: &str, before: Option<f64>) -> Option<f64> {
    database_cpu_seconds(backend).zip(before).map(|(after, before)| after - before)
}

/// An anchor's flood `args.anchor_runs` times (each with webhooks of its own): the run of median
/// rate, and every run's rate from the slowest to the fastest.
async fn median_load(args: &Args, url: &str, anchor: &str) -> (common::Load, String) {
    let mut loads = vec![];
    for run in 0..args.anchor_runs.max(1) {
        loads.push(fire(url, bodies(args, &format!("{anchor}{run}")), args.connections).await);
    }
    loads.sort_by(|a, b| a.rate().total_cmp(&b.rate()));
    let spread = loads.iter().map(|load| format!("{:.0}", load.rate())).collect::<Vec<_>>().join(", ");
    let median = loads.swap_remove(loads.len() / 2);
    (median, spread)
}

/// One backend's run: ingest and end to end.
async fn pipeline(
    args: &Args,
    backend: &str,
    database: (&str, Option<&Asked>),
    anchors: Anchors,
) -> anyhow::Result<()> {
    let (database_url, asked) = database;
    let dir = tempfile::tempdir()?;
    let graph = Graph::default();
    let graph_url =
        serve(Router::new().route("/{version}/{phone}/messages", post(graph_send)).with_state(graph.clone())).await;
    let port = free_port();
    let file_people = if args.directory > 0 { 0 } else { args.people };
    let config = configure(dir.path(), port, database_url, &graph_url, file_people);
    let binary = args.gateway.clone().unwrap_or_else(gateway_binary);
    let (gateway, base) = start_gateway(&binary, &config, port, &dir.path().join("serve.log")).await?;
    if args.directory > 0 {
        import_directory(args, backend, &base, &common::mint_token(&binary, &config, "directory:write")?).await?;
    }
    let pid = gateway.0.id();
    let client = reqwest::Client::new();
    let run = uuid::Uuid::now_v7().simple().to_string();
    let latency = light_load_latency(args, &base, &graph).await;
    graph.replies.lock().await.clear();
    let cpu_before = common::cpu_seconds(pid);
    let database_before = database_cpu_seconds(backend);
    let asked_before = asked.map(Asked::read);
    let first = Instant::now();
    let load = fire(&format!("{base}/webhooks/whatsapp"), bodies(args, &run), args.connections).await;
    let flood_cpu = common::cpu_seconds(pid) - cpu_before;
    let deadline = load.last_answer + Duration::from_secs(args.drain_timeout_secs);
    let expected = load.ok;
    loop {
        let done = graph.replies.lock().await.len();
        if done >= expected || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let replies = graph.replies.lock().await.clone();
    let cpu = common::cpu_seconds(pid) - cpu_before;
    let database_cpu = database_cpu_since(backend, database_before);
    let asked = asked.map(Asked::read).zip(asked_before);
    let last_reply = replies.iter().max().copied().unwrap_or(load.last_answer);
    let end_to_end = last_reply.duration_since(first);
    let drain = last_reply.saturating_duration_since(load.last_answer);
    println!(
        "{backend}: webhook to reply at light load ({} one at a time): p50 {:.1?} p99 {:.1?}",
        latency.len(),
        percentile(&latency, 0.5),
        percentile(&latency, 0.99)
    );
    println!(
        "{backend}: ingest {:.0} webhooks/s ({:.3}x the bare handler, {:.3}x the durable inbox), p50 {:.1?} p99 {:.1?}, \
         {} failed",
        load.rate(),
        load.rate() / anchors.bare,
        load.rate() / anchors.durable,
        load.p(0.5),
        load.p(0.99),
        load.failed
    );
    println!(
        "{backend}: end to end {} of {} commands replied in {:.2?}: {:.0} commands/s; drained {:.2?} after the last webhook; peak RSS {:.1} MB",
        replies.len(),
        expected,
        end_to_end,
        replies.len() as f64 / end_to_end.as_secs_f64(),
        drain,
        peak_rss_mb(pid),
    );
    println!(
        "{backend}: the gateway's CPU from the first webhook to the last reply: {cpu:.2} s, {:.0} µs per command; \
         while the webhooks came: {flood_cpu:.2} s, {:.0} µs per webhook (admission's meanwhile included)",
        cpu * 1e6 / replies.len().max(1) as f64,
        flood_cpu * 1e6 / load.ok.max(1) as f64
    );
    if let Some(database_cpu) = database_cpu {
        println!(
            "{backend}: PostgreSQL's own CPU meanwhile (every server process on this machine): {database_cpu:.2} s, \
             {:.0} µs per command",
            database_cpu * 1e6 / replies.len().max(1) as f64
        );
    }
    if let Some((after, before)) = asked {
        let asked = after - before;
        let per_command = |n: u64| n as f64 / replies.len().max(1) as f64;
        println!(
            "{backend}: asked of PostgreSQL from the first webhook to the last reply: {} statements executed, {:.2} per \
             command; {} parsed, {:.2} per command; {} simple queries (BEGIN, COMMIT, ...), {:.2} per command; {} round \
             trips that asked nothing (a connection's test), {:.2} per command",
            asked.executes,
            per_command(asked.executes),
            asked.parses,
            per_command(asked.parses),
            asked.queries,
            per_command(asked.queries),
            asked.pings,
            per_command(asked.pings)
        );
    }
    let commands_per_sec = replies.len() as f64 / end_to_end.as_secs_f64();
    let mut paced = vec![];
    for fraction in PACED {
        let cpu_before = common::cpu_seconds(pid);
        let phase = paced_load(args, (&base, &graph), commands_per_sec * fraction, &format!("{run}{fraction}")).await;
        // Small batches at a steady rate: each transaction carries a command or two, so a
        // command's CPU here is not the flood's (docs/BENCHMARKS.md, eighth session).
        let cpu_per_command = (common::cpu_seconds(pid) - cpu_before) / phase.to_reply.len().max(1) as f64;
        println!(
            "{backend}: at {:.0}% of end to end ({:.0} webhooks/s for {} s, {} sent, open loop): ingest p50 {:.1?} \
             p99 {:.1?}; webhook to reply p50 {:.1?} p99 {:.1?} ({} replied); the gateway's CPU {:.0} µs per command",
            fraction * 100.0,
            phase.rate,
            args.paced_secs,
            phase.ingest.len(),
            percentile(&phase.ingest, 0.5),
            percentile(&phase.ingest, 0.99),
            percentile(&phase.to_reply, 0.5),
            percentile(&phase.to_reply, 0.99),
            phase.to_reply.len(),
            cpu_per_command * 1e6
        );
        paced.push(Paced {
            fraction,
            ingest_p99: percentile(&phase.ingest, 0.99),
            reply_p99: percentile(&phase.to_reply, 0.99),
        });
    }
    let goals = Goals {
        anchors,
        end_to_end: commands_per_sec,
        drain,
        ingest: load.rate(),
        light_reply_p99: percentile(&latency, 0.99),
        paced,
        cpu_per_command: Duration::from_secs_f64(cpu / replies.len().max(1) as f64),
        database_cpu_per_command: database_cpu
            .map(|spent| Duration::from_secs_f64(spent / replies.len().max(1) as f64)),
        peak_rss_mb: peak_rss_mb(pid),
    };
    print_group_commit(backend, &client.get(format!("{base}/metrics")).send().await?.text().await?);
    goals.print(backend);
    drop(gateway);
    Ok(())
}

/// `--directory` people imported through the API, twice (the second changes nothing), timed.
async fn import_directory(args: &Args, backend: &str, base: &str, token: &str) -> anyhow::Result<()> {
    anyhow::ensure!(args.people <= args.directory, "--people are among the --directory people");
    let line = |n: usize| {
        let person = serde_json::json!({"id": format!("c-{n}"), "name": format!("Person {n}"), "roles": ["customer"],
            "addresses": {"whatsapp": person(n)}});
        format!("{person}\n")
    };
    common::import_twice(base, token, backend, (0..args.directory).map(line).collect()).await
}

/// How many admissions and worker steps each group commit carried (the gateway's counters).
fn print_group_commit(backend: &str, metrics: &str) {
    let counter = |name: &str| -> f64 {
        metrics.lines().filter(|l| l.starts_with(name)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
    };
    let per = |items: f64, batches: f64| if batches > 0.0 { items / batches } else { 0.0 };
    let (admitted, admissions) =
        (counter("chatgate_admissions_batched_total"), counter("chatgate_admission_batches_total"));
    let (steps, step_batches) = (counter("chatgate_steps_batched_total"), counter("chatgate_step_batches_total"));
    let (inbox_seconds, inbox_commits) =
        (counter("chatgate_inbox_commit_seconds_sum"), counter("chatgate_inbox_commit_seconds_count"));
    let inbox_deliveries = counter("chatgate_inbox_commit_deliveries_sum");
    println!(
        "{backend}: group commit: {admitted:.0} admissions in {admissions:.0} batches ({:.1} each), \
         {steps:.0} worker steps in {step_batches:.0} batches ({:.1} each)",
        per(admitted, admissions),
        per(steps, step_batches)
    );
    println!(
        "{backend}: the inbox: {inbox_commits:.0} commits of {:.1} deliveries, {:.1} ms each on average",
        per(inbox_deliveries, inbox_commits),
        per(inbox_seconds * 1e3, inbox_commits)
    );
}

/// What a paced phase saw: each webhook's answer time and each reply's, from the webhook's
/// scheduled time (an open loop: a webhook sent late because the sender fell behind counts its
/// lateness, as the person would).
struct PacedLoad {
    rate: f64,
    ingest: Vec<Duration>,
    to_reply: Vec<Duration>,
}

/// Webhooks at `rate` for `--paced-secs`, each on its own schedule whatever the ones before are
/// doing, then the time from each one's schedule to its answer and to its reply.
async fn paced_load(args: &Args, (base, graph): (&str, &Graph), rate: f64, run: &str) -> PacedLoad {
    let client = reqwest::Client::builder().pool_max_idle_per_host(args.connections).build().expect("client");
    let url = format!("{base}/webhooks/whatsapp");
    let rate = rate.max(1.0);
    let count = ((rate * args.paced_secs as f64).round() as usize).max(1);
    let start = tokio::time::Instant::now();
    let mut sending = tokio::task::JoinSet::new();
    for n in 0..count {
        let due = start + Duration::from_secs_f64(n as f64 / rate);
        tokio::time::sleep_until(due).await;
        let id = format!("wamid.P{run}{n}");
        let (body, signature) = signed(&id, &person(n % args.people), &format!("order status {n}"));
        let request = client.post(&url).header("content-type", "application/json").header(signature::HEADER, signature);
        let due = due.into_std();
        sending.spawn(async move {
            let ok = request.body(body).send().await.is_ok_and(|r| r.status().is_success());
            (id, due, ok.then(|| due.elapsed()))
        });
    }
    let mut sent = vec![];
    while let Some(Ok(done)) = sending.join_next().await {
        sent.push(done);
    }
    let deadline = Instant::now() + Duration::from_secs(args.drain_timeout_secs);
    let accepted: Vec<&String> = sent.iter().filter(|(_, _, answer)| answer.is_some()).map(|(id, ..)| id).collect();
    loop {
        let answered = graph.answered.lock().await;
        if accepted.iter().all(|id| answered.contains_key(*id)) || Instant::now() > deadline {
            break;
        }
        drop(answered);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let answered = graph.answered.lock().await;
    let mut ingest: Vec<Duration> = sent.iter().filter_map(|(_, _, answer)| *answer).collect();
    let mut to_reply: Vec<Duration> =
        sent.iter().filter_map(|(id, due, _)| answered.get(id).map(|reply| reply.duration_since(*due))).collect();
    ingest.sort();
    to_reply.sort();
    PacedLoad { rate, ingest, to_reply }
}

/// Webhooks one at a time, each timed from its send to its reply reaching the Graph stand-in.
async fn light_load_latency(args: &Args, base: &str, graph: &Graph) -> Vec<Duration> {
    let client = reqwest::Client::new();
    let url = format!("{base}/webhooks/whatsapp");
    let mut samples = Vec::with_capacity(args.latency_samples);
    for n in 0..args.latency_samples {
        let from = person(n % args.people);
        let (body, signature) =
            signed(&format!("wamid.L{}{n}", uuid::Uuid::now_v7().simple()), &from, "order status 7");
        let before = graph.replies.lock().await.len();
        let sent = Instant::now();
        let request = client.post(&url).header("content-type", "application/json").header(signature::HEADER, signature);
        if !request.body(body).send().await.is_ok_and(|r| r.status().is_success()) {
            continue;
        }
        while graph.replies.lock().await.len() == before && sent.elapsed() < Duration::from_secs(10) {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        samples.push(sent.elapsed());
    }
    samples.sort();
    samples
}

/// The database `name` on the server `url` names, through a relay that counts what is asked of it.
async fn counting_relay(url: &str, name: &str) -> anyhow::Result<(String, Asked)> {
    use std::net::ToSocketAddrs;
    let options: sqlx::postgres::PgConnectOptions = url.parse()?;
    let server = (options.get_host(), options.get_port()).to_socket_addrs()?.next();
    let (port, asked) = common::wire::relay(server.ok_or_else(|| anyhow::anyhow!("no address for {url}"))?).await?;
    // Unencrypted, so that the relay can read the messages.
    Ok((format!("postgres://{}@127.0.0.1:{port}/{name}?sslmode=disable", options.get_username()), asked))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let bare_url = serve(Router::new().route("/webhooks/whatsapp", post(common::anchors::bare))).await;
    let (bare, spread) = median_load(&args, &format!("{bare_url}/webhooks/whatsapp"), "bare").await;
    println!(
        "anchor, bare handler (HMAC + parse, nothing stored): {:.0} webhooks/s (median of {}: {spread}), \
         p50 {:.1?} p99 {:.1?}",
        bare.rate(),
        args.anchor_runs,
        bare.p(0.5),
        bare.p(0.99)
    );
    let durable_url = serve(common::anchors::durable_inbox(dir.path()).await?).await;
    let (durable, spread) = median_load(&args, &format!("{durable_url}/webhooks/whatsapp"), "inbox").await;
    println!(
        "anchor, durable inbox (the same + one SQLite row per webhook, group commit, fsynced): {:.0} webhooks/s \
         (median of {}: {spread}; {:.3}x the bare handler), p50 {:.1?} p99 {:.1?}, {} failed",
        durable.rate(),
        args.anchor_runs,
        durable.rate() / bare.rate(),
        durable.p(0.5),
        durable.p(0.99),
        durable.failed
    );
    let anchors = Anchors { bare: bare.rate(), durable: durable.rate() };
    let sqlite = format!("sqlite://{}", dir.path().join("bench.db").display());
    let runs = |backend: &str| args.only.as_deref().is_none_or(|only| only == backend);
    if runs("sqlite") {
        pipeline(&args, "sqlite", (&sqlite, None), anchors).await?;
        if args.mix_refunds > 0 {
            mix(&args, "sqlite", &format!("sqlite://{}", dir.path().join("mix.db").display())).await?;
        }
    }
    if let Ok(url) = std::env::var("CHATGATE_TEST_POSTGRES_URL")
        && runs("postgres")
    {
        let (database, name) = common::fresh_postgres(&url).await?;
        let counted = if args.count_statements { Some(counting_relay(&url, &name).await?) } else { None };
        let database = counted.as_ref().map_or(database, |(relayed, _)| relayed.clone());
        let asked = counted.as_ref().map(|(_, asked)| asked);
        let outcome = pipeline(&args, "postgres", (&database, asked), anchors).await;
        common::drop_postgres(&url, &name).await?;
        outcome?;
        if args.mix_refunds > 0 {
            let (database, name) = common::fresh_postgres(&url).await?;
            let outcome = mix(&args, "postgres", &database).await;
            common::drop_postgres(&url, &name).await?;
            outcome?;
        }
    }
    Ok(())
}
