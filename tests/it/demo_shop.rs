//! The demo's shop (issue #47, goal 3): the shipped `orders` executor, `builtin:shop`, answers as a
//! small shop would through the executor contract — `order status 4410` says where the order is, a
//! refund's prompt shows the shop's preview of it (what was paid, what is left), a refund larger
//! than what is left is refused by that preview, and nothing else is needed to run it.

use serde_json::Value;

use crate::e2e_approvals::{replies_to, state_and_reason};
use crate::helpers::{CUSTOMER, Meta, TestDb, command_of_message, confirmation_of, on_both_backends, settled};

on_both_backends!(the_demo_shop_answers_previews_and_refuses_what_is_not_left);

/// What the customer was told, newest last, by template.
async fn told(db: &TestDb, template: &str) -> Vec<Value> {
    replies_to(db, CUSTOMER).await.into_iter().filter(|(t, _)| t == template).map(|(_, v)| v).collect()
}

async fn the_demo_shop_answers_previews_and_refuses_what_is_not_left(db: &TestDb) {
    let mut config = db.config.clone();
    config.outbound.poll_interval_ms = 20;
    config.executors.get_mut("orders").expect("orders").url = "builtin:shop".into();
    let app = crate::helpers::spawn_app_with(db, config).await;
    let meta = Meta::new(&app, db);

    assert_eq!(meta.text("wamid.S1", CUSTOMER, "order status 4410").await.status(), 200);
    let status = command_of_message(db, "wamid.S1").await;
    assert_eq!(settled(db, status).await, "executed");
    let executed = told(db, "executed").await;
    assert_eq!(executed[0]["result"]["state"], "shipped on 25 Nov, arriving on 29 Nov", "{:?}", executed[0]);

    assert_eq!(meta.text("wamid.S2", CUSTOMER, "refund 1234 25.00").await.status(), 200);
    let (refund, _, code) = confirmation_of(db, "wamid.S2").await;
    let prompt = told(db, "confirmation_prompt").await;
    let summary = "Order 1234 — paid 400.00 on 20 Nov, already refunded 0.00; refunding 25.00 leaves 375.00";
    assert_eq!(prompt[0]["preview"]["summary"], summary, "{:?}", prompt[0]);
    assert_eq!(meta.text("wamid.S2-yes", CUSTOMER, &format!("YES {code}")).await.status(), 200);
    assert_eq!(settled(db, refund).await, "executed");

    // More than is left: the shop's preview refuses it, before anyone is asked anything.
    assert_eq!(meta.text("wamid.S3", CUSTOMER, "refund 1234 400").await.status(), 200);
    let too_much = command_of_message(db, "wamid.S3").await;
    assert_eq!(settled(db, too_much).await, "rejected");
    assert_eq!(state_and_reason(db, too_much).await.1.as_deref(), Some("preview_refused"));
    let failed = told(db, "failed").await;
    assert_eq!(failed.last().expect("told why")["error"]["message"], "order 1234 has 375.00 left to refund");
    assert_eq!(told(db, "confirmation_prompt").await.len(), 1, "nothing more prompted");
    app.stop().await.expect("stop");
}

#[test]
fn the_shipped_configuration_runs_the_shop_with_nothing_else() {
    let config = chatgate::config::Config::parse(
        std::path::Path::new("chatgate.toml"),
        chatgate::config::SHIPPED_CONFIG,
        &|_| None,
    )
    .expect("the shipped configuration");
    let orders = config.executors.get("orders").expect("orders");
    assert_eq!(orders.target("orders"), Ok(chatgate::config::ExecutorTarget::Shop));
    assert!(orders.offers_previews("orders"));
}
