//! Rate limits kept in the database, so that every instance on it counts against one budget
//! (GCRA: each key's theoretical arrival time): one check in one statement, or many checks at
//! once in one short transaction. PostgreSQL only (SQLite is one instance and counts in memory).

use std::collections::BTreeMap;

use sqlx::Row;
use time::OffsetDateTime;

use crate::store::rows::{Marks, Param, insert_rows, int, placeholder_list, to_ms, update_rows};
use crate::store::{RateLimits, StoreError};

/// One unit taken from `key`'s budget: one every `interval_ms`, `burst` at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Take {
    pub key: String,
    pub interval_ms: i64,
    pub burst: i64,
}

/// Takes in order, stopping at the first refused: a message's tenant, then its actor.
pub type Chain = Vec<Take>;

impl RateLimits<'_> {
    /// Every chain's takes, in the order given, against the budgets every instance shares: one
    /// transaction of four statements for the whole batch (the keys made, then locked in key
    /// order — so two instances' batches never deadlock —, the new arrival times written), instead
    /// of a statement and a row lock per take. For each chain, `Err` holds the milliseconds until
    /// its refused take would be allowed.
    pub async fn take_chains(self, chains: &[Chain], now: OffsetDateTime) -> Result<Vec<Result<(), i64>>, StoreError> {
        let now = to_ms(now);
        let mut keys: Vec<String> = chains.iter().flatten().map(|take| take.key.clone()).collect();
        keys.sort();
        keys.dedup();
        if keys.is_empty() {
            return Ok(vec![Ok(()); chains.len()]);
        }
        // Arrival times lost with a crash of the database only forget a few takes.
        let mut tx = self.store.begin_losable().await?;
        let made = keys.iter().map(|key| vec![Param::from(key.as_str()), Param::from(0_i64)]).collect();
        insert_rows(&mut tx, "INSERT INTO rate_limits (key, tat)", 2, made, "ON CONFLICT (key) DO NOTHING").await?;
        let marks = Marks::for_connection(&tx);
        let sql = format!(
            "SELECT key, tat FROM rate_limits WHERE key IN {} ORDER BY key FOR UPDATE",
            placeholder_list(0, keys.len(), marks)
        );
        let locked = keys.iter().fold(sqlx::query(sqlx::AssertSqlSafe(sql)), |query, key| query.bind(key.as_str()));
        let mut arrivals = BTreeMap::new();
        for row in locked.fetch_all(&mut *tx).await? {
            arrivals.insert(row.try_get::<String, _>("key")?, int(&row, "tat")?);
        }
        let taken: Vec<Result<(), i64>> = chains.iter().map(|chain| take_chain(&mut arrivals, chain, now)).collect();
        let moved = arrivals.iter().map(|(key, tat)| vec![Param::from(key.as_str()), Param::from(*tat)]).collect();
        update_rows(&mut tx, ("rate_limits", "tat = v.column2", "rate_limits.key = v.column1"), 2, moved).await?;
        tx.commit().await?;
        Ok(taken)
    }
}

/// One chain against the arrival times held (GCRA: a take is allowed when the key's next arrival
/// time is at most `burst` intervals ahead of now).
fn take_chain(arrivals: &mut BTreeMap<String, i64>, chain: &[Take], now: i64) -> Result<(), i64> {
    for take in chain {
        let tat = arrivals.get(&take.key).copied().unwrap_or(0);
        let next = tat.max(now) + take.interval_ms;
        if next - now > take.interval_ms * take.burst {
            return Err((tat + take.interval_ms - now - take.interval_ms * take.burst).max(1));
        }
        arrivals.insert(take.key.clone(), next);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_stops_at_its_first_refusal_and_takes_nothing_after_it() {
        let take = |key: &str, burst| Take { key: key.into(), interval_ms: 1_000, burst };
        let mut arrivals = BTreeMap::new();
        let chain = vec![take("tenant", 3), take("actor", 1)];
        assert_eq!(take_chain(&mut arrivals, &chain, 10_000), Ok(()));
        // The actor's one is spent: the tenant's second is taken, the actor refused for a second.
        assert_eq!(take_chain(&mut arrivals, &chain, 10_000), Err(1_000));
        assert_eq!(arrivals["tenant"], 12_000);
        assert_eq!(take_chain(&mut arrivals, &[take("tenant", 3)], 10_000), Ok(()));
        // The tenant's burst is spent: refused there, the actor untouched.
        assert_eq!(take_chain(&mut arrivals, &chain, 10_000), Err(1_000));
        assert_eq!(arrivals["actor"], 11_000);
        // A second later one more fits.
        assert_eq!(take_chain(&mut arrivals, &[take("tenant", 3)], 11_000), Ok(()));
    }
}
