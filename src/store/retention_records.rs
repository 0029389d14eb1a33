//! Retention of records (`retention.records`): the commands of a tenant that ended before the cut
//! are deleted with every row they own, a few at a time, and so are the rows of no command that
//! did their job (messages that started none, notices sent, the API's idempotency records). What
//! may still be needed is never touched: a command under way, one within its dedupe window, one a
//! later command names as its target, one with a reply or a delivery still under way.
//! `store/retention_chain.rs` then cuts the tenant's evidence chain before what is kept.

use sqlx::AssertSqlSafe;
use time::OffsetDateTime;

use crate::store::figures::Moves;
use crate::store::retention_pace::{Door, Pace, Taken};
use crate::store::rows::{int, text, to_ms};
use crate::store::{Store, StoreError, Tx};

/// What a purge of records deleted (or, as a dry run, would delete).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PurgedRecords {
    /// Commands that ended, with their transitions, confirmation, approvals, preview and locks.
    pub commands: u64,
    /// Their deliveries to executors, with each delivery's events.
    pub deliveries: u64,
    /// Messages people sent: a command's, and those that started none.
    pub messages: u64,
    /// The outbox's rows and the messages sent (a command's, and notices of none).
    pub replies: u64,
    /// The API's idempotency records.
    pub idempotency_keys: u64,
    /// Evidence artifacts cut from the tenant's chain, before its checkpoint.
    pub evidence: u64,
}

impl PurgedRecords {
    pub fn total(&self) -> u64 {
        self.rows() + self.evidence
    }

    /// The rows deleted other than evidence.
    pub fn rows(&self) -> u64 {
        self.commands + self.deliveries + self.messages + self.replies + self.idempotency_keys
    }

    pub fn add(&mut self, other: &PurgedRecords) {
        self.commands += other.commands;
        self.deliveries += other.deliveries;
        self.messages += other.messages;
        self.replies += other.replies;
        self.idempotency_keys += other.idempotency_keys;
        self.evidence += other.evidence;
    }
}

/// The commands of tenant `$1` that may go: ended before `$2`, past their dedupe window as of `$3`
/// (its record, if the clean-up has not removed it yet, has expired), named as its target by no
/// command kept, with no reply waiting to be sent and no delivery under way.
const GONE: &str = "SELECT c.command_id FROM commands c
    WHERE c.tenant_id = $1 AND c.updated_at < $2
      AND c.state IN ('executed', 'failed', 'rejected', 'canceled', 'compensated')
      AND NOT EXISTS (SELECT 1 FROM dedupe_records d WHERE d.command_id = c.command_id AND d.ttl_expires_at > $3)
      AND NOT EXISTS (SELECT 1 FROM commands t WHERE t.target_command_id = c.command_id)
      AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.command_id = c.command_id AND o.status = 'pending')
      AND NOT EXISTS (SELECT 1 FROM deliveries v WHERE v.command_id = c.command_id
                      AND v.state NOT IN ('executed', 'closed'))";

/// A command's rows, children first (`{ids}`: the commands, the texts of a JSON array bound as
/// `$1`, so that each statement is prepared once whatever the batch's size), each counted as a
/// kind of record.
const OWNED: [(&str, Counted); 13] = [
    ("DELETE FROM delivery_events WHERE delivery_id IN (SELECT id FROM deliveries WHERE command_id IN ({ids}))", None),
    ("DELETE FROM deliveries WHERE command_id IN ({ids})", Some(|p| &mut p.deliveries)),
    (
        "DELETE FROM approval_decisions WHERE approval_id IN (SELECT id FROM approvals WHERE command_id IN ({ids}))",
        None,
    ),
    ("DELETE FROM approvals WHERE command_id IN ({ids})", None),
    ("DELETE FROM command_previews WHERE command_id IN ({ids})", None),
    ("DELETE FROM resource_locks WHERE command_id IN ({ids})", None),
    ("DELETE FROM confirmations WHERE command_id IN ({ids})", None),
    ("DELETE FROM outbound_messages WHERE command_id IN ({ids})", Some(|p| &mut p.replies)),
    ("DELETE FROM outbox WHERE command_id IN ({ids})", Some(|p| &mut p.replies)),
    ("DELETE FROM inbound_messages WHERE command_id IN ({ids})", Some(|p| &mut p.messages)),
    ("DELETE FROM command_transitions WHERE command_id IN ({ids})", None),
    ("DELETE FROM dedupe_records WHERE command_id IN ({ids})", None),
    ("DELETE FROM commands WHERE command_id IN ({ids})", Some(|p| &mut p.commands)),
];

/// A table's rows of no command, deleted once they did their job and are older than the cut.
struct Unowned {
    table: &'static str,
    /// What names a row (what the delete picks rows by).
    key: &'static str,
    /// The row's time, compared with the cut.
    at: &'static str,
    /// Which rows did their job.
    done: &'static str,
    counted: Counted,
}

