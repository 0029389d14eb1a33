//! A warning worth seeing once a second, not once a message: under a flood of rate-limited or
//! misaddressed messages, a log line per message costs about as much as storing the message, and
//! says nothing the first one and the metrics do not (`chatgate_inbound_messages_total{outcome}`).

use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) struct Throttled {
    /// The second (since the Unix epoch) of the last line written.
    last: AtomicU64,
    /// Lines held back since then.
    held: AtomicU64,
}

impl Throttled {
    pub(crate) const fn new() -> Self {
        Self { last: AtomicU64::new(0), held: AtomicU64::new(0) }
    }

    /// Whether a line may be written at `second`: `Some(n)` with the `n` lines held back since the
    /// last one, or `None` (counted as held back) when one was written this second already.
    pub(crate) fn admit(&self, second: u64) -> Option<u64> {
        let last = self.last.load(Ordering::Relaxed);
        if second > last && self.last.compare_exchange(last, second, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            return Some(self.held.swap(0, Ordering::Relaxed));
        }
        self.held.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// `admit` at the current second.
    pub(crate) fn admit_now(&self) -> Option<u64> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        self.admit(now.as_secs())
    }
}

#[cfg(test)]
mod tests {
    use super::Throttled;

    #[test]
    fn one_line_a_second_with_the_count_of_those_held_back() {
        let throttled = Throttled::new();
        assert_eq!(throttled.admit(100), Some(0), "the first line is written");
        assert_eq!(throttled.admit(100), None);
        assert_eq!(throttled.admit(100), None);
        assert_eq!(throttled.admit(101), Some(2), "the next second's line says two were held back");
        assert_eq!(throttled.admit(101), None);
        assert_eq!(throttled.admit(99), None, "a clock that steps back writes nothing new");
        assert_eq!(throttled.admit(105), Some(2));
    }
}
