//! What a commit tells the rest of the process. Wake-ups for the workers that claim outbox rows:
//! a commit that writes rows of a kind wakes the worker of that kind at once, instead of leaving
//! them until its next poll (only this process's commits wake its workers; rows another instance
//! writes are found by the poll). And the moves it committed, to whoever observes them (the
//! service layer's traces), after the commit and never inside it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use time::OffsetDateTime;
use tokio::sync::Notify;
use uuid::Uuid;

use crate::domain::lifecycle::Transition;
use crate::store::outbox::NewOutboxMessage;

/// A committed move, as an observer is told of it.
#[derive(Debug, Clone, Copy)]
pub struct CommittedMove<'a> {
    pub command_id: Uuid,
    pub transition: &'a Transition,
    /// The command's trace, when it has one.
    pub trace_parent: Option<&'a str>,
    /// When the move was decided; it was committed just now.
    pub decided_at: OffsetDateTime,
}

/// Told of every committed move of this process, after its commit.
pub trait MoveObserver: Send + Sync {
    fn committed(&self, moves: &[CommittedMove<'_>]);
}

/// One `Notify` per outbox kind, made when a worker or a commit first names the kind; and the
/// observer of moves, once one is set.
#[derive(Default)]
pub struct OutboxSignals {
    kinds: Mutex<BTreeMap<String, Arc<Notify>>>,
    observer: OnceLock<Arc<dyn MoveObserver>>,
}

impl std::fmt::Debug for OutboxSignals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutboxSignals").field("observed", &self.observer.get().is_some()).finish_non_exhaustive()
    }
}

impl OutboxSignals {
    /// What wakes the worker of `kind`: it holds a permit if rows came while it was busy.
    pub fn of(&self, kind: &str) -> Arc<Notify> {
        let mut kinds = self.kinds.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        kinds.entry(kind.to_owned()).or_default().clone()
    }

    /// Sets who is told of committed moves; the first one set stays.
    pub(crate) fn observe(&self, observer: Arc<dyn MoveObserver>) -> bool {
        self.observer.set(observer).is_ok()
    }

    /// Called after a commit with the moves it made: counts them by the state they reached
    /// (`chatgate_transitions_total{to}`) and tells the observer. Returns whether there were any.
    pub(crate) fn moved<'a>(&self, moves: impl IntoIterator<Item = CommittedMove<'a>>) -> bool {
        let observer = self.observer.get();
        let mut told = vec![];
        let mut any = false;
        for committed in moves {
            any = true;
            metrics::counter!("chatgate_transitions_total", "to" => committed.transition.to.as_str()).increment(1);
            if observer.is_some() {
                told.push(committed);
            }
        }
        if let Some(observer) = observer.filter(|_| !told.is_empty()) {
            observer.committed(&told);
        }
        any
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
