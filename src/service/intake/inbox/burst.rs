//! Admission gives way to a flood. While webhooks pour in faster than the pipeline behind the
//! inbox could ever take them, admitting them competes with answering them for the same cores
//! (and, on PostgreSQL, for the same server); a flood shorter than `ingest.admission_defer_ms` is
//! therefore answered first and admitted right after it, and anything longer is admitted as it
//! comes, as if nothing was deferred. What makes a flood is the arrival rate, never the backlog
//! alone: steady traffic at any rate the pipeline sustains keeps the inbox from emptying between
//! passes, and must not be taken for a burst (issue #49: a count of deliveries since the inbox
//! was last empty held steady traffic back for up to the whole deferral). Never when an answer
//! waits for an admission (`ingest.acknowledge = "admitted"`, Twilio's TwiML), nor past half the
//! backlog limit: deferring must never cost a refusal.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The span over which the arrival rate is read: short, so that a flood is known within a few
/// milliseconds, before admission has claimed much of it.
const SPAN: Duration = Duration::from_millis(5);
/// Deliveries within one [`SPAN`] that make a flood: 32 in 5 ms is 6,400 a second, several times
/// what the whole pipeline sustains on the benchmark's machine (docs/BENCHMARKS.md): only webhooks
/// whose replies could not have come within milliseconds anyway are deferred.
const FLOOD_DELIVERIES: usize = 32;
/// How long webhooks must come slower than a flood before admission takes the flood.
const QUIET: Duration = Duration::from_millis(50);

/// The inbox's recent commits, as admission reads them.
#[derive(Debug)]
pub(super) struct Burst {
    epoch: Instant,
    /// When the current span began (milliseconds since `epoch`, plus one: 0 is none).
    span_began: AtomicU64,
    /// Deliveries committed within the current span.
    span_deliveries: AtomicUsize,
    /// When the flood admission gives way to was first seen since the inbox was last empty.
    started: AtomicU64,
    /// The last commit that found webhooks arriving at a flood's rate.
    last_flooded: AtomicU64,
}

impl Burst {
    pub(super) fn new() -> Self {
        let (span_began, started, last_flooded) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
        Self { epoch: Instant::now(), span_began, span_deliveries: AtomicUsize::new(0), started, last_flooded }
    }

    /// A commit stored `deliveries` deliveries with new messages.
    pub(super) fn committed(&self, deliveries: usize) {
        self.committed_at(deliveries, self.epoch.elapsed());
    }

    /// Admission found nothing left to admit. (A commit racing it starts the next flood later
    /// than its rows came: they wait at most one more `defer`.)
    pub(super) fn drained(&self) {
        self.started.store(0, Ordering::Relaxed);
    }

    /// How long admission should still wait for the flood to end, if at all: until webhooks have
    /// come at under a flood's rate for [`QUIET`], and never past `defer` from the flood's start.
    pub(super) fn give_way(&self, defer: Duration) -> Option<Duration> {
        self.give_way_at(defer, self.epoch.elapsed())
    }

    /// The inbox has one writer, so commits do not race each other here; a race with `drained`
    /// at worst starts a flood one commit late.
    fn committed_at(&self, deliveries: usize, now: Duration) {
        let now = millis(now);
        let in_span = if now >= self.span_began.load(Ordering::Relaxed) + millis(SPAN) {
            self.span_began.store(now, Ordering::Relaxed);
            self.span_deliveries.store(deliveries, Ordering::Relaxed);
            deliveries
        } else {
            self.span_deliveries.fetch_add(deliveries, Ordering::Relaxed) + deliveries
        };
        if in_span >= FLOOD_DELIVERIES {
            let _ = self.started.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
            self.last_flooded.fetch_max(now, Ordering::Relaxed);
        }
    }

