//! Wake-ups for the workers that claim outbox rows: a commit that writes rows of a kind wakes the
//! worker of that kind at once, instead of leaving them until its next poll. Only this process's
//! commits wake its workers; rows another instance writes are found by the poll.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::store::outbox::NewOutboxMessage;

/// One `Notify` per outbox kind, made when a worker or a commit first names the kind.
#[derive(Debug, Default)]
pub struct OutboxSignals {
    kinds: Mutex<BTreeMap<String, Arc<Notify>>>,
}

impl OutboxSignals {
    /// What wakes the worker of `kind`: it holds a permit if rows came while it was busy.
    pub fn of(&self, kind: &str) -> Arc<Notify> {
        let mut kinds = self.kinds.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        kinds.entry(kind.to_owned()).or_default().clone()
    }

    /// Called after a commit that wrote `rows`: wakes each kind's worker once.
    pub(crate) fn written<'a>(&self, rows: impl IntoIterator<Item = &'a NewOutboxMessage>) {
        let mut kinds: Vec<&str> = rows.into_iter().map(|row| row.kind.as_str()).collect();
        kinds.sort_unstable();
        kinds.dedup();
        for kind in kinds {
            self.of(kind).notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_commit_wakes_the_worker_of_its_kind_even_if_it_was_busy() {
        let signals = OutboxSignals::default();
        let dispatch = signals.of("dispatch");
        let row = |kind: &str| NewOutboxMessage {
            kind: kind.into(),
            destination: "orders".into(),
            payload: serde_json::Value::Null,
            hold: None,
        };
        // Written while nobody waited: the permit is kept for the next wait.
        signals.written([&row("dispatch"), &row("dispatch")]);
        tokio::time::timeout(std::time::Duration::from_secs(1), dispatch.notified()).await.expect("woken");
        // Another kind's rows do not wake it.
        signals.written([&row("message")]);
        let waited = tokio::time::timeout(std::time::Duration::from_millis(50), dispatch.notified()).await;
        assert!(waited.is_err(), "woken by another kind");
    }
}
