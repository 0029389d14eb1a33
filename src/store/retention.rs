//! Retention of texts (`retention.texts`): the texts of the messages people sent, and of the
//! replies, prompts and notices sent to them, overwritten once they are older than the cut, in
//! small transactions, tenant by tenant. What the gateway may still need is never touched: a
//! message whose command has not ended, a reply not yet sent, a prompt still waiting for its
//! answer. The rows themselves, and the evidence (which never held a text), stay.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use sqlx::AssertSqlSafe;
use time::OffsetDateTime;

use crate::domain::evidence::EvidenceDraft;
use crate::store::evidence::append_all;
use crate::store::rows::{int, to_ms};
use crate::store::{Store, StoreError};

/// The marker's text as a literal, so that the statements below are built from it.
macro_rules! expired {
    () => {
        r#"{"expired":true}"#
    };
}

/// A text once its retention ended.
pub const EXPIRED_PAYLOAD: &str = expired!();

/// What a purge overwrote (or, as a dry run, would overwrite).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PurgedTexts {
    /// Messages people sent.
    pub messages: u64,
    /// Replies, prompts and notices sent to them (the outbox's texts, never a dispatch).
    pub replies: u64,
    /// Confirmations' prompts kept to be sent again to a duplicate.
    pub prompts: u64,
}

impl PurgedTexts {
    pub fn total(&self) -> u64 {
        self.messages + self.replies + self.prompts
    }

    pub fn add(&mut self, other: &PurgedTexts) {
        self.messages += other.messages;
        self.replies += other.replies;
        self.prompts += other.prompts;
    }
}

/// One place texts are kept: its table, what overwrites the text, which rows may be overwritten
/// (the migration `0033_retention` indexes exactly those by `at`).
struct Place {
    table: &'static str,
    set: &'static str,
    kept: &'static str,
    at: &'static str,
}

/// Of no command, or of one that has ended: a command under way may still need its texts.
macro_rules! of_ended_command {
    ($table:literal) => {
        concat!(
            " AND NOT EXISTS (SELECT 1 FROM commands c WHERE c.command_id = ",
            $table,
            ".command_id AND c.state NOT IN ('executed', 'failed', 'rejected', 'canceled', 'compensated'))"
        )
    };
}

const MESSAGES: Place = Place {
    table: "inbound_messages",
    set: concat!("payload = '", expired!(), "', answer = NULL, detail = NULL"),
    kept: concat!("payload <> '", expired!(), "'", of_ended_command!("inbound_messages")),
    at: "received_at",
};
const REPLIES: Place = Place {
    table: "outbox",
    set: concat!("payload = '", expired!(), "'"),
    kept: concat!(
        "payload <> '",
        expired!(),
        "' AND kind <> 'dispatch' AND status <> 'pending'",
        of_ended_command!("outbox")
    ),
    at: "created_at",
};
const PROMPTS: Place = Place {
    table: "confirmations",
    set: concat!("prompt = '", expired!(), "'"),
    kept: concat!("prompt <> '", expired!(), "' AND status <> 'pending'", of_ended_command!("confirmations")),
    at: "created_at",
};

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

/// A purge's transactions at one place, one at a time until one takes less than it may.
pub(crate) struct Batches<'p> {
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
        let tx = store.begin_when_idle(PATIENCE).await?;
        self.working = Instant::now();
        self.limit = u64::from((self.pace.rows / self.per).max(1));
        Ok(Some((tx, self.limit as i64)))
    }

    /// The transaction [`Batches::next`] began took `taken` units (committed). Its pause counts
    /// the time it waited for the writers too, so that a busy pipeline slows the purge down; its
    /// size only its own time.
    pub(crate) fn took(&mut self, taken: u64) {
        let (full, held) = (taken >= self.limit, self.working.elapsed());
        metrics::histogram!("chatgate_retention_transaction_seconds").record(held.as_secs_f64());
        self.pace.pause = self.pace.earned(self.started.elapsed());
        self.pace.resized(held, full, self.per);
        self.more = full;
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
        let more = probe.fetch_optional(self.pool()).await?.is_some();
        let now = Instant::now();
        Ok(Batches { pace, per: per.max(1), limit: 0, more, started: now, working: now })
    }
}

/// Counts by tenant (`None`: messages of no tenant).
pub type ByTenant = BTreeMap<Option<String>, PurgedTexts>;

/// Which count of [`PurgedTexts`] a place's rows add to.
type Counted = fn(&mut PurgedTexts) -> &mut u64;

const PLACES: [(Place, Counted); 3] =
    [(MESSAGES, |p| &mut p.messages), (REPLIES, |p| &mut p.replies), (PROMPTS, |p| &mut p.prompts)];

