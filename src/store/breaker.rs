//! Failing fast while the database is down. After a transaction could not start because the
//! database is unreachable, the store refuses new ones at once for a moment and lets one caller
//! at a time find out whether it is back; everyone else gets `Unavailable` (503 with
//! `Retry-After`) immediately instead of waiting out the pool's acquire timeout in a queue that
//! grows with every request.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long the store refuses at once after a failure, before one caller may try again.
const COOL_DOWN: Duration = Duration::from_millis(500);

#[derive(Debug, Default)]
pub(crate) struct Breaker {
    last_failure: Mutex<Option<Instant>>,
    probing: AtomicBool,
}

/// What the breaker lets a caller do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Pass {
    /// The database is believed up: go.
    Go,
    /// It was down; this caller finds out whether it is back (and must report the outcome).
    Probe,
    /// It was down moments ago: do not wait for it.
    Refused,
}

impl Breaker {
    pub(crate) fn pass(&self) -> Pass {
        let last = *self.last_failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match last {
            None => Pass::Go,
            Some(at) if at.elapsed() < COOL_DOWN => Pass::Refused,
            Some(_) if self.probing.swap(true, Ordering::AcqRel) => Pass::Refused,
            Some(_) => Pass::Probe,
        }
    }

    /// Whether the database failed moments ago (callers that do not probe just refuse).
    pub(crate) fn is_open(&self) -> bool {
        let last = *self.last_failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        last.is_some_and(|at| at.elapsed() < COOL_DOWN)
    }

    /// A transaction started: the database is up.
    pub(crate) fn succeeded(&self) {
        *self.last_failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// A transaction could not start because the database is unreachable.
    pub(crate) fn failed(&self) {
        *self.last_failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Instant::now());
    }

    /// Held by the caller that probes; dropped — finished or cancelled — it lets the next one probe.
    pub(crate) fn probe_guard(&self, pass: &Pass) -> Option<ProbeGuard<'_>> {
        (*pass == Pass::Probe).then_some(ProbeGuard(self))
    }

    /// Whether the database failed and nothing has reached it since: callers that must not wait
    /// (the inbox's writer, which every webhook's answer waits for) are refused at once while a
    /// [`Breaker::watch`] finds out when it is back.
    pub(crate) fn is_failing(&self) -> bool {
        self.last_failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner).is_some()
    }

    /// After a failure, tries `reaches` every `COOL_DOWN` on a task of its own until it succeeds,
    /// then lets callers through again; one watcher at a time. Nobody waits for the probes: the
    /// webhooks that come meanwhile are answered 503 at once, and the first one after the database
    /// is back is taken.
    pub(crate) fn watch<F, Fut>(self: &std::sync::Arc<Self>, reaches: F)
    where
        F: Fn() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = bool> + Send,
    {
        if self.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let breaker = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(COOL_DOWN).await;
                if reaches().await {
                    breaker.succeeded();
                    break;
                }
                breaker.failed();
            }
            breaker.probing.store(false, Ordering::Release);
        });
    }
}

pub(crate) struct ProbeGuard<'a>(&'a Breaker);

impl Drop for ProbeGuard<'_> {
    fn drop(&mut self) {
        self.0.probing.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_a_failure_callers_are_refused_then_one_probes_and_success_reopens() {
        let breaker = Breaker::default();
        assert_eq!(breaker.pass(), Pass::Go);
        breaker.failed();
        assert_eq!(breaker.pass(), Pass::Refused, "within the cool-down");
        std::thread::sleep(COOL_DOWN);
        let probe = breaker.pass();
        assert_eq!(probe, Pass::Probe);
        let guard = breaker.probe_guard(&probe);
        assert_eq!(breaker.pass(), Pass::Refused, "one probe at a time");
        breaker.failed();
        drop(guard);
        assert_eq!(breaker.pass(), Pass::Refused, "it failed: a new cool-down");
        std::thread::sleep(COOL_DOWN);
        let probe = breaker.pass();
        // A probe whose caller went away (a cancelled request) lets the next one probe.
        drop(breaker.probe_guard(&probe));
        assert_eq!(breaker.pass(), Pass::Probe);
        breaker.succeeded();
        assert_eq!(breaker.pass(), Pass::Go);
    }

    #[tokio::test]
    async fn a_watcher_lets_callers_through_once_the_database_answers_again() {
        use std::sync::atomic::AtomicUsize;
        let breaker = std::sync::Arc::new(Breaker::default());
        breaker.failed();
        assert!(breaker.is_failing());
        let tries = std::sync::Arc::new(AtomicUsize::new(0));
        let counted = tries.clone();
        // Down for two probes, back at the third.
        breaker.watch(move || {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            async move { n >= 2 }
        });
        breaker.watch(|| async { panic!("one watcher at a time") });
        for _ in 0..100 {
            if !breaker.is_failing() {
                break;
            }
            tokio::time::sleep(COOL_DOWN / 4).await;
        }
        assert_eq!(tries.load(Ordering::SeqCst), 3, "the third probe found it back");
        assert_eq!(breaker.pass(), Pass::Go);
    }
}
