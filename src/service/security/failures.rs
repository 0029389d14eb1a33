//! Failed authentications per client address, as OpenClaw's hook endpoint counts them: after
//! `limit` failures within a window, further failures from that address are throttled (429 with
//! `Retry-After`) instead of answered 401; a valid authentication clears the address's count.
//! Kept in this process (as OpenClaw keeps it), bounded in the addresses it remembers.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most this many addresses are remembered; past it the oldest windows are forgotten.
const MOST_CLIENTS: usize = 10_000;

#[derive(Debug)]
pub struct FailureWindow {
    limit: u32,
    window: Duration,
    by_client: Mutex<HashMap<String, (Instant, u32)>>,
}

impl FailureWindow {
    pub fn new(limit: u32, window: Duration) -> Self {
        Self { limit, window, by_client: Mutex::new(HashMap::new()) }
    }

    /// Counts a failure from `client`: `Err(wait)` when it is past the limit (throttled).
    pub fn failed(&self, client: &str, now: Instant) -> Result<(), Duration> {
        let mut clients = self.by_client.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if clients.len() >= MOST_CLIENTS {
            clients.retain(|_, (start, _)| now.duration_since(*start) < self.window);
        }
        let entry = clients.entry(client.to_owned()).or_insert((now, 0));
        if now.duration_since(entry.0) >= self.window {
            *entry = (now, 0);
        }
        entry.1 += 1;
        if entry.1 > self.limit {
            return Err(self.window.saturating_sub(now.duration_since(entry.0)).max(Duration::from_secs(1)));
        }
        Ok(())
    }

    /// A valid authentication from `client`: its count starts again.
    pub fn succeeded(&self, client: &str) {
        self.by_client.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(client);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twenty_failures_then_throttled_until_the_window_ends_or_one_succeeds() {
        let window = FailureWindow::new(20, Duration::from_secs(60));
        let start = Instant::now();
        for _ in 0..20 {
            assert_eq!(window.failed("10.0.0.1", start), Ok(()));
        }
        let wait = window.failed("10.0.0.1", start + Duration::from_secs(10)).expect_err("throttled");
        assert_eq!(wait, Duration::from_secs(50));
        assert_eq!(window.failed("10.0.0.2", start), Ok(()), "each address its own count");
        assert_eq!(window.failed("10.0.0.1", start + Duration::from_secs(61)), Ok(()), "a new window");
        for _ in 0..25 {
            let _ = window.failed("10.0.0.3", start);
        }
        window.succeeded("10.0.0.3");
        assert_eq!(window.failed("10.0.0.3", start), Ok(()), "a valid token clears the count");
    }
}
