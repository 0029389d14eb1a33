//! How a purge paces its transactions, and the transactions of one place of a pass: each sized
//! to hold the writers no longer than an aim, begun only when no writer holds or waits for the
//! write gate (SQLite), and followed by a pause that leaves the pipeline the rest of the time.
//! The purge (`retention`, `retention_records`, `retention_chain`) and the clean-up's deletes
//! (`tidy`) go at this pace.

use std::time::{Duration, Instant};

use crate::config::RetentionConfig;
use crate::store::{Store, StoreError};

/// How a purge paces its transactions (`retention.batch`, `retention.transaction_ms`,
/// `retention.share`): each is made as small as it must be to end within `aim` (a pipeline's
/// commit that comes meanwhile waits for it on SQLite, so its length is what a reply can lose),
/// and before each the purge waits so long that they take at most `share` of the time, so that
/// the pipeline's commits pass between them.
#[derive(Debug, Clone)]
pub struct Pace {
    /// The most rows a transaction takes (a tenth as many commands, each with its rows).
    most: u32,
    /// Rows the next transaction takes: fewer after one that outlasted `aim`, more (up to
    /// `most`) after a full one that ended well within it.
    rows: u32,
    aim: Duration,
    share: f64,
    /// What the last transaction earned.
    pause: Duration,
}

/// Rows the first transaction of a pass takes at most, before the pace has seen one end.
const FIRST_ROWS: u32 = 50;

impl Pace {
    /// The pace `[retention]` sets (`batch`, `transaction_ms`, `share`).
    pub fn of(config: &RetentionConfig) -> Self {
        Self::new(config.batch, Duration::from_millis(config.transaction_ms), config.share)
    }

    pub fn new(most: u32, aim: Duration, share: f64) -> Self {
        let most = most.max(1);
        let share = share.clamp(f64::MIN_POSITIVE, 1.0);
        Self {
            most,
            rows: most.min(FIRST_ROWS),
            aim: aim.max(Duration::from_micros(100)),
            share,
            pause: Duration::ZERO,
        }
    }

    /// The pause after a transaction that `took` so long: with it, the share of the time it took.
    fn earned(&self, took: Duration) -> Duration {
        took.mul_f64((1.0 - self.share) / self.share)
    }

    /// The size of the next transaction once one of `rows` rows took `took` and was `full`:
    /// scaled towards `aim` (at most halved or doubled at once, so that one slow commit, a
    /// checkpoint say, does not swing it), never below `floor` rows (one command's worth).
    fn resized(&mut self, took: Duration, full: bool, floor: u32) {
        let ratio = self.aim.as_secs_f64() / took.as_secs_f64().max(1e-6);
        let ratio = if full { ratio.clamp(0.5, 2.0) } else { ratio.clamp(0.5, 1.0) };
        let rows = (f64::from(self.rows) * ratio).round() as u32;
        self.rows = rows.clamp(floor.min(self.most), self.most);
    }
}

/// A query of the purge's, run on a reader.
pub(crate) type Probe<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>;

/// The database a purge's transactions write to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Door {
    Main,
    /// The inbox's (on SQLite a file of its own, with its own writers).
    Inbox,
}

/// What one transaction of a purge took: how many units, and whether it stopped early for a
/// writer that waited for the gate (more may be left however few it took).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Taken {
    pub units: u64,
    pub yielded: bool,
}

/// A purge's transactions at one place, one at a time until one takes less than it may.
pub(crate) struct Batches<'p> {
    door: Door,
    pace: &'p mut Pace,
    /// Rows per unit a transaction takes (10 for commands, each with its rows; 1 for rows).
    per: u32,
    /// Units the transaction under way may take.
    limit: u64,
    more: bool,
    started: Instant,
    /// When the transaction under way had the writers (its own time, without the wait for them).
    working: Instant,
}

impl Batches<'_> {
    /// The next transaction, begun, with how many units it may take: none once the last took
    /// fewer than it could (or the probe found no work). Before it, the pause the last one earned.
    /// Only one until [`Batches::took`] says it was full: a loop that never says so stops after it.
    pub(crate) async fn next(&mut self, store: &Store) -> Result<Option<(crate::store::Tx, i64)>, StoreError> {
        if !std::mem::take(&mut self.more) {
            return Ok(None);
        }
        tokio::time::sleep(self.pace.pause).await;
        self.started = Instant::now();
        let tx = match self.door {
            Door::Main => store.begin_when_idle(PATIENCE).await?,
            Door::Inbox => store.begin_inbox_when_idle(PATIENCE).await?,
        };
        self.working = Instant::now();
        self.limit = u64::from((self.pace.rows / self.per).max(1));
        Ok(Some((tx, self.limit as i64)))
    }

    /// The transaction [`Batches::next`] began took `taken` units (committed). Its pause counts
    /// the time it waited for the writers too, so that a busy pipeline slows the purge down; its
    /// size only its own time.
    pub(crate) fn took(&mut self, taken: u64) {
        self.ended(Taken { units: taken, yielded: false });
    }

    /// [`Batches::took`], for a transaction that may have stopped early for a writer that waited
    /// (then the next one goes on where it stopped, and its size does not grow).
    pub(crate) fn ended(&mut self, taken: Taken) {
        let (full, held) = (taken.units >= self.limit, self.working.elapsed());
        metrics::histogram!("chatgate_retention_transaction_seconds").record(held.as_secs_f64());
        self.pace.pause = self.pace.earned(self.started.elapsed());
        self.pace.resized(held, full, self.per);
        self.more = full || taken.yielded;
    }
}

