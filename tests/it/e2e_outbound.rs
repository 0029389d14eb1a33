//! Prompts and replies leaving through the outbox to a local stand-in for the Graph API: the
//! request's exact shape, retries, refusals, `Retry-After`, and a restart between the commit and
//! the send.

use std::time::Duration;

use serde_json::json;

use crate::fake_graph::{FakeGraph, sending_through, text_of};
use crate::helpers::{
    CUSTOMER, DEMO_NUMBER, Meta, TestDb, on_both_backends, respawn_app_with, spawn_app, spawn_app_with,
};

on_both_backends!(
    a_prompt_is_an_interactive_message_whose_buttons_carry_the_nonce,
    a_500_then_a_200_is_retried_and_sent_once,
    a_400_is_not_retried_and_the_provider_error_is_kept,
    a_429_waits_as_long_as_retry_after_says,
    a_gateway_restarted_between_commit_and_send_sends_exactly_once,
);

/// One column of the first row `sql` returns.
async fn one(db: &TestDb, sql: &'static str, bind: &str) -> String {
    let mut conn = db.raw().await;
    let row = sqlx::query(sql).bind(bind).fetch_one(&mut conn).await.expect("row");
    sqlx::Row::try_get::<String, _>(&row, 0).expect("text column")
}

async fn a_prompt_is_an_interactive_message_whose_buttons_carry_the_nonce(db: &TestDb) {
    let graph = FakeGraph::start().await;
    let app = spawn_app_with(db, sending_through(&db.config, &graph)).await;
    let meta = Meta::new(&app, db);
    assert_eq!(meta.text("wamid.P1", CUSTOMER, "refund 1234 25.00").await.status(), 200);

    let sent = graph.exactly(1).await;
    let request = &sent[0];
    assert_eq!(request.path, format!("/v21.0/{DEMO_NUMBER}/messages"));
    assert_eq!(request.authorization.as_deref(), Some("Bearer test-access-token"));
    assert_eq!(request.content_type.as_deref(), Some("application/json"));
    let body = &request.body;
    assert_eq!(body["messaging_product"], "whatsapp");
    assert_eq!(body["recipient_type"], "individual");
    assert_eq!(body["to"], CUSTOMER);
    assert_eq!(body["type"], "interactive");
    assert_eq!(body["context"]["message_id"], "wamid.P1", "the prompt quotes the request");
    assert_eq!(body["interactive"]["type"], "button");

    let nonce = one(db, "SELECT nonce FROM confirmations WHERE status = $1", "pending").await;
    let code = one(db, "SELECT code FROM confirmations WHERE status = $1", "pending").await;
    let buttons = body["interactive"]["action"]["buttons"].as_array().expect("buttons");
    let ids: Vec<&str> = buttons.iter().filter_map(|b| b["reply"]["id"].as_str()).collect();
    assert_eq!(ids, [format!("cg:yes:{nonce}"), format!("cg:no:{nonce}")]);
    for button in buttons {
        assert_eq!(button["type"], "reply");
        let title = button["reply"]["title"].as_str().expect("title");
        assert!(!title.is_empty() && title.chars().count() <= 20, "{title}");
    }
    let text = text_of(body);
    assert!(text.contains(&format!("YES {code}")) && text.contains("1234") && text.contains("25"), "{text}");

    // The provider's id is kept, so its status webhooks update the message.
    let wamid = request.wamid.clone().expect("wamid");
    assert_eq!(
        db.store
            .inbound()
            .delivery_status(&chatgate::domain::command::Channel::parse("whatsapp").expect("channel"), &wamid)
            .await
            .expect("status"),
        Some("queued".into())
    );
    use chatgate::channels::whatsapp::simulate;
    let delivered = simulate::notification(DEMO_NUMBER, vec![], vec![simulate::status(&wamid, CUSTOMER, "delivered")]);
    assert_eq!(meta.post(&delivered).await.status(), 200);
    assert_eq!(
        db.store
            .inbound()
            .delivery_status(&chatgate::domain::command::Channel::parse("whatsapp").expect("channel"), &wamid)
            .await
            .expect("status"),
        Some("delivered".into())
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM outbox WHERE status = $1", "done").await, 1);
    let sent_evidence = db.count("SELECT COUNT(*) FROM evidence WHERE kind = $1", "conversation.message.sent").await;
    assert_eq!(sent_evidence, 1, "the prompt sent is on the record");
    app.stop().await.expect("stop");
}

async fn a_500_then_a_200_is_retried_and_sent_once(db: &TestDb) {
    let graph = FakeGraph::start().await;
    graph.answer_next(500, json!({"error": {"message": "temporarily unavailable", "code": 2}}), None);
    let app = spawn_app_with(db, sending_through(&db.config, &graph)).await;
    let meta = Meta::new(&app, db);
    assert_eq!(meta.text("wamid.R1", CUSTOMER, "help").await.status(), 200);

    let sent = graph.exactly(2).await;
    assert_eq!(sent[0].body, sent[1].body, "the same message again");
    assert!(sent[1].wamid.is_some());
    assert_eq!(db.count("SELECT COUNT(*) FROM outbox WHERE status = $1", "done").await, 1);
    assert_eq!(db.count("SELECT COUNT(*) FROM outbox WHERE attempts = CAST($1 AS BIGINT)", "2").await, 1);
    assert_eq!(db.count("SELECT COUNT(*) FROM outbound_messages WHERE status = $1", "queued").await, 1);
    app.stop().await.expect("stop");
}

async fn a_400_is_not_retried_and_the_provider_error_is_kept(db: &TestDb) {
    let graph = FakeGraph::start().await;
    let error = json!({"error": {"message": "(#100) Invalid parameter", "type": "OAuthException", "code": 100}});
    graph.answer_next(400, error, None);
    let app = spawn_app_with(db, sending_through(&db.config, &graph)).await;
    let meta = Meta::new(&app, db);
    assert_eq!(meta.text("wamid.B1", CUSTOMER, "help").await.status(), 200);

    graph.exactly(1).await;
    assert_eq!(db.count("SELECT COUNT(*) FROM outbox WHERE status = $1", "dead").await, 1);
    let last_error = one(db, "SELECT last_error FROM outbox WHERE status = $1", "dead").await;
    assert!(last_error.contains("Invalid parameter"), "{last_error}");
    let errors = one(db, "SELECT errors FROM outbound_messages WHERE status = $1", "failed").await;
    assert!(errors.contains("\"code\":100"), "{errors}");
    let failed = db.count("SELECT COUNT(*) FROM evidence WHERE kind = $1", "conversation.message.failed").await;
    assert_eq!(failed, 1);
    app.stop().await.expect("stop");
}

async fn a_429_waits_as_long_as_retry_after_says(db: &TestDb) {
    let graph = FakeGraph::start().await;
    graph.answer_next(429, json!({"error": {"message": "too many", "code": 130429}}), Some("1"));
    let app = spawn_app_with(db, sending_through(&db.config, &graph)).await;
    let meta = Meta::new(&app, db);
    assert_eq!(meta.text("wamid.T1", CUSTOMER, "help").await.status(), 200);

    let sent = graph.exactly(2).await;
    let waited = sent[1].at - sent[0].at;
    // The backoff alone would be 25-50 ms.
    assert!(waited >= Duration::from_millis(1000), "waited only {waited:?}");
    assert!(sent[1].wamid.is_some());
    app.stop().await.expect("stop");
}

async fn a_gateway_restarted_between_commit_and_send_sends_exactly_once(db: &TestDb) {
    // First life: no token, so the prompt is committed and waits in the outbox.
    let first = spawn_app(db).await;
    let meta = Meta::new(&first, db);
    assert_eq!(meta.text("wamid.X1", CUSTOMER, "refund 9 10").await.status(), 200);
    first.stop().await.expect("stop");
    assert_eq!(db.count("SELECT COUNT(*) FROM outbox WHERE status = $1", "pending").await, 1);

    // Second life: the sender finds it and sends it once.
    let graph = FakeGraph::start().await;
    let second = respawn_app_with(sending_through(&db.config, &graph)).await;
    let sent = graph.exactly(1).await;
    assert!(text_of(&sent[0].body).contains("refund"));
    second.stop().await.expect("stop");

    // Third life: nothing left to send.
    let third = respawn_app_with(sending_through(&db.config, &graph)).await;
    graph.exactly(1).await;
    third.stop().await.expect("stop");
}
