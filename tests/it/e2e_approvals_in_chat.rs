//! Approvals as the chat shows them (issue #46, goal 7), on both backends: while a request waits,
//! `status <ref>` says for whom (roles, never a person), how many approvals and until when; once
//! decided, `why <ref>` tells the approval among the request's steps; the command's API view lists
//! the approval with what it still needs and who may give it.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::e2e_ooc::{Chat, code_in};
use crate::e2e_security::token_as;
use crate::fake_executor::Fault;
use crate::helpers::{CUSTOMER, TestDb, on_both_backends};
use chatgate::domain::command::ShortRef;

on_both_backends!(status_and_why_say_what_a_request_waits_for_and_who_may_give_it);

const SUPERVISOR: &str = "15550000003";

async fn status_and_why_say_what_a_request_waits_for_and_who_may_give_it(db: &TestDb) {
    let mut chat = Chat::start(db, |_| Fault::None).await;
    let asked = chat.says(CUSTOMER, "refund 1234 250.00").await;
    let prompt = chat.reply(CUSTOMER).await.0;
    let id = chat.command_of(&asked).await;
    let reference = ShortRef::of(id).to_string();
    let waiting = chat.ask(CUSTOMER, &format!("YES {}", code_in(&prompt))).await;
    assert!(waiting.contains("supervisor"), "told by whom it waits: {waiting}");

    let status = chat.ask(CUSTOMER, &format!("status {reference}")).await;
    assert!(status.contains("Waiting for approval by supervisor (1 more) until"), "{status}");
    assert!(!status.contains(SUPERVISOR), "a role, never a person's number: {status}");
    // The API's view of the command: the approval, what it still needs, who may give it.
    let reader = token_as(&db.config, SUPERVISOR, "commands:read approvals:read approvals:decide");
    let url = chat.app.url(&format!("/v1/commands/{id}"));
    let view: Value =
        chat.app.client.get(&url).bearer_auth(&reader).send().await.expect("read").json().await.expect("json");
    assert_eq!(view["approval"]["status"], "pending", "{view}");
    assert_eq!(view["approval"]["missing"][0]["roles"], json!(["supervisor"]));

    let approval_id = view["approval"]["approval_id"].as_str().expect("id").to_owned();
    let decision = chat.app.url(&format!("/v1/approvals/{approval_id}/decision"));
    let approve = json!({"decision": "approve"});
    let answer = chat.app.client.post(decision).bearer_auth(&reader).json(&approve).send().await.expect("decide");
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(chat.settled(id).await, "executed");
    chat.reply(CUSTOMER).await; // confirmed
    chat.reply(CUSTOMER).await; // its outcome
    let why = chat.ask(CUSTOMER, &format!("why {reference}")).await;
    assert!(why.starts_with(&format!("{reference} refund: executed.")), "what held it is over: {why}");
    for step in ["confirmed", "approval asked", "approved by one approver", "allowed"] {
        assert!(why.contains(step), "{step} in {why}");
    }
    let status = chat.ask(CUSTOMER, &format!("status {reference}")).await;
    assert!(!status.contains("Waiting for approval"), "{status}");
    chat.app.stop().await.expect("stop");
}
