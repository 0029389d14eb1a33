//! Waiting one's turn (`lock = "wait"`, issue #47), on both backends: a second refund of an order
//! another request is changing is admitted, its person told which request holds the order (by
//! reference) and that theirs waits; once the first has ended, the second takes the order and is
//! asked to confirm, and runs — never both at once. A waiter whose TTL runs out first is refused
//! as `lock_wait_expired`, told so, and holds nothing.

use std::time::Duration;

use serde_json::Value;
use uuid::Uuid;

use chatgate::domain::command::ShortRef;

use crate::e2e_approvals::{replies_to, state_and_reason};
use crate::helpers::{ADMIN, CUSTOMER, Meta, TestDb, command_of_message, confirmation_of, on_both_backends, settled};

on_both_backends!(
    a_second_refund_waits_its_turn_and_is_asked_once_the_first_has_ended,
    a_waiter_whose_ttl_runs_out_is_refused_and_holds_nothing,
);

/// The shipped registry with refunds waiting their turn, and `ttl` for them.
fn waiting(ttl: &str) -> String {
    let shipped = chatgate::config::SHIPPED_COMMANDS;
    let at = shipped.find("[commands.refund]").expect("the refund entry");
    let (before, after) = shipped.split_at(at);
    let after = after.replacen("lock = \"refuse\"\n", "lock = \"wait\"\n", 1).replacen(
        "ttl = \"15m\"",
        &format!("ttl = \"{ttl}\""),
        1,
    );
    format!("{before}{after}")
}

async fn gateway(db: &TestDb, ttl: &str) -> crate::helpers::TestApp {
    let mut config = db.config.clone();
    config.outbound.poll_interval_ms = 20;
    crate::helpers::spawn_app_with_registry(db, config, &waiting(ttl)).await
}

/// Waits (20 s at most) until `id` is in `want`; returns its state then.
async fn reaches(db: &TestDb, id: Uuid, want: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let state = state_and_reason(db, id).await.0;
        if state == want || std::time::Instant::now() > deadline {
            return state;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn told(replies: &[(String, Value)], template: &str) -> Vec<Value> {
    replies.iter().filter(|(t, _)| t == template).map(|(_, v)| v.clone()).collect()
}

async fn a_second_refund_waits_its_turn_and_is_asked_once_the_first_has_ended(db: &TestDb) {
    let app = gateway(db, "15m").await;
    let meta = Meta::new(&app, db);
    assert_eq!(meta.text("wamid.W1", CUSTOMER, "refund 7801 25.00").await.status(), 200);
    let (first, _, code) = confirmation_of(db, "wamid.W1").await;
    assert_eq!(meta.text("wamid.W2", ADMIN, "refund 7801 30.00").await.status(), 200);
    let second = command_of_message(db, "wamid.W2").await;
    assert_eq!(state_and_reason(db, second).await, ("canonicalized".into(), None), "admitted, waiting");
    let admin = replies_to(db, ADMIN).await;
    let waits = told(&admin, "waiting_turn");
    assert_eq!(waits.len(), 1, "{admin:?}");
    assert_eq!(waits[0]["holder"], ShortRef::of(first).to_string(), "the holder by reference only");
    assert!(told(&admin, "confirmation_prompt").is_empty(), "not asked before its turn");
    assert!(!waits[0].to_string().contains(CUSTOMER), "nobody else's identity");

    // The first runs; then the second takes the order and is asked.
    assert_eq!(meta.text("wamid.W1-yes", CUSTOMER, &format!("YES {code}")).await.status(), 200);
    assert_eq!(settled(db, first).await, "executed");
    assert_eq!(reaches(db, second, "confirmation_required").await, "confirmation_required");
    let prompt = told(&replies_to(db, ADMIN).await, "confirmation_prompt");
    let code = prompt[0]["code"].as_str().expect("a code").to_owned();
    assert_eq!(db.count("SELECT COUNT(*) FROM resource_locks WHERE command_id = $1", &second.to_string()).await, 1);
    assert_eq!(meta.text("wamid.W2-yes", ADMIN, &format!("YES {code}")).await.status(), 200);
    assert_eq!(settled(db, second).await, "executed");
    assert_eq!(db.count("SELECT COUNT(*) FROM resource_locks WHERE tenant_id = $1", "demo").await, 0);
    assert!(db.store.evidence().verify().await.expect("audit").first_break.is_none());
    app.stop().await.expect("stop");
}

async fn a_waiter_whose_ttl_runs_out_is_refused_and_holds_nothing(db: &TestDb) {
    let app = gateway(db, "1s").await;
    let meta = Meta::new(&app, db);
    assert_eq!(meta.text("wamid.WT1", CUSTOMER, "refund 7802 25.00").await.status(), 200);
    let (first, _, _) = confirmation_of(db, "wamid.WT1").await;
    assert_eq!(meta.text("wamid.WT2", ADMIN, "refund 7802 30.00").await.status(), 200);
    let second = command_of_message(db, "wamid.WT2").await;
    assert_eq!(settled(db, second).await, "rejected");
    assert_eq!(state_and_reason(db, second).await.1.as_deref(), Some("lock_wait_expired"));
    let failed = told(&replies_to(db, ADMIN).await, "failed");
    assert_eq!(failed.last().expect("told")["reason"], "lock_wait_expired");
    assert_eq!(state_and_reason(db, first).await.0, "confirmation_required", "the holder goes on");
    let held = db.count("SELECT COUNT(*) FROM resource_locks WHERE command_id = $1", &first.to_string()).await;
    assert_eq!(held, 1, "the order is still the first's");
    app.stop().await.expect("stop");
}
