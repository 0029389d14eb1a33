//! Webhook load generator, run by hand against a running gateway (never a timed test):
//!
//!   cargo run --release -- serve                       # terminal 1 (fresh data/ folder)
//!   cargo run --release --example webhook_load -- --requests 20000 --concurrency 64
//!   cargo run --release --example webhook_load -- --requests 10000 --rate 300   # latency at a fixed rate
//!
//! Sends signed, unique, single-message WhatsApp deliveries ("refund N 1.00" from the demo
//! customer: each one a new command, its confirmation prompt and evidence) and prints
//! requests/s and latency percentiles. Bodies and signatures are built before the clock starts.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chatgate::channels::whatsapp::signature;

use chatgate::channels::whatsapp::simulate;
use clap::Parser;

#[derive(Parser)]
struct Args {
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    #[arg(long, default_value_t = 20_000)]
    requests: usize,
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Send at this many requests per second (spread over the connections) instead of flat out.
    #[arg(long)]
    rate: Option<u64>,
    /// The demo app's secret (`CHATGATE_WHATSAPP_APP_SECRET`).
    #[arg(long, env = "CHATGATE_WHATSAPP_APP_SECRET", default_value = "demo-whatsapp-app-secret")]
    secret: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let run = uuid::Uuid::now_v7().simple().to_string();
    let bodies: Arc<Vec<(Vec<u8>, String)>> = Arc::new(
        (0..args.requests)
            .map(|n| {
                let text = format!("refund {run}-{n} 1.00");
                let message = simulate::text(&format!("wamid.LOAD{run}{n}"), "15550000001", &text);
                let body = simulate::notification("100000000000001", vec![message], vec![]).to_string().into_bytes();
                let signed = signature::sign(args.secret.as_bytes(), &body);
                (body, signed)
            })
            .collect(),
    );
    let url = format!("{}/webhooks/whatsapp", args.url.trim_end_matches('/'));
    let client = reqwest::Client::builder().pool_max_idle_per_host(args.concurrency).build()?;
    let next = Arc::new(AtomicUsize::new(0));
    // At a fixed rate, request n is due at start + n / rate.
    let interval = args.rate.map(|r| Duration::from_secs_f64(1.0 / r as f64));
    let started = Instant::now();
    let workers: Vec<_> = (0..args.concurrency)
        .map(|_| {
            let (client, url, bodies, next) = (client.clone(), url.clone(), bodies.clone(), next.clone());
            tokio::spawn(async move {
                let mut latencies = vec![];
                let mut failures = 0usize;
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    let Some((body, signed)) = bodies.get(n) else { break };
                    if let Some(interval) = interval {
                        tokio::time::sleep_until((started + interval * n as u32).into()).await;
                    }
                    let at = Instant::now();
                    let response = client
                        .post(&url)
                        .header("content-type", "application/json")
                        .header(signature::HEADER, signed)
                        .body(body.clone())
                        .send()
                        .await;
                    match response {
                        Ok(r) if r.status().is_success() => {
                            let _ = r.bytes().await;
                            latencies.push(at.elapsed());
                        }
                        _ => failures += 1,
                    }
                }
                (latencies, failures)
            })
        })
        .collect();
    let mut latencies = vec![];
    let mut failures = 0;
    for worker in workers {
        let (mut l, f) = worker.await?;
        latencies.append(&mut l);
        failures += f;
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let pick = |q: f64| latencies.get(((latencies.len().max(1) - 1) as f64 * q) as usize).copied().unwrap_or_default();
    println!(
        "{} ok, {failures} failed in {elapsed:.2?}: {:.0} webhooks/s; latency p50 {:.2?} p90 {:.2?} p99 {:.2?} max {:.2?}",
        latencies.len(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        pick(0.50),
        pick(0.90),
        pick(0.99),
        pick(1.0),
    );
    Ok(())
}