// A sent message's row is timed by its `created_at`, our clock when the provider took it: a
// provider's status moves its `updated_at` to the provider's time, which may lie before any cut.
static UNOWNED: [Unowned; 4] = [
    Unowned {
        table: "inbound_messages",
        key: "id",
        at: "received_at",
        done: "command_id IS NULL AND status <> 'received'",
        counted: Some(|p| &mut p.messages),
    },
    Unowned {
        table: "outbox",
        key: "id",
        at: "created_at",
        done: "command_id IS NULL AND status <> 'pending'",
        counted: Some(|p| &mut p.replies),
    },
    Unowned {
        table: "outbound_messages",
        key: "id",
        at: "created_at",
        done: "command_id IS NULL",
        counted: Some(|p| &mut p.replies),
    },
    Unowned {
        table: "api_idempotency",
        key: "(tenant_id, key)",
        at: "created_at",
        done: "status IS NOT NULL",
        counted: Some(|p| &mut p.idempotency_keys),
    },
];

/// The tables holding rows of no command of `tenant`'s; of no tenant, only messages are kept
/// (sent to a number no tenant owns).
fn unowned_of(tenant: Option<&str>) -> impl Iterator<Item = &'static Unowned> {
    UNOWNED.iter().filter(move |unowned| tenant.is_some() || unowned.table == "inbound_messages")
}

impl Unowned {
    /// Its rows of tenant `$1` (`None`: of no tenant) that did their job before `$2`.
    fn old(&self, tenant: Option<&str>, what: &str) -> String {
        let whose = match tenant {
            Some(_) => "tenant_id = $1",
            None => "tenant_id IS NULL AND $1 IS NULL",
        };
        format!("SELECT {what} FROM {} WHERE {whose} AND {} AND {} < $2", self.table, self.done, self.at)
    }

    /// Deletes up to `$3` of them.
    fn delete(&self, tenant: Option<&str>) -> String {
        let key = self.key.trim_matches(|c| c == '(' || c == ')');
        format!("DELETE FROM {} WHERE {} IN ({} LIMIT $3)", self.table, self.key, self.old(tenant, key))
    }
}

/// Which count of [`PurgedRecords`] a statement's rows add to, if any.
type Counted = Option<Count>;
/// The count of [`PurgedRecords`] a table's rows add to.
type Count = fn(&mut PurgedRecords) -> &mut u64;

impl Store {
    /// Deletes tenant's commands that ended before `before` (as of `now`) with their rows, then
    /// its rows of no command, each transaction as large as `pace` allows (a command counting
    /// for ten rows).
    pub async fn purge_old_records(
        &self,
        tenant: Option<&str>,
        before: OffsetDateTime,
        now: OffsetDateTime,
        pace: &mut Pace,
    ) -> Result<PurgedRecords, StoreError> {
        let mut purged = PurgedRecords::default();
        if let Some(tenant) = tenant {
            let probe = sqlx::query(AssertSqlSafe(format!("{GONE} LIMIT 1")));
            let probe = probe.bind(tenant).bind(to_ms(before)).bind(to_ms(now));
            let mut batches = self.batches(probe, ROWS_PER_COMMAND, pace).await?;
            let owned = Owned::in_dialect(self.dialect().texts_of_list());
            while let Some((tx, commands)) = batches.next(self).await? {
                let gone = Gone { tenant, before, now, limit: commands };
                batches.ended(purge_commands(self, tx, gone, &owned, &mut purged).await?);
            }
        }
        for unowned in unowned_of(tenant) {
            let sql = unowned.delete(tenant);
            let probe = sqlx::query(AssertSqlSafe(format!("{} LIMIT 1", unowned.old(tenant, "1"))));
            let probe = probe.bind(tenant).bind(to_ms(before));
            let delete = |limit| sqlx::query(AssertSqlSafe(sql.clone())).bind(tenant).bind(to_ms(before)).bind(limit);
            let deleted = self.delete_paced(Door::Main, probe, delete, pace).await?;
            if let Some(counted) = unowned.counted {
                *counted(&mut purged) += deleted;
            }
        }
        Ok(purged)
    }

    /// Counts what [`Store::purge_old_records`] would delete of tenant's (the commands a pass
    /// could take now: one named as a target by another going goes in the pass after).
    pub async fn count_old_records(
        &self,
        tenant: Option<&str>,
        before: OffsetDateTime,
        now: OffsetDateTime,
    ) -> Result<PurgedRecords, StoreError> {
        let mut counts = PurgedRecords::default();
        if tenant.is_some() {
            let owned: [(&str, Count); 5] = [
                ("commands", |p| &mut p.commands),
                ("deliveries", |p| &mut p.deliveries),
                ("inbound_messages", |p| &mut p.messages),
                ("outbox", |p| &mut p.replies),
                ("outbound_messages", |p| &mut p.replies),
            ];
            for (table, counted) in owned {
                let sql = format!("SELECT COUNT(*) AS n FROM {table} WHERE command_id IN ({GONE})");
                let query = sqlx::query(AssertSqlSafe(sql)).bind(tenant).bind(to_ms(before)).bind(to_ms(now));
                *counted(&mut counts) += int(&query.fetch_one(self.pool()).await?, "n")?.max(0) as u64;
            }
        }
        for unowned in unowned_of(tenant) {
            let Some(counted) = unowned.counted else { continue };
            let query = sqlx::query(AssertSqlSafe(unowned.old(tenant, "COUNT(*) AS n")));
            let row = query.bind(tenant).bind(to_ms(before)).fetch_one(self.pool()).await?;
            *counted(&mut counts) += int(&row, "n")?.max(0) as u64;
        }
        Ok(counts)
    }
}

