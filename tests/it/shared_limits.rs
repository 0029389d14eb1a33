//! The budgets every instance shares (PostgreSQL), taken through the batching writer: many takes at
//! once, from two gateways' worth of limiters on one database, grant exactly the burst — no more
//! (a lost update would) and no fewer (a batch that failed would) — and a message refused by its
//! tenant's budget takes nothing from its actor's.

use std::sync::Arc;

use chatgate::config::{Rate, RateLimitConfig};
use chatgate::service::security::ratelimit::Limits;
use chatgate::store::Store;

use crate::helpers::{Backend, TestDb};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shared_budgets_taken_in_batches_grant_exactly_their_burst() {
    let Some(db) = TestDb::new(Backend::Postgres).await else {
        eprintln!("skipped: the PostgreSQL URL is not set");
        return;
    };
    let store = Store::connect(&db.config.storage).await.expect("the database");
    let rates = RateLimitConfig {
        actor: Rate { per_minute: 1, burst: 40 },
        tenant: Rate { per_minute: 1, burst: 100 },
        shared: true,
        ..RateLimitConfig::default()
    };
    // Two instances: each its own limiter and writer, one database.
    let instances = [Arc::new(Limits::new(&rates)), Arc::new(Limits::new(&rates))];
    let now = time::OffsetDateTime::now_utc();
    let mut asking = tokio::task::JoinSet::new();
    for n in 0..300 {
        let (limits, store) = (instances[n % 2].clone(), store.clone());
        // 200 messages from one person, 100 from others; the tenant allows 100 in all.
        let actor = if n < 200 { "alice".to_owned() } else { format!("person-{n}") };
        asking.spawn(async move { (actor.clone(), limits.inbound_shared(&store, "shop", &actor, now).await) });
    }
    let mut granted = std::collections::HashMap::<bool, usize>::new();
    let mut alice = 0;
    while let Some(Ok((actor, taken))) = asking.join_next().await {
        let ok = taken.expect("the database answered").is_ok();
        *granted.entry(ok).or_default() += 1;
        alice += usize::from(ok && actor == "alice");
    }
    // Exactly the tenant's burst was taken (a lost update would take more), each message past the
    // tenant took nothing, and alice's budget moved once per message of hers that was granted.
    let mut conn = db.raw().await;
    let tat =
        |key: &str| sqlx::query_scalar::<_, i64>("SELECT tat FROM rate_limits WHERE key = $1").bind(key.to_owned());
    let now_ms = i64::try_from(now.unix_timestamp_nanos() / 1_000_000).expect("ms");
    let minutes = |tat: i64| (tat - now_ms) / 60_000;
    assert_eq!(minutes(tat("tenant|shop").fetch_one(&mut conn).await.expect("the tenant's row")), 100);
    assert_eq!(minutes(tat("actor|shop|alice").fetch_one(&mut conn).await.expect("alice's row")), alice as i64);
    let others_passed: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM rate_limits WHERE key LIKE 'actor|shop|person-%' AND tat > 0")
            .fetch_one(&mut conn)
            .await
            .expect("count");
    let alice_passed = 100 - others_passed;
    let granted = granted.get(&true).copied().unwrap_or(0) as i64;
    assert_eq!(alice as i64, alice_passed.min(40), "alice gets what passed the tenant, up to her burst");
    assert_eq!(granted, alice as i64 + others_passed, "every other person who passed the tenant is granted");
    db.drop_database().await;
}
