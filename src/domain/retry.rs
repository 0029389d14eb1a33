//! When to try again: exponential backoff with jitter, capped, honouring a server's
//! `Retry-After`, and a limit on attempts. Pure, so that it is tested without waiting.

use std::time::Duration;

use rand::Rng;
use time::OffsetDateTime;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included; after the last the effect is given up (and kept).
    pub max_attempts: u32,
    pub initial: Duration,
    pub max: Duration,
}

impl RetryPolicy {
    /// The wait after failed attempt number `attempt` (1-based), or `None` when it was the last.
    /// The wait is drawn from the upper half of the exponential step ("equal jitter"): senders
    /// that failed together do not come back together, and none comes back much sooner than
    /// the step. A `Retry-After` is a floor, capped at `max`.
    pub fn next_delay(&self, attempt: u32, retry_after: Option<Duration>) -> Option<Duration> {
        if attempt >= self.max_attempts {
            return None;
        }
        let step = self.initial.saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1))).min(self.max);
        let half = step / 2;
        let jitter = if half.is_zero() { Duration::ZERO } else { rand::rng().random_range(Duration::ZERO..=half) };
        let delay = half + jitter;
        Some(match retry_after {
            Some(floor) => delay.max(floor.min(self.max)),
            None => delay,
        })
    }
}

/// A `Retry-After` header: delay-seconds or an HTTP date (RFC 9110 §10.2.3).
pub fn parse_retry_after(value: &str, now: OffsetDateTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = OffsetDateTime::parse(value, &time::format_description::well_known::Rfc2822).ok()?;
    Some(Duration::try_from(at - now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: RetryPolicy =
        RetryPolicy { max_attempts: 5, initial: Duration::from_millis(100), max: Duration::from_millis(1000) };

    #[test]
    fn delays_grow_exponentially_within_the_jitter_band_and_stop_at_the_cap_and_the_limit() {
        for _ in 0..100 {
            for (attempt, step) in [(1, 100), (2, 200), (3, 400), (4, 800)] {
                let delay = POLICY.next_delay(attempt, None).expect("more attempts").as_millis();
                assert!((step / 2..=step).contains(&delay), "attempt {attempt}: {delay} ms");
            }
        }
        let long = RetryPolicy { max_attempts: 50, ..POLICY };
        assert!(long.next_delay(30, None).expect("more") <= Duration::from_millis(1000));
        assert_eq!(POLICY.next_delay(5, None), None, "the fifth attempt was the last");
    }

    #[test]
    fn retry_after_is_a_floor_capped_at_the_maximum() {
        let floor = POLICY.next_delay(1, Some(Duration::from_millis(700))).expect("more");
        assert!(floor >= Duration::from_millis(700));
        let capped = POLICY.next_delay(1, Some(Duration::from_secs(3600))).expect("more");
        assert_eq!(capped, Duration::from_millis(1000));
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = OffsetDateTime::from_unix_timestamp(784_111_777).expect("time"); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(parse_retry_after("2", now), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:40 GMT", now), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:30 GMT", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
    }
}