/// How long a purge's transaction looks for a moment the writers are idle before it waits its
/// turn like any other ([`Store::begin_when_idle`]).
const PATIENCE: Duration = Duration::from_millis(500);

impl Store {
    /// The batches of a purge's work, `per` rows a unit, that `probe` finds: looked for first on
    /// a reader, so that the writers are taken only when there is work.
    pub(crate) async fn batches<'p>(
        &self,
        probe: Probe<'_>,
        per: u32,
        pace: &'p mut Pace,
    ) -> Result<Batches<'p>, StoreError> {
        self.batches_at(Door::Main, probe, per, pace).await
    }

    /// [`Store::batches`] in the database `door` names.
    pub(crate) async fn batches_at<'p>(
        &self,
        door: Door,
        probe: Probe<'_>,
        per: u32,
        pace: &'p mut Pace,
    ) -> Result<Batches<'p>, StoreError> {
        let pool = match door {
            Door::Main => self.unhurried_pool(),
            Door::Inbox => self.inbox_pool(),
        };
        let more = probe.fetch_optional(pool).await?.is_some();
        let now = Instant::now();
        Ok(Batches { door, pace, per: per.max(1), limit: 0, more, started: now, working: now })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pace(share: f64) -> Pace {
        Pace::new(500, Duration::from_millis(5), share)
    }

    #[test]
    fn a_transaction_earns_the_pause_that_leaves_it_its_share() {
        let took = Duration::from_millis(20);
        assert_eq!(pace(0.25).earned(took), Duration::from_millis(60));
        assert_eq!(pace(0.5).earned(took), took);
        assert_eq!(pace(1.0).earned(took), Duration::ZERO, "all of the time: no pause");
    }

    #[test]
    fn a_transaction_is_sized_to_end_within_its_aim() {
        let mut pace = pace(0.25);
        assert_eq!(pace.rows, FIRST_ROWS, "a pass starts small");
        pace.resized(Duration::from_millis(1), true, 10);
        assert_eq!(pace.rows, 100, "a full one well within the aim: at most twice as many");
        pace.resized(Duration::from_millis(4), true, 10);
        assert_eq!(pace.rows, 125, "scaled towards the aim");
        pace.resized(Duration::from_millis(1), false, 10);
        assert_eq!(pace.rows, 125, "one that was not full says nothing about more");
        pace.resized(Duration::from_millis(50), true, 10);
        assert_eq!(pace.rows, 63, "one that outlasted it: at most halved at once");
        for _ in 0..10 {
            pace.resized(Duration::from_secs(1), true, 10);
        }
        assert_eq!(pace.rows, 10, "never below one command's rows");
        for _ in 0..20 {
            pace.resized(Duration::from_micros(10), true, 10);
        }
        assert_eq!(pace.rows, 500, "never above retention.batch");
    }

    #[tokio::test]
    async fn a_transaction_that_stopped_for_a_writer_is_followed_by_one_that_goes_on() {
        let (_folder, store) = Store::scratch().await;
        let mut pace = Pace::new(10, Duration::from_secs(1), 1.0);
        let now = Instant::now();
        let mut batches =
            Batches { door: Door::Main, pace: &mut pace, per: 1, limit: 0, more: true, started: now, working: now };
        let (tx, limit) = batches.next(&store).await.expect("a transaction").expect("work");
        tx.commit().await.expect("commit");
        batches.ended(Taken { units: limit as u64 - 7, yielded: true });
        assert_eq!(batches.pace.rows, 10, "one cut short does not grow the next");
        let (tx, _) = batches.next(&store).await.expect("a transaction").expect("it goes on where it stopped");
        tx.commit().await.expect("commit");
        batches.ended(Taken { units: 3, yielded: false });
        assert!(batches.next(&store).await.expect("no transaction").is_none(), "fewer, with no writer waiting: done");
    }

    #[tokio::test]
    async fn batches_go_on_while_each_is_full_and_start_only_where_the_probe_found_work() {
        let (_folder, store) = Store::scratch().await;
        let mut pace = Pace::new(10, Duration::from_secs(1), 1.0);
        let now = Instant::now();
        let mut batches =
            Batches { door: Door::Main, pace: &mut pace, per: 1, limit: 0, more: true, started: now, working: now };
        let (tx, limit) = batches.next(&store).await.expect("a transaction").expect("the probe found work");
        assert_eq!(limit, 10);
        tx.commit().await.expect("commit");
        batches.took(10);
        let (tx, limit) = batches.next(&store).await.expect("a transaction").expect("a full batch: more may be left");
        tx.commit().await.expect("commit");
        batches.took(limit as u64 - 1);
        assert!(batches.next(&store).await.expect("no transaction").is_none(), "fewer than a full batch: done");
        let mut batches =
            Batches { door: Door::Main, pace: &mut pace, per: 1, limit: 0, more: false, started: now, working: now };
        assert!(batches.next(&store).await.expect("no transaction").is_none(), "the probe found nothing");
    }
}