    fn give_way_at(&self, defer: Duration, now: Duration) -> Option<Duration> {
        let started = self.started.load(Ordering::Relaxed);
        if started == 0 {
            return None;
        }
        let now = millis(now);
        let until_due = (started + millis(defer)).saturating_sub(now);
        let until_quiet = (self.last_flooded.load(Ordering::Relaxed) + millis(QUIET)).saturating_sub(now);
        let wait = until_due.min(until_quiet);
        (wait > 1).then(|| Duration::from_millis(wait - 1))
    }
}

/// `at` in whole milliseconds, plus one (0 stands for none).
fn millis(at: Duration) -> u64 {
    u64::try_from(at.as_millis()).unwrap_or(u64::MAX / 2) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// `count` deliveries, one a commit, `gap` apart from `from`; the time of the last.
    fn arrive(burst: &Burst, from: Duration, count: u32, gap: Duration) -> Duration {
        (0..count).map(|n| from + gap * n).inspect(|&at| burst.committed_at(1, at)).last().unwrap_or(from)
    }

    #[test]
    fn a_few_deliveries_are_not_a_flood() {
        let burst = Burst::new();
        assert_eq!(burst.give_way_at(SECOND, ms(0)), None, "nothing stored");
        burst.committed_at(FLOOD_DELIVERIES - 1, ms(0));
        assert_eq!(burst.give_way_at(SECOND, ms(1)), None);
    }

    /// The inbox never empties between passes under steady traffic: whatever its rate below a
    /// flood's, however long it lasts, admission never waits.
    #[test]
    fn steady_traffic_is_never_held_back() {
        for per_second in [20_u64, 100, 450, 2_000, 4_000] {
            let burst = Burst::new();
            let gap = Duration::from_micros(1_000_000 / per_second);
            let mut at = ms(0);
            for _ in 0..u32::try_from(per_second * 3).unwrap_or(u32::MAX) {
                burst.committed_at(1, at);
                assert_eq!(burst.give_way_at(SECOND, at), None, "{per_second}/s at {at:?}");
                at += gap;
            }
        }
    }

    #[test]
    fn a_flood_is_waited_for_until_it_ebbs() {
        let burst = Burst::new();
        let last = arrive(&burst, ms(100), 300, Duration::from_micros(100));
        assert_eq!(burst.give_way_at(SECOND, last + ms(10)), Some(QUIET - ms(10)), "still pouring in");
        let steady = arrive(&burst, last + ms(10), 20, ms(10));
        assert_eq!(burst.give_way_at(SECOND, steady), None, "steady traffic after it is not waited for");
        assert_eq!(burst.give_way_at(Duration::ZERO, last + ms(10)), None, "no deferral configured");
    }

    #[test]
    fn a_flood_that_goes_on_is_admitted_once_the_defer_from_its_start_ran_out() {
        let burst = Burst::new();
        burst.committed_at(FLOOD_DELIVERIES, ms(0));
        for at in (10..500).step_by(10) {
            burst.committed_at(FLOOD_DELIVERIES, ms(at));
            assert!(burst.give_way_at(ms(500), ms(at)).is_some_and(|wait| wait <= ms(500 - at)), "{at}");
        }
        burst.committed_at(FLOOD_DELIVERIES, ms(500));
        assert_eq!(burst.give_way_at(ms(500), ms(500)), None, "due");
        burst.committed_at(FLOOD_DELIVERIES, ms(900));
        assert_eq!(burst.give_way_at(ms(500), ms(900)), None, "still due while it goes on");
    }

    #[test]
    fn once_drained_the_next_flood_starts_over() {
        let burst = Burst::new();
        burst.committed_at(FLOOD_DELIVERIES, ms(0));
        burst.committed_at(FLOOD_DELIVERIES, ms(600));
        assert_eq!(burst.give_way_at(ms(500), ms(600)), None);
        burst.drained();
        burst.committed_at(FLOOD_DELIVERIES, ms(700));
        assert_eq!(burst.give_way_at(ms(500), ms(700)), Some(QUIET));
    }
}
