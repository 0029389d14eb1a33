//! What the gateway's own writes say about the database. A one-row readiness write can fit on a
//! disk where an admission no longer does, so readiness also listens to the writes that matter:
//! once one failed for want of space or I/O, the store is not ready until a write the size of an
//! admission batch, begun after the failure, commits again and reaches the database file.

use std::sync::Mutex;
use std::time::Instant;

use crate::store::StoreError;

/// How much the readiness probe writes while the gateway's writes are failing: room for a batch
/// of admissions (each is a few pages of several tables).
pub(crate) const PROBE_BYTES: usize = 256 * 1024;

#[derive(Debug, Default)]
pub(crate) struct WriteHealth {
    failing_since: Mutex<Option<Instant>>,
}

impl WriteHealth {
    /// A write failed: if because the database cannot write, the store is failing from now on.
    pub(crate) fn observe_failure(&self, error: &StoreError) {
        if matches!(error, StoreError::CannotWrite(_)) {
            let mut since = self.failing_since.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            since.get_or_insert_with(Instant::now);
        }
    }

    /// The sized probe, begun at `began`, committed. It ends a failure only if it began after the
    /// failure did: a write already under way when the disk filled proves nothing about the space
    /// left.
    pub(crate) fn recovered(&self, began: Instant) {
        let mut since = self.failing_since.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if since.is_some_and(|since| since <= began) {
            *since = None;
        }
    }

    /// Since when the gateway's writes fail, if they do.
    pub(crate) fn failing_since(&self) -> Option<Instant> {
        *self.failing_since.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Text that no storage compresses away (random hex), [`PROBE_BYTES`] long.
pub(crate) fn probe_filler() -> String {
    use rand::RngCore;
    let mut bytes = vec![0u8; PROBE_BYTES / 2];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_failure_to_write_counts_and_a_sized_success_clears_it() {
        let health = WriteHealth::default();
        health.observe_failure(&StoreError::Unavailable("down".into()));
        assert!(health.failing_since().is_none(), "an unreachable database is the breaker's");
        health.observe_failure(&StoreError::CannotWrite("full".into()));
        let since = health.failing_since().expect("failing");
        health.observe_failure(&StoreError::CannotWrite("still full".into()));
        assert_eq!(health.failing_since(), Some(since), "since the first failure");
        health.recovered(Instant::now());
        assert!(health.failing_since().is_none());
    }

    #[test]
    fn a_write_begun_before_the_failure_does_not_end_it() {
        let health = WriteHealth::default();
        let began = Instant::now();
        health.observe_failure(&StoreError::CannotWrite("full".into()));
        health.recovered(began);
        assert!(health.failing_since().is_some(), "it was under way when the disk filled");
        health.recovered(Instant::now());
        assert!(health.failing_since().is_none(), "one begun since ends it");
    }
}