/// Whose texts a purge reaches.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    /// One tenant's, under its own retention.
    Tenant(&'a str),
    /// Every other tenant's, and those of no tenant, under `[retention]`'s.
    AllBut(&'a [String]),
}

impl Scope<'_> {
    /// The condition, its marks numbered from `$first`.
    fn clause(&self, first: usize) -> String {
        match self {
            Self::Tenant(_) => format!(" AND tenant_id = ${first}"),
            Self::AllBut([]) => String::new(),
            Self::AllBut(others) => {
                let marks = (first..first + others.len()).map(|n| format!("${n}")).collect::<Vec<_>>();
                format!(" AND (tenant_id IS NULL OR tenant_id NOT IN ({}))", marks.join(", "))
            }
        }
    }

    /// What the condition's marks take, in order.
    fn tenants(&self) -> Vec<String> {
        match self {
            Self::Tenant(tenant) => vec![(*tenant).to_owned()],
            Self::AllBut(others) => others.to_vec(),
        }
    }
}

impl Store {
    /// Counts, by tenant, the texts older than `before` that a purge would overwrite (or delete with
    /// their rows, where their records are past their retention too).
    pub async fn count_old_texts(&self, scope: Scope<'_>, before: OffsetDateTime) -> Result<ByTenant, StoreError> {
        let mut counts = ByTenant::new();
        for (place, counted) in PLACES {
            let sql = format!(
                "SELECT tenant_id, COUNT(*) AS n FROM {} WHERE {}{} GROUP BY tenant_id",
                place.table,
                old(&place),
                scope.clause(2)
            );
            let query = sqlx::query(AssertSqlSafe(sql)).bind(to_ms(before));
            let query = scope.tenants().into_iter().fold(query, |query, tenant| query.bind(tenant));
            let rows = query.fetch_all(self.pool()).await?;
            for row in &rows {
                let tenant: Option<String> = sqlx::Row::try_get(row, "tenant_id")?;
                *counted(counts.entry(tenant).or_default()) += int(row, "n")?.max(0) as u64;
            }
        }
        Ok(counts)
    }

    /// Overwrites the texts older than `before`, at `pace`, and says whose.
    pub async fn purge_old_texts(
        &self,
        scope: Scope<'_>,
        before: OffsetDateTime,
        pace: &mut Pace,
    ) -> Result<ByTenant, StoreError> {
        let mut purged = ByTenant::new();
        for (place, counted) in PLACES {
            let sql = format!(
                "UPDATE {table} SET {set} WHERE id IN (SELECT id FROM {table} WHERE {old}{scope} LIMIT $2)
                 RETURNING tenant_id",
                table = place.table,
                set = place.set,
                old = old(&place),
                scope = scope.clause(3),
            );
            let probe = format!("SELECT 1 FROM {} WHERE {}{} LIMIT 1", place.table, old(&place), scope.clause(2));
            let probe = sqlx::query(AssertSqlSafe(probe)).bind(to_ms(before));
            let probe = scope.tenants().into_iter().fold(probe, |query, tenant| query.bind(tenant));
            let mut batches = self.batches(probe, 1, pace).await?;
            while let Some((mut tx, limit)) = batches.next(self).await? {
                let query = sqlx::query_scalar(AssertSqlSafe(sql.clone())).bind(to_ms(before)).bind(limit);
                let query = scope.tenants().into_iter().fold(query, |query, tenant| query.bind(tenant));
                let tenants: Vec<Option<String>> = query.fetch_all(&mut *tx).await?;
                tx.commit().await?;
                batches.took(tenants.len() as u64);
                for tenant in &tenants {
                    *counted(purged.entry(tenant.clone()).or_default()) += 1;
                }
            }
        }
        Ok(purged)
    }

    /// Appends one artifact about `tenant` itself to its chain (a purge's record, say).
    pub async fn record_for_tenant(&self, tenant: &str, draft: EvidenceDraft) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        append_all(&mut tx, tenant, &[draft], OffsetDateTime::now_utc()).await?;
        tx.commit().await
    }
}

/// The rows older than `$1` whose text is still kept and may go.
fn old(place: &Place) -> String {
    format!("{} < $1 AND {}", place.at, place.kept)
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
    async fn batches_go_on_while_each_is_full_and_start_only_where_the_probe_found_work() {
        let (_folder, store) = Store::scratch().await;
        let mut pace = Pace::new(10, Duration::from_secs(1), 1.0);
        let now = Instant::now();
        let mut batches = Batches { pace: &mut pace, per: 1, limit: 0, more: true, started: now, working: now };
        let (tx, limit) = batches.next(&store).await.expect("a transaction").expect("the probe found work");
        assert_eq!(limit, 10);
        tx.commit().await.expect("commit");
        batches.took(10);
        let (tx, limit) = batches.next(&store).await.expect("a transaction").expect("a full batch: more may be left");
        tx.commit().await.expect("commit");
        batches.took(limit as u64 - 1);
        assert!(batches.next(&store).await.expect("no transaction").is_none(), "fewer than a full batch: done");
        let mut batches = Batches { pace: &mut pace, per: 1, limit: 0, more: false, started: now, working: now };
        assert!(batches.next(&store).await.expect("no transaction").is_none(), "the probe found nothing");
    }
}
