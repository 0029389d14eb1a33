//! How many event streams may be open: per client (a token's issuer and subject) and in all on
//! this instance. A stream holds a connection and a descriptor for as long as it is open, so one
//! read-only token could otherwise open them until the process runs out, and the webhooks with it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Refused: too many streams; try again after `retry_after`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TooManyStreams(pub &'static str, pub Duration);

#[derive(Debug)]
pub struct StreamSlots {
    max_total: usize,
    max_per_client: usize,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    by_client: HashMap<String, usize>,
}

/// An open stream's place; given back when the stream ends (dropped).
#[derive(Debug)]
pub struct StreamSlot {
    slots: Arc<StreamSlots>,
    client: String,
}

/// How long a refused client is asked to wait: a stream ends when its client goes away.
const RETRY_AFTER: Duration = Duration::from_secs(5);

impl StreamSlots {
    pub fn new(max_total: usize, max_per_client: usize) -> Self {
        Self { max_total, max_per_client, open: Mutex::default() }
    }

    /// A place for one more stream of `client`, or why not.
    pub fn take(self: &Arc<Self>, client: &str) -> Result<StreamSlot, TooManyStreams> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if open.total >= self.max_total {
            metrics::counter!("chatgate_event_streams_refused_total", "limit" => "instance").increment(1);
            return Err(TooManyStreams("Too many event streams are open on this gateway.", RETRY_AFTER));
        }
        let mine = open.by_client.entry(client.to_owned()).or_default();
        if *mine >= self.max_per_client {
            metrics::counter!("chatgate_event_streams_refused_total", "limit" => "client").increment(1);
            return Err(TooManyStreams("This client has as many event streams open as it may.", RETRY_AFTER));
        }
        *mine += 1;
        open.total += 1;
        metrics::gauge!("chatgate_event_streams").set(open.total as f64);
        Ok(StreamSlot { slots: self.clone(), client: client.to_owned() })
    }

    /// Streams open now.
    pub fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(PoisonError::into_inner).total
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.total = open.total.saturating_sub(1);
        if let Some(mine) = open.by_client.get_mut(&self.client) {
            *mine = mine.saturating_sub(1);
            if *mine == 0 {
                open.by_client.remove(&self.client);
            }
        }
        metrics::gauge!("chatgate_event_streams").set(open.total as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_and_the_instance_are_capped_and_places_come_back() {
        let slots = Arc::new(StreamSlots::new(3, 2));
        let a1 = slots.take("a").expect("a's first");
        let _a2 = slots.take("a").expect("a's second");
        assert!(slots.take("a").is_err(), "a has two");
        let _b1 = slots.take("b").expect("b's first");
        assert!(slots.take("c").is_err(), "three in all");
        drop(a1);
        assert_eq!(slots.open(), 2);
        let _c1 = slots.take("c").expect("a place came back");
    }
}
