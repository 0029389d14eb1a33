//! An approval rule that asks its approvers to step up (`step_up = true`, issue #46 goal 1), on
//! both backends: a tap decides nothing and says why; over the API a decision without a proof, or
//! with another person's, is refused and records nothing; the approver's own proof, bound to the
//! command and its key, is used once with the decision, which its evidence names; the console's
//! page asks for the token in the row and decides only with it.

use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::e2e_approvals::asked_and_confirmed;
use crate::e2e_security::{step_up_token_of, token_as};
use crate::helpers::{
    CUSTOMER, DEMO_NUMBER, Meta, TestApp, TestDb, on_both_backends, settled, spawn_app_with_registry, tenant,
};

on_both_backends!(an_approver_who_must_step_up_decides_only_with_their_own_proof);

const SUPERVISOR: &str = "15550000003";

async fn decide(app: &TestApp, db: &TestDb, approval: Uuid, token: Option<&str>) -> (StatusCode, Value) {
    let mut body = json!({"decision": "approve"});
    if let Some(token) = token {
        body["step_up_token"] = json!(token);
    }
    let response = app
        .client
        .post(app.url(&format!("/v1/approvals/{approval}/decision")))
        .bearer_auth(token_as(&db.config, SUPERVISOR, "approvals:read approvals:decide"))
        .json(&body)
        .send()
        .await
        .expect("decision");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn an_approver_who_must_step_up_decides_only_with_their_own_proof(db: &TestDb) {
    let commands = chatgate::config::SHIPPED_COMMANDS.replacen(
        "name = \"refund over 100.00\"\nwhen.amount = { more_than = \"100.00\" }\n",
        "name = \"refund over 100.00\"\nwhen.amount = { more_than = \"100.00\" }\nstep_up = true\n",
        1,
    );
    assert_ne!(commands, chatgate::config::SHIPPED_COMMANDS, "the shipped policy reads as expected");
    let app = spawn_app_with_registry(db, db.config.clone(), &commands).await;
    let id = asked_and_confirmed(db, &app, CUSTOMER, "refund 1234 250.00").await;
    let command = db.store.commands().get(&tenant("demo"), id).await.expect("read").expect("command");
    let key = command.envelope.idempotency_key.as_str().to_owned();
    let approval = db.store.approvals().of_command(&tenant("demo"), id).await.expect("read").expect("it").id;

    // A tap cannot carry a proof: the supervisor is told so, and nothing is recorded.
    use chatgate::channels::whatsapp::simulate;
    let tapped = simulate::button_reply("wamid.SU1", SUPERVISOR, &format!("cg:approve:{approval}"), "Approve");
    let meta = Meta::new(&app, db);
    assert_eq!(meta.post(&simulate::notification(DEMO_NUMBER, vec![tapped], vec![])).await.status(), 200);
    let answered = db.outbox().await.into_iter().any(|(_, p)| {
        p["to"] == SUPERVISOR && p["template"] == "approval_answer" && p["vars"]["outcome"] == "step_up_required"
    });
    assert!(answered, "the supervisor is told to step up");

    let (status, problem) = decide(&app, db, approval, None).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("insufficient_user_authentication"))
    );
    let theirs = step_up_token_of(&db.config, CUSTOMER, id, &key);
    let (status, problem) = decide(&app, db, approval, Some(&theirs)).await;
    assert_eq!((status, problem["code"].as_str()), (StatusCode::FORBIDDEN, Some("step_up_mismatch")));
    assert!(db.store.approvals().decisions(approval).await.expect("decisions").is_empty(), "nothing recorded");

    let own = step_up_token_of(&db.config, SUPERVISOR, id, &key);
    let (status, answer) = decide(&app, db, approval, Some(&own)).await;
    assert_eq!((status, answer["outcome"].as_str()), (StatusCode::OK, Some("approved")), "{answer}");
    assert_eq!(settled(db, id).await, "executed");
    let evidence = db.store.evidence().for_command("demo", id).await.expect("evidence");
    let decided = evidence.iter().find(|a| a.kind == "approval.decided").expect("the decision's evidence");
    assert!(decided.body["decision"]["step_up_proof"]["jti"].is_string(), "{}", decided.body);
    assert_eq!(db.count("SELECT COUNT(*) FROM consumed_tokens WHERE jti <> $1", "").await, 1, "used once");

    // In the console: the row asks for the token; without it nothing is recorded, with it approved.
    use crate::e2e_console::{csrf_of, page, post_form, session};
    let other = asked_and_confirmed(db, &app, CUSTOMER, "refund 98765 300.00").await;
    let command = db.store.commands().get(&tenant("demo"), other).await.expect("read").expect("command");
    let approval = db.store.approvals().of_command(&tenant("demo"), other).await.expect("read").expect("it").id;
    let cookie = session(&app, &token_as(&db.config, SUPERVISOR, "approvals:read approvals:decide")).await;
    let html = page(&app, &cookie, "/console/approvals").await.1;
    assert!(html.contains("data-testid=\"step-up\""), "the page asks for the token: {html}");
    let decide = format!("/console/approvals/{approval}/decision");
    let csrf = csrf_of(&html);
    let without = post_form(&app, &cookie, &decide, &[("csrf", &csrf), ("decision", "approve"), ("step_up", "")]).await;
    assert_eq!(without.0, StatusCode::UNAUTHORIZED, "{}", without.1);
    assert!(db.store.approvals().decisions(approval).await.expect("decisions").is_empty());
    let proof = step_up_token_of(&db.config, SUPERVISOR, other, command.envelope.idempotency_key.as_str());
    let with =
        post_form(&app, &cookie, &decide, &[("csrf", &csrf), ("decision", "approve"), ("step_up", &proof)]).await;
    assert_eq!(with.0, StatusCode::SEE_OTHER, "{}", with.1);
    assert_eq!(settled(db, other).await, "executed");
    app.stop().await.expect("stop");
}
