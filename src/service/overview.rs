//! The figures the console's overview draws: the tenant's commands per minute over the last
//! hour by how they stand, and how long finished ones took, from the store (so every instance
//! on one database draws the same picture).

use serde::Serialize;
use time::OffsetDateTime;

use crate::domain::command::TenantId;
use crate::domain::lifecycle::{CommandKind, State};
use crate::service::database::Database;
use crate::store::StoreError;

/// The window the overview covers.
pub const WINDOW_MINUTES: i64 = 60;
/// At most this many finished commands feed the percentiles (the newest).
const LATENCY_SAMPLE: i64 = 20_000;

/// How a command stands, as the overview groups them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    Executed,
    Failed,
    Refused,
    Canceled,
    Compensated,
    InProgress,
}

impl Standing {
    pub const ALL: [Standing; 6] = [
        Standing::Executed,
        Standing::Failed,
        Standing::Refused,
        Standing::Canceled,
        Standing::Compensated,
        Standing::InProgress,
    ];

    pub fn of(state: State) -> Self {
        match state {
            State::Executed => Self::Executed,
            State::Failed => Self::Failed,
            State::Rejected => Self::Refused,
            State::Canceled => Self::Canceled,
            State::Compensated => Self::Compensated,
            _ => Self::InProgress,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Executed => "executed",
            Self::Failed => "failed",
            Self::Refused => "refused",
            Self::Canceled => "canceled",
            Self::Compensated => "compensated",
            Self::InProgress => "in progress",
        }
    }
}

/// One minute of the window: how many commands received then stand each way now.
#[derive(Debug, Clone, Serialize)]
pub struct Minute {
    pub start: OffsetDateTime,
    /// In the order of [`Standing::ALL`].
    pub counts: [i64; 6],
}

impl Minute {
    pub fn total(&self) -> i64 {
        self.counts.iter().sum()
    }
}

/// From received to ended, in milliseconds, over the finished commands of the window.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Latency {
    pub finished: usize,
    pub p50_ms: Option<i64>,
    pub p95_ms: Option<i64>,
    pub p99_ms: Option<i64>,
    pub max_ms: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Overview {
    pub minutes: Vec<Minute>,
    pub totals: [i64; 6],
    pub latency: Latency,
    /// The latency of reads, which no person answers on their way: the machine's part.
    pub latency_reads: Latency,
    pub intake: Intake,
}

/// The inbox now, for the whole deployment (messages find their tenant at admission).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Intake {
    /// Messages stored and not yet admitted.
    pub backlog: i64,
    /// How long the oldest of them has waited: the admission lag now.
    pub lag_ms: Option<i64>,
    /// Messages parked for a tenant's identity resolver (not in the backlog: they wait for its
    /// answer, not for admission).
    pub parked: i64,
}

pub async fn overview(database: &Database, tenant: &TenantId, now: OffsetDateTime) -> Result<Overview, StoreError> {
    let store = database.store();
    let this_minute = now.unix_timestamp().div_euclid(60);
    let first = this_minute - (WINDOW_MINUTES - 1);
    let since = OffsetDateTime::from_unix_timestamp(first * 60).unwrap_or(now);
    let mut minutes: Vec<Minute> = (first..=this_minute)
        .map(|m| Minute { start: OffsetDateTime::from_unix_timestamp(m * 60).unwrap_or(now), counts: [0; 6] })
        .collect();
    let mut totals = [0; 6];
    for count in store.console().per_minute(tenant, since).await? {
        let slot = Standing::ALL.iter().position(|s| *s == Standing::of(count.state)).unwrap_or(5);
        if let Some(minute) = usize::try_from(count.minute - first).ok().and_then(|i| minutes.get_mut(i)) {
            minute.counts[slot] += count.count;
        }
        totals[slot] += count.count;
    }
    let finished = store.console().finished(tenant, since, LATENCY_SAMPLE).await?;
    let all: Vec<i64> = finished.iter().map(|f| f.ended_ms - f.received_ms).collect();
    let reads: Vec<i64> =
        finished.iter().filter(|f| f.command_kind == CommandKind::Read).map(|f| f.ended_ms - f.received_ms).collect();
    let (backlog, oldest) = store.inbox().backlog().await?;
    let lag_ms = oldest.map(|at| (now - at).whole_milliseconds().max(0) as i64);
    let intake = Intake { backlog, lag_ms, parked: store.inbox().parked().await? };
    Ok(Overview { minutes, totals, latency: latency(all), latency_reads: latency(reads), intake })
}

/// Nearest-rank percentiles.
fn latency(mut millis: Vec<i64>) -> Latency {
    millis.sort_unstable();
    let rank = |p: f64| -> Option<i64> {
        let n = millis.len();
        if n == 0 {
            return None;
        }
        let index = ((p / 100.0) * n as f64).ceil() as usize;
        millis.get(index.clamp(1, n) - 1).copied()
    };
    Latency {
        finished: millis.len(),
        p50_ms: rank(50.0),
        p95_ms: rank(95.0),
        p99_ms: rank(99.0),
        max_ms: millis.last().copied(),
    }
}

#[cfg(test)]
mod tests {
    use super::latency;

    #[test]
    fn nearest_rank_percentiles() {
        let l = latency((1..=100).rev().collect());
        assert_eq!(
            (l.p50_ms, l.p95_ms, l.p99_ms, l.max_ms, l.finished),
            (Some(50), Some(95), Some(99), Some(100), 100)
        );
        assert_eq!(latency(vec![]).p50_ms, None);
        assert_eq!(latency(vec![7]).p99_ms, Some(7));
    }
}
