//! Retention of texts (`retention.texts`): the texts of the messages people sent, and of the
//! replies, prompts and notices sent to them, overwritten once they are older than the cut, in
//! small transactions, tenant by tenant. What the gateway may still need is never touched: a
//! message whose command has not ended, a reply not yet sent, a prompt still waiting for its
//! answer. The rows themselves, and the evidence (which never held a text), stay.

use std::collections::BTreeMap;

use sqlx::AssertSqlSafe;
use time::OffsetDateTime;

use crate::domain::evidence::EvidenceDraft;
use crate::store::evidence::append_all;
use crate::store::retention_pace::Pace;
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
