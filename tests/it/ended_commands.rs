//! Every way a command ends closes what it waited for, in the transaction of the move that ends
//! it: a canceled command's confirmation is no longer pending (a later bare "yes" is not
//! "several pending"), and its step-up link and proofs are refused.

use chatgate::domain::lifecycle::State;
use reqwest::StatusCode;
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::e2e_conversation::Chat;
use crate::e2e_security::{awaiting_step_up, step_up_link};
use crate::helpers::{ADMIN, CUSTOMER, TestApp, TestDb, api_token, on_both_backends, spawn_app, tenant};

on_both_backends!(
    an_operators_cancel_closes_the_confirmation_and_the_next_bare_yes_is_for_the_new_request,
    a_canceled_command_waiting_for_step_up_takes_no_proof,
    every_move_out_of_confirmation_closes_the_confirmation,
);

async fn cancel(app: &TestApp, db: &TestDb, id: Uuid) -> (StatusCode, Value) {
    let token = api_token(db, "demo", "ops-1", "commands:read recovery:write");
    let response = app
        .client
        .post(app.url(&format!("/v1/commands/{id}/recovery")))
        .bearer_auth(token)
        .json(&json!({"action": "cancel", "reason": "customer called"}))
        .send()
        .await
        .expect("request");
    (response.status(), response.json().await.unwrap_or(Value::Null))
}

async fn confirmation_status(db: &TestDb, id: Uuid) -> String {
    let mut conn = db.raw().await;
    let row = sqlx::query("SELECT status FROM confirmations WHERE command_id = $1")
        .bind(id.to_string())
        .fetch_one(&mut conn)
        .await
        .expect("the command's confirmation");
    sqlx::Row::get(&row, "status")
}

async fn an_operators_cancel_closes_the_confirmation_and_the_next_bare_yes_is_for_the_new_request(db: &TestDb) {
    let mut chat = Chat::start(db).await;
    let (first, old_code, _) = chat.refund_prompted("wamid.E1", "refund 4602 25.00").await;
    let (status, body) = cancel(&chat.app, db, first).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(chat.state(first).await.0, "canceled");
    assert_eq!(confirmation_status(db, first).await, "closed", "closed with the cancel");
    chat.next_reply().await; // the cancel's own reply

    let (second, _, _) = chat.refund_prompted("wamid.E2", "refund 4603 10.00").await;
    chat.says("wamid.E3", CUSTOMER, "yes").await;
    let (_, text, _) = chat.next_reply().await;
    assert!(text.starts_with("Thanks, confirmed"), "the one pending request is confirmed: {text}");
    assert_ne!(chat.state(second).await.0, "confirmation_required");
    // The old code now says where its request stands; it confirms nothing.
    chat.says("wamid.E4", CUSTOMER, &format!("YES {old_code}")).await;
    let (_, text, _) = chat.next_reply().await;
    assert!(!text.starts_with("Thanks, confirmed"), "{text}");
    assert_eq!(chat.state(first).await.0, "canceled");
    chat.stop().await;
}

async fn a_canceled_command_waiting_for_step_up_takes_no_proof(db: &TestDb) {
    let app = spawn_app(db).await;
    let (id, key) = awaiting_step_up(db, &app, "91").await;
    let link = step_up_link(db).await;
    let query = link.split_once('?').expect("a query").1.to_owned();
    assert_eq!(app.client.get(app.url(&format!("/step-up?{query}"))).send().await.expect("page").status(), 200);
    let (status, body) = cancel(&app, db, id).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    // The link has nothing to prove any more, and a valid proof moves nothing.
    let page = app.client.get(app.url(&format!("/step-up?{query}"))).send().await.expect("page");
    assert_eq!(page.status(), StatusCode::NOT_FOUND);
    let settings = chatgate::service::Settings::with_shipped_registry(db.config.clone()).expect("settings");
    let proof = settings.security.stepup.mint(ADMIN, id, &key, OffsetDateTime::now_utc()).expect("mint");
    let nonce = query.split("nonce=").nth(1).expect("a nonce").to_owned();
    let form = [("command", id.to_string()), ("nonce", nonce), ("token", proof.clone())];
    let posted = app.client.post(app.url("/step-up")).form(&form).send().await.expect("post");
    assert_eq!(posted.status(), StatusCode::NOT_FOUND);
    let operator = api_token(db, "demo", "ops-1", "commands:read stepup:verify");
    let api = app
        .client
        .post(app.url(&format!("/v1/commands/{id}/step-up")))
        .bearer_auth(operator)
        .json(&json!({"token": proof}))
        .send()
        .await
        .expect("request");
    assert_eq!(api.status(), StatusCode::CONFLICT);
    let command = db.store.commands().get(&tenant("demo"), id).await.expect("read").expect("command");
    assert_eq!(command.lifecycle.state, State::Canceled);
    assert_eq!(confirmation_status(db, id).await, "accepted", "answered before the cancel, left as it was");
    app.stop().await.expect("stop");
}

/// Below the API: whichever move takes a command out of `confirmation_required` without an
/// answer (here a cancel committed on its own, as a recovery or a sweep would) closes its
/// confirmation in the same transaction; an answer's own settlement is left as it is.
async fn every_move_out_of_confirmation_closes_the_confirmation(db: &TestDb) {
    let mut chat = Chat::start(db).await;
    let (id, _, _) = chat.refund_prompted("wamid.E9", "refund 4609 5.00").await;
    let command = db.store.commands().get(&tenant("demo"), id).await.expect("read").expect("command");
    let writes = db
        .engine
        .plan_moves(
            &command,
            vec![(chatgate::domain::lifecycle::Event::Cancel, Default::default())],
            OffsetDateTime::now_utc(),
        )
        .expect("a cancel is allowed");
    db.store.commands().commit_transition(&writes[0]).await.expect("committed");
    assert_eq!(confirmation_status(db, id).await, "closed");
    let pending = db
        .store
        .confirmations()
        .pending(&tenant("demo"), &chatgate::domain::command::ActorId::parse(CUSTOMER).expect("actor"))
        .await
        .expect("pending");
    assert!(pending.is_empty(), "nothing pending for the person");
    chat.stop().await;
}
