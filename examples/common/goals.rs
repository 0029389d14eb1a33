//! The pipeline benchmark's goals (issues #31 and #49), and whether a run met them.

use std::time::Duration;

/// The two handlers' rates in this run (see [`super::anchors`]).
#[derive(Clone, Copy)]
pub struct Anchors {
    pub bare: f64,
    pub durable: f64,
}

/// What one backend's run measured.
pub struct Goals {
    pub anchors: Anchors,
    pub end_to_end: f64,
    pub drain: Duration,
    pub ingest: f64,
    /// Webhook to reply, one at a time.
    pub light_reply_p99: Duration,
    /// Each paced phase, by its fraction of the end-to-end rate.
    pub paced: Vec<Paced>,
    /// The gateway's CPU from the first webhook of the flood to its last reply, per command.
    pub cpu_per_command: Duration,
    /// The database server's CPU over the same span, per command, where it is a process of its own.
    pub database_cpu_per_command: Option<Duration>,
    pub peak_rss_mb: f64,
}

/// A paced phase's p99s, from each webhook's scheduled time.
pub struct Paced {
    pub fraction: f64,
    pub ingest_p99: Duration,
    pub reply_p99: Duration,
}

/// Issue #49's bound on the reply's p99 at a fraction of the end-to-end rate, where it sets one.
fn reply_bound(fraction: f64) -> Option<Duration> {
    match (fraction * 100.0).round() as u32 {
        50 => Some(Duration::from_millis(25)),
        80 => Some(Duration::from_millis(50)),
        _ => None,
    }
}

/// Issue #49's bound on the gateway's peak resident set, MB: the flood's and the mix's alike.
const PEAK_RSS_MB: f64 = 64.0;

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT met" }
}

/// The realistic mix's goal: the same peak RSS bound as the flood's.
pub fn print_mix(backend: &str, peak_rss_mb: f64) {
    println!("{backend}: the mix's goal —");
    println!("  peak RSS <= {PEAK_RSS_MB} MB: {peak_rss_mb:.1} MB, {}", verdict(peak_rss_mb <= PEAK_RSS_MB));
}

impl Goals {
    pub fn print(&self, backend: &str) {
        let floor = if backend == "sqlite" { 4_000.0 } else { 2_500.0 };
        let cpu_bound = Duration::from_micros(if backend == "sqlite" { 250 } else { 200 });
        let ms = |d: Duration| d.as_secs_f64() * 1_000.0;
        let of_bare = self.ingest / self.anchors.bare;
        println!("{backend}: goals —");
        println!(
            "  ingest >= 0.5x the bare handler (0.3x to call it done): {of_bare:.3}x, {}; {:.3}x the durable inbox",
            verdict(of_bare >= 0.5),
            self.ingest / self.anchors.durable
        );
        println!(
            "  at light load, webhook to reply p99 <= 10 ms: {:.1} ms, {}",
            ms(self.light_reply_p99),
            verdict(self.light_reply_p99 <= Duration::from_millis(10))
        );
        for phase in &self.paced {
            let percent = phase.fraction * 100.0;
            if (percent - 50.0).abs() < 1.0 {
                let ingest = phase.ingest_p99;
                let met = verdict(ingest <= Duration::from_millis(5));
                println!("  at {percent:.0}% of end to end, ingest p99 <= 5 ms: {:.1} ms, {met}", ms(ingest));
            }
            if let Some(bound) = reply_bound(phase.fraction) {
                let reply = phase.reply_p99;
                println!(
                    "  at {percent:.0}% of end to end, webhook to reply p99 <= {:.0} ms: {:.1} ms, {}",
                    ms(bound),
                    ms(reply),
                    verdict(reply <= bound)
                );
            }
        }
        println!(
            "  end to end >= {floor:.0} commands/s: {:.0}, {}",
            self.end_to_end,
            verdict(self.end_to_end >= floor)
        );
        let database = self
            .database_cpu_per_command
            .map(|spent| format!(" (PostgreSQL's own beside it: {} µs)", spent.as_micros()))
            .unwrap_or_default();
        println!(
            "  the gateway's CPU per command <= {} µs: {} µs, {}{database}",
            cpu_bound.as_micros(),
            self.cpu_per_command.as_micros(),
            verdict(self.cpu_per_command <= cpu_bound)
        );
        println!("  drained within 2 s: {:.2?}, {}", self.drain, verdict(self.drain <= Duration::from_secs(2)));
        println!(
            "  peak RSS <= {PEAK_RSS_MB} MB: {:.1} MB, {}",
            self.peak_rss_mb,
            verdict(self.peak_rss_mb <= PEAK_RSS_MB)
        );
    }
}
