//! Issue 44.2: the figures `/metrics` shows are kept as things change (`store::figures`), moved in
//! the same transactions as the rows they count. Every test gateway checks, when it stops, that
//! they agree with a count of its database's rows (`agree`, in one statement: one snapshot
//! whatever else still writes); and a scrape reads the same few rows however much history the
//! tables hold (`metrics_scrape`).

use sqlx::Connection;

/// The figures that disagree with the rows they count, in one statement (one snapshot):
/// `(name, label, minute, counted in the rows, kept in figures)`; the deliveries closed are
/// compared for the last hour (the clean-up forgets older minutes).
const DISAGREEING: &str = "
WITH counted AS (
    SELECT 'deliveries' AS name, state AS label, CAST(0 AS BIGINT) AS minute, CAST(COUNT(*) AS BIGINT) AS n
    FROM deliveries WHERE state <> 'closed' GROUP BY state
    UNION ALL
    SELECT 'deliveries_closed', COALESCE(outcome, ''), CAST(updated_at / 60000 AS BIGINT), CAST(COUNT(*) AS BIGINT)
    FROM deliveries WHERE state = 'closed' AND updated_at >= $1 GROUP BY COALESCE(outcome, ''), updated_at / 60000
    UNION ALL
    SELECT 'outbox_pending', kind, CAST(0 AS BIGINT), CAST(COUNT(*) AS BIGINT) FROM outbox WHERE status = 'pending'
    GROUP BY kind
), kept AS (
    SELECT name, label, CAST(minute AS BIGINT) AS minute, CAST(SUM(value) AS BIGINT) AS n FROM figures
    WHERE minute = 0 OR minute >= $2 GROUP BY name, label, minute HAVING SUM(value) <> 0
)
SELECT c.name AS name, c.label AS label, c.minute AS minute, c.n AS counted, COALESCE(k.n, 0) AS kept
FROM counted c LEFT JOIN kept k ON k.name = c.name AND k.label = c.label AND k.minute = c.minute
WHERE k.n IS NULL OR k.n <> c.n
UNION ALL
SELECT k.name, k.label, k.minute, 0, k.n FROM kept k
WHERE NOT EXISTS (SELECT 1 FROM counted c WHERE c.name = k.name AND c.label = k.label AND c.minute = k.minute)";

/// Whether the figures of the database at `url` agree with its rows; what disagrees otherwise.
/// `Ok` when the database cannot be reached any more (a test dropped it).
pub async fn agree(url: &str) -> Result<(), String> {
    let Ok(mut conn) = sqlx::AnyConnection::connect(url).await else { return Ok(()) };
    let minute = (time::OffsetDateTime::now_utc().unix_timestamp() - 3_600) / 60;
    let rows = sqlx::query(DISAGREEING).bind(minute * 60_000).bind(minute).fetch_all(&mut conn).await;
    let Ok(rows) = rows else { return Ok(()) };
    let disagreeing: Vec<String> = rows
        .iter()
        .map(|row| {
            let get = |i: usize| sqlx::Row::try_get::<String, _>(row, i).unwrap_or_default();
            let n = |i: usize| sqlx::Row::try_get::<i64, _>(row, i).unwrap_or_default();
            format!("{} {} (minute {}): {} in the rows, {} in the figures", get(0), get(1), n(2), n(3), n(4))
        })
        .collect();
    match disagreeing.is_empty() {
        true => Ok(()),
        false => Err(disagreeing.join("; ")),
    }
}
