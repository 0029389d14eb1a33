//! Storage benchmark, run by hand (never as a timed test):
//!
//!   cargo run --release --example bench -- --commands 2000 --concurrency 16
//!   cargo run --release --example bench -- --database-url postgres://postgres@127.0.0.1:5432/bench
//!
//! Measures, on a fresh database: admitting new commands (the reservation, the command row, its
//! transitions and evidence in one transaction), admitting duplicates of one key, and whole
//! lifecycles (admit and six moves to `executed`, each move its own compare-and-swap transaction
//! with evidence).

use std::sync::Arc;
use std::time::{Duration, Instant};

use chatgate::domain::command::CommandRequest;

use chatgate::config::{DatabaseUrl, StorageConfig};
use chatgate::domain::command::Intent;
use chatgate::domain::evidence::Pseudonymizer;
use chatgate::domain::lifecycle::Event;
use chatgate::service::engine::Engine;
use chatgate::service::engine::MoveContext;
use chatgate::store::{Admitted, Store};
use clap::Parser;
use time::OffsetDateTime;
use tokio::sync::Semaphore;

#[derive(Parser)]
struct Args {
    /// Database to benchmark; a fresh SQLite file in a temporary folder when absent.
    #[arg(long)]
    database_url: Option<String>,
    #[arg(long, default_value_t = 2000)]
    commands: usize,
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
}

fn request(n: usize, message: &str) -> anyhow::Result<CommandRequest> {
    Ok(chatgate::domain::command::demo::refund("bench", &n.to_string(), "25.00", message)?)
}

/// Runs `count` jobs with at most `concurrency` at once; returns each job's latency.
async fn measure<F, Fut>(count: usize, concurrency: usize, job: F) -> anyhow::Result<(Duration, Vec<Duration>)>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let permits = Arc::new(Semaphore::new(concurrency));
    let started = Instant::now();
    let mut handles = Vec::with_capacity(count);
    for n in 0..count {
        let permit = permits.clone().acquire_owned().await?;
        let fut = job(n);
        handles.push(tokio::spawn(async move {
            let at = Instant::now();
            let result = fut.await;
            drop(permit);
            result.map(|()| at.elapsed())
        }));
    }
    let mut latencies = Vec::with_capacity(count);
    for handle in handles {
        latencies.push(handle.await??);
    }
    Ok((started.elapsed(), latencies))
}

fn report(name: &str, count: usize, (total, mut latencies): (Duration, Vec<Duration>)) {
    latencies.sort();
    let pick = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q) as usize];
    println!(
        "{name:<28} {count:>6} in {:>7.2?}  {:>8.0}/s  p50 {:>8.2?}  p99 {:>8.2?}",
        total,
        count as f64 / total.as_secs_f64(),
        pick(0.50),
        pick(0.99)
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let url = args.database_url.clone().unwrap_or_else(|| format!("sqlite://{}/bench.db", dir.path().display()));
    let config = StorageConfig {
        database_url: DatabaseUrl::new(url),
        max_connections: Some(args.concurrency as u32),
        ..StorageConfig::default()
    };
    let store = Store::connect(&config).await?;
    store.migrate().await?;
    let engine = Engine::new(store.clone(), Pseudonymizer::new(b"bench-pseudonym-key"));
    println!("backend {}, concurrency {}", store.backend_name(), args.concurrency);
    let run_id = uuid::Uuid::now_v7().simple().to_string();
    let now = OffsetDateTime::now_utc;

    let e = engine.clone();
    let tag = run_id.clone();
    let admitted = measure(args.commands, args.concurrency, move |n| {
        let e = e.clone();
        let order = format!("{tag}-{n}");
        async move {
            let req = request(0, "wamid.x")?;
            let req = CommandRequest { intent: Intent::parse("order", "refund", Some(&order))?, ..req };
            match e.accept(req, &[Event::RequestConfirmation], now()).await?.1 {
                Admitted::New { .. } => Ok(()),
                other => anyhow::bail!("expected new, got {other:?}"),
            }
        }
    })
    .await?;
    report("admit new (+prompt move)", args.commands, admitted);

    let e = engine.clone();
    let duplicates = measure(args.commands, args.concurrency, move |n| {
        let e = e.clone();
        async move {
            match e.accept(request(usize::MAX, &format!("wamid.d{n}"))?, &[], now()).await?.1 {
                Admitted::New { .. } | Admitted::InProgress(_) => Ok(()),
                other => anyhow::bail!("unexpected {other:?}"),
            }
        }
    })
    .await?;
    report("admit duplicate of one key", args.commands, duplicates);

    let lifecycles = args.commands / 4;
    let e = engine.clone();
    let tag = run_id.clone();
    let full = measure(lifecycles, args.concurrency, move |n| {
        let e = e.clone();
        let order = format!("{tag}-life-{n}");
        async move {
            let req = request(0, "wamid.l")?;
            let req = CommandRequest { intent: Intent::parse("order", "refund", Some(&order))?, ..req };
            let (envelope, _) = e.accept(req, &[], now()).await?;
            use Event::*;
            for event in [RequestConfirmation, Confirm, SubmitForAuthorization, Allow, Start, Succeed] {
                e.advance(&envelope.tenant_id, envelope.command_id, event, MoveContext::default(), now()).await?;
            }
            Ok(())
        }
    })
    .await?;
    report("full lifecycle (7 tx)", lifecycles, full);

    let started = Instant::now();
    let audit = store.evidence().verify().await?;
    let artifacts: u64 = audit.chains.iter().map(|c| c.artifacts).sum();
    println!(
        "audit verify: {artifacts} artifacts in {:.2?}, intact: {}",
        started.elapsed(),
        audit.first_break.is_none()
    );
    store.close().await;
    Ok(())
}
