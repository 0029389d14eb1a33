//! Issue 31: a batch's lookup by key reads the rows of its batch, whatever the tables keep. Each
//! of the store's [`chatgate::store::KEY_LOOKUPS`] is answered from an index that leads with its
//! key: one that SQLite answered from another index's prefix (the outbox's `kind`, say) read
//! every row the outbox ever held for that kind, once per dispatcher batch.

use crate::helpers::{Backend, TestDb};

#[tokio::test]
async fn every_batch_lookup_searches_by_its_key() {
    let db = TestDb::new(Backend::Sqlite).await.expect("sqlite");
    for lookup in chatgate::store::KEY_LOOKUPS {
        let sql = lookup.sqlite_statement(3);
        let steps = db.plan(&sql, 3).await;
        let by_key = format!("({}=?)", lookup.column);
        let searched = !steps.is_empty() && steps.iter().all(|s| s.starts_with("SEARCH") && s.contains(&by_key));
        assert!(searched, "not searched by `{}`: {sql}\n{steps:#?}", lookup.column);
    }
}

/// The timers' sweeps read what is under way through an index; a `SCAN` would read every
/// delivery ever made, once a second.
#[tokio::test]
async fn every_sweep_reads_through_an_index() {
    let db = TestDb::new(Backend::Sqlite).await.expect("sqlite");
    for sql in chatgate::store::SWEEP_QUERIES {
        let steps = db.plan(sql, 2).await;
        assert!(steps.iter().all(|s| !s.starts_with("SCAN")), "a sweep reads a whole table: {sql}\n{steps:#?}");
    }
}

/// The same lookups on PostgreSQL, on a database without statistics (a young one, or a server
/// with autovacuum off, as this project's CI runs): each key is searched in an index, whatever
/// the planner guesses of the table. An `IN` list of a batch's keys was read as a whole-table
/// scan there (a key taken for 0.5% of the table), once per batch, in proportion to the table's
/// history (issue #49).
#[tokio::test]
async fn every_batch_lookup_searches_by_its_key_on_postgres() {
    use sqlx::Row;
    let Some(db) = TestDb::postgres().await else { return };
    for lookup in chatgate::store::KEY_LOOKUPS {
        let sql = lookup.postgres_statement(4);
        let query = sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN {sql}")));
        let query = (0..4).fold(query, |query, n| query.bind(format!("key-{n}")));
        let rows = query.fetch_all(&mut db.raw().await).await.expect("plan");
        let plan: Vec<String> = rows.iter().map(|row| row.try_get("QUERY PLAN").expect("a line")).collect();
        let by_key = format!("({} = keys.key)", lookup.column);
        let searched = plan.iter().any(|line| line.contains("Index") && !line.contains("Cond"))
            && plan.iter().any(|line| line.contains("Index Cond") && line.contains(&by_key))
            && plan.iter().all(|line| !line.contains("Seq Scan"));
        assert!(searched, "not searched by `{}`: {sql}\n{plan:#?}", lookup.column);
    }
}