/// Which of a tenant's commands one transaction of a purge deletes: ended before `before`, as
/// of `now`, at most `limit`.
struct Gone<'a> {
    tenant: &'a str,
    before: OffsetDateTime,
    now: OffsetDateTime,
    limit: i64,
}

/// [`OWNED`]'s statements as a backend runs them, and the deliveries' figures' read.
struct Owned {
    deliveries: String,
    statements: Vec<(String, Counted)>,
}

impl Owned {
    /// With `list` (the dialect's rows of a JSON array's texts) in place of `{ids}`.
    fn in_dialect(list: &str) -> Self {
        let deliveries = format!("SELECT state, outcome, updated_at FROM deliveries WHERE command_id IN ({list})");
        let statements = OWNED.iter().map(|(statement, counted)| (statement.replace("{ids}", list), *counted));
        Self { deliveries, statements: statements.collect() }
    }
}

/// About how many rows a command has ([`OWNED`]'s tables), for the purge's pace.
const ROWS_PER_COMMAND: u32 = 10;

/// Commands deleted together with their rows, after which a transaction looks whether a writer
/// waits: few enough that the writer waits a moment, enough that the statements stay few.
const COMMANDS_AT_ONCE: usize = 8;

/// In `tx`: up to `limit` commands that may go, with their rows, a few at a time; once a writer
/// waits for the gate (SQLite), it commits those deleted so far and lets it through. Returns how
/// many it deleted, and whether it stopped for a writer before it deleted all it found.
async fn purge_commands(
    store: &Store,
    mut tx: Tx,
    gone: Gone<'_>,
    owned: &Owned,
    purged: &mut PurgedRecords,
) -> Result<Taken, StoreError> {
    let Gone { tenant, before, now, limit } = gone;
    let select = format!("{GONE} LIMIT $4");
    let ids: Vec<String> = sqlx::query_scalar(AssertSqlSafe(select))
        .bind(tenant)
        .bind(to_ms(before))
        .bind(to_ms(now))
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
    let mut taken = 0;
    for commands in ids.chunks(COMMANDS_AT_ONCE) {
        delete_commands(&mut tx, commands, owned, purged).await?;
        taken += commands.len();
        if store.writers_wait() {
            break;
        }
    }
    tx.commit().await?;
    Ok(Taken { units: taken as u64, yielded: taken < ids.len() })
}

/// In `tx`: `ids`, commands, with every row they own.
async fn delete_commands(
    tx: &mut Tx,
    ids: &[String],
    owned: &Owned,
    purged: &mut PurgedRecords,
) -> Result<(), StoreError> {
    let list = serde_json::to_string(ids).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    // The figures `/metrics` shows count deliveries: those deleted leave them with their rows.
    let deliveries = sqlx::query(AssertSqlSafe(owned.deliveries.clone())).bind(&list).fetch_all(&mut **tx).await?;
    let deleted = deliveries
        .iter()
        .map(|row| Ok((text(row, "state")?, sqlx::Row::try_get(row, "outcome")?, int(row, "updated_at")?)));
    tx.figures.merge(Moves::of_deleted_deliveries(deleted.collect::<Result<Vec<_>, StoreError>>()?));
    for (statement, counted) in &owned.statements {
        let deleted =
            sqlx::query(AssertSqlSafe(statement.clone())).bind(&list).execute(&mut **tx).await?.rows_affected();
        if let Some(counted) = counted {
            *counted(purged) += deleted;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A purge of commands reads every table through an index on the commands' ids, once per
    /// statement whatever the batch's size; a `SCAN` would read a table's whole history per batch.
    #[tokio::test]
    async fn each_statement_of_a_command_purge_searches_by_the_commands_ids() {
        let (_folder, store) = Store::scratch().await;
        store.migrate().await.expect("migrated");
        let owned = Owned::in_dialect(store.dialect().texts_of_list());
        for sql in std::iter::once(&owned.deliveries).chain(owned.statements.iter().map(|(sql, _)| sql)) {
            let plan = sqlx::query(AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}"))).bind("[\"a\", \"b\"]");
            let rows = plan.fetch_all(store.pool()).await.expect("a plan");
            let steps: Vec<String> = rows.iter().map(|row| text(row, "detail").expect("detail")).collect();
            let scans = steps.iter().filter(|step| step.starts_with("SCAN") && !step.contains("json_each"));
            assert_eq!(scans.count(), 0, "{sql}\n{steps:#?}");
            assert!(steps.iter().any(|step| step.starts_with("SEARCH")), "{sql}\n{steps:#?}");
        }
    }
}
