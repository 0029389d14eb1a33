//! Issue #31's goals for the pipeline benchmark, and whether a run met them.

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
    pub half_ingest_p99: Duration,
    pub half_reply_p99: Duration,
    pub peak_rss_mb: f64,
}

impl Goals {
    pub fn print(&self, backend: &str) {
        let verdict = |met: bool| if met { "met" } else { "NOT met" };
        let floor = if backend == "sqlite" { 4_000.0 } else { 2_500.0 };
        let ms = |d: Duration| d.as_secs_f64() * 1_000.0;
        let of_bare = self.ingest / self.anchors.bare;
        println!("{backend}: goals —");
        println!(
            "  ingest >= 0.5x the bare handler (0.3x to call it done): {of_bare:.3}x, {}; {:.3}x the durable inbox",
            verdict(of_bare >= 0.5),
            self.ingest / self.anchors.durable
        );
        println!(
            "  at half load, ingest p99 <= 5 ms: {:.1} ms, {}; webhook to reply p99 <= 25 ms: {:.1} ms, {}",
            ms(self.half_ingest_p99),
            verdict(self.half_ingest_p99 <= Duration::from_millis(5)),
            ms(self.half_reply_p99),
            verdict(self.half_reply_p99 <= Duration::from_millis(25))
        );
        println!(
            "  end to end >= {floor:.0} commands/s: {:.0}, {}",
            self.end_to_end,
            verdict(self.end_to_end >= floor)
        );
        println!("  drained within 2 s: {:.2?}, {}", self.drain, verdict(self.drain <= Duration::from_secs(2)));
        println!("  peak RSS <= 64 MB: {:.1} MB, {}", self.peak_rss_mb, verdict(self.peak_rss_mb <= 64.0));
    }
}
