//! Admission gives way to a burst. While webhooks keep coming, admitting them competes with
//! answering them for the same cores (and, on PostgreSQL, for the same server); a burst shorter
//! than `ingest.admission_defer_ms` is therefore answered first and admitted right after it,
//! and anything longer is admitted as it comes, as if nothing was deferred. Never when an answer
//! waits for an admission (`ingest.acknowledge = "admitted"`, Twilio's TwiML), nor past half the
//! backlog limit: deferring must never cost a refusal.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A commit this recent means webhooks are still coming.
const QUIET: Duration = Duration::from_millis(50);
/// Fewer deliveries than this since the inbox was last empty is not a burst (one person writing,
/// the light-load latency): it is admitted at once.
const BURST_DELIVERIES: usize = 64;

/// The inbox's recent commits, as admission reads them.
#[derive(Debug)]
pub(super) struct Burst {
    epoch: Instant,
    /// When the first commit since the inbox was last empty came (milliseconds since `epoch`,
    /// plus one: 0 is none).
    started: AtomicU64,
    /// Deliveries committed since then.
    deliveries: AtomicUsize,
    last_commit: AtomicU64,
}

impl Burst {
    pub(super) fn new() -> Self {
        let (started, last_commit) = (AtomicU64::new(0), AtomicU64::new(0));
        Self { epoch: Instant::now(), started, deliveries: AtomicUsize::new(0), last_commit }
    }

    /// A commit stored `deliveries` deliveries with new messages.
    pub(super) fn committed(&self, deliveries: usize) {
        self.committed_at(deliveries, self.epoch.elapsed());
    }

    /// Admission found nothing left to admit. (A commit racing it starts the next burst later
    /// than its rows came: they wait at most one more `defer`.)
    pub(super) fn drained(&self) {
        self.started.store(0, Ordering::Relaxed);
        self.deliveries.store(0, Ordering::Relaxed);
    }

    /// How long admission should still wait for the burst to end, if at all: until no commit
    /// came for [`QUIET`], and never past `defer` from the burst's first commit.
    pub(super) fn give_way(&self, defer: Duration) -> Option<Duration> {
        self.give_way_at(defer, self.epoch.elapsed())
    }

    fn committed_at(&self, deliveries: usize, now: Duration) {
        let now = millis(now);
        let _ = self.started.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
        self.deliveries.fetch_add(deliveries, Ordering::Relaxed);
        self.last_commit.fetch_max(now, Ordering::Relaxed);
    }

    fn give_way_at(&self, defer: Duration, now: Duration) -> Option<Duration> {
        let started = self.started.load(Ordering::Relaxed);
        if started == 0 || self.deliveries.load(Ordering::Relaxed) < BURST_DELIVERIES {
            return None;
        }
        let now = millis(now);
        let until_due = (started + millis(defer)).saturating_sub(now);
        let until_quiet = (self.last_commit.load(Ordering::Relaxed) + millis(QUIET)).saturating_sub(now);
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

    #[test]
    fn a_few_deliveries_are_not_a_burst() {
        let burst = Burst::new();
        assert_eq!(burst.give_way_at(SECOND, ms(0)), None, "nothing stored");
        burst.committed_at(BURST_DELIVERIES - 1, ms(0));
        assert_eq!(burst.give_way_at(SECOND, ms(1)), None);
    }

    #[test]
    fn a_burst_is_waited_for_until_it_is_quiet() {
        let burst = Burst::new();
        burst.committed_at(BURST_DELIVERIES, ms(100));
        assert_eq!(burst.give_way_at(SECOND, ms(110)), Some(QUIET - ms(10)), "still coming");
        burst.committed_at(1, ms(130));
        assert_eq!(burst.give_way_at(SECOND, ms(140)), Some(QUIET - ms(10)), "it came again");
        assert_eq!(burst.give_way_at(SECOND, ms(130) + QUIET), None, "quiet: admitted now");
        assert_eq!(burst.give_way_at(Duration::ZERO, ms(140)), None, "no deferral configured");
    }

    #[test]
    fn a_burst_that_goes_on_is_admitted_once_the_defer_from_its_first_commit_ran_out() {
        let burst = Burst::new();
        burst.committed_at(BURST_DELIVERIES, ms(0));
        for at in (10..500).step_by(10) {
            burst.committed_at(1, ms(at));
            assert!(burst.give_way_at(ms(500), ms(at)).is_some_and(|wait| wait <= ms(500 - at)), "{at}");
        }
        burst.committed_at(1, ms(500));
        assert_eq!(burst.give_way_at(ms(500), ms(500)), None, "due");
        burst.committed_at(1, ms(900));
        assert_eq!(burst.give_way_at(ms(500), ms(900)), None, "still due while it goes on");
    }

    #[test]
    fn once_drained_the_next_burst_starts_over() {
        let burst = Burst::new();
        burst.committed_at(BURST_DELIVERIES, ms(0));
        burst.committed_at(1, ms(600));
        assert_eq!(burst.give_way_at(ms(500), ms(600)), None);
        burst.drained();
        burst.committed_at(BURST_DELIVERIES, ms(700));
        assert_eq!(burst.give_way_at(ms(500), ms(700)), Some(QUIET));
    }
}
