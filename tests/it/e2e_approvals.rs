//! Approvals (issue #46) as people meet them, on both backends: a request over its requester's
//! limit is confirmed, waits in `authz_pending` with the requester told by whom, and is decided
//! over `/v1/approvals` by people the policy names — executed once when every rule has its
//! quorum, rejected (the requester told why) on a denial or when the wait ends. The shipped
//! policy (config/commands.toml): a customer alone up to 50.00; over 100.00 one supervisor; over
//! 1,000.00 two; closing an account one (docs/APPROVALS.md).

use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::e2e_security::token_as;
use crate::helpers::{
    ADMIN, CUSTOMER, DEMO_NUMBER, Meta, TestApp, TestDb, on_both_backends, settled, spawn_app_with,
    spawn_app_with_registry, tenant,
};

on_both_backends!(
    a_customers_refund_over_their_limit_waits_for_a_supervisor_and_executes_once,
    a_denial_rejects_the_request_and_the_requester_is_told,
    over_1000_needs_two_distinct_supervisors_and_no_one_approves_their_own,
    two_supervisors_approving_at_once_make_one_execution,
    an_approval_nobody_completes_in_time_is_rejected_by_the_sweep,
    a_decision_on_an_unknown_or_foreign_approval_changes_nothing,
    supervisors_are_asked_on_whatsapp_and_a_tap_decides_once,
    break_glass_overrides_only_with_the_operators_step_up_and_a_reason,
    an_escalation_that_comes_due_asks_the_next_role_who_may_then_decide,
);

const SUPERVISOR: &str = "15550000003";
const SECOND_SUPERVISOR: &str = "15550000004";
const DECIDE: &str = "approvals:read approvals:decide";

/// `who` asks for `text` and confirms it: the command, now waiting for approval.
pub(crate) async fn asked_and_confirmed(db: &TestDb, app: &TestApp, who: &str, text: &str) -> Uuid {
    let meta = Meta::new(app, db);
    let asked = format!("wamid.A-{who}-{}", text.len());
    assert_eq!(meta.text(&asked, who, text).await.status(), 200);
    let (id, _, code) = crate::helpers::confirmation_of(db, &asked).await;
    assert_eq!(meta.text(&format!("{asked}-yes"), who, &format!("YES {code}")).await.status(), 200);
    id
}

pub(crate) async fn state_and_reason(db: &TestDb, id: Uuid) -> (String, Option<String>) {
    let command = db.store.commands().get(&tenant("demo"), id).await.expect("read").expect("command");
    (command.lifecycle.state.to_string(), command.reason_code)
}

/// The approval a command waits for, as `GET /v1/approvals` lists it.
pub(crate) async fn listed(app: &TestApp, token: &str, command_id: Uuid) -> Value {
    let list = app.client.get(app.url("/v1/approvals")).bearer_auth(token).send().await.expect("list");
    assert_eq!(list.status(), StatusCode::OK);
    let list: Value = list.json().await.expect("json");
    let approvals = list["approvals"].as_array().expect("approvals").clone();
    approvals.into_iter().find(|a| a["command_id"] == command_id.to_string()).expect("listed")
}

pub(crate) async fn decide(app: &TestApp, token: &str, approval: &Value, decision: &str) -> (StatusCode, Value) {
    let id = approval["approval_id"].as_str().expect("id");
    let response = app
        .client
        .post(app.url(&format!("/v1/approvals/{id}/decision")))
        .bearer_auth(token)
        .json(&json!({"decision": decision, "reason": "checked the order"}))
        .send()
        .await
        .expect("decision");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The replies queued for `to`, by template.
pub(crate) async fn replies_to(db: &TestDb, to: &str) -> Vec<(String, Value)> {
    let outbox = db.outbox().await;
    let to_them = outbox.into_iter().filter(|(kind, p)| kind == "message" && p["to"] == to);
    to_them.map(|(_, p)| (p["template"].as_str().unwrap_or_default().to_owned(), p["vars"].clone())).collect()
}

async fn a_customers_refund_over_their_limit_waits_for_a_supervisor_and_executes_once(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let id = asked_and_confirmed(db, &app, CUSTOMER, "refund 1234 250.00").await;
    assert_eq!(state_and_reason(db, id).await, ("authz_pending".into(), Some("approval_required".into())));
    let told = replies_to(db, CUSTOMER).await;
    let (_, waiting) = told.iter().find(|(t, _)| t == "approval_required").expect("told it waits");
    assert_eq!((waiting["roles"].clone(), waiting["approvals"].clone()), (json!(["supervisor"]), json!(1)));

    let supervisor = token_as(&db.config, SUPERVISOR, DECIDE);
    let approval = listed(&app, &supervisor, id).await;
    assert_eq!((approval["requester"].as_str(), approval["status"].as_str()), (Some(CUSTOMER), Some("pending")));
    let rules = approval["rules"].as_array().expect("rules").iter().filter_map(|r| r["rule"].as_str());
    let rules: Vec<&str> = rules.collect();
    assert_eq!(rules, ["a customer's own limit", "refund over 100.00"]);
    // The requester may not decide their own, nor may anyone without an approver's role.
    let own = decide(&app, &token_as(&db.config, CUSTOMER, DECIDE), &approval, "approve").await;
    assert_eq!((own.0, own.1["code"].as_str()), (StatusCode::FORBIDDEN, Some("not_yours_to_decide")));
    let admin = decide(&app, &token_as(&db.config, ADMIN, DECIDE), &approval, "approve").await;
    assert_eq!(admin.0, StatusCode::FORBIDDEN, "an admin decides only once escalated: {}", admin.1);
    assert_eq!(state_and_reason(db, id).await.0, "authz_pending", "nothing changed");

    let (status, answer) = decide(&app, &supervisor, &approval, "approve").await;
    assert_eq!((status, answer["outcome"].as_str()), (StatusCode::OK, Some("approved")), "{answer}");
    assert_eq!(settled(db, id).await, "executed");
    let moves: Vec<String> =
        db.store.commands().transitions(id).await.expect("moves").iter().map(|m| m.event.to_string()).collect();
    let expected = ["canonicalize", "request_confirmation", "confirm", "submit_for_authorization", "allow", "start"];
    assert_eq!(moves, [&expected[..], &["succeed"]].concat());
    assert_eq!(db.count("SELECT COUNT(*) FROM outbox WHERE kind = $1", "dispatch").await, 1, "dispatched once");
    let told: Vec<String> = replies_to(db, CUSTOMER).await.into_iter().map(|(t, _)| t).collect();
    assert!(told.contains(&"confirmed".to_owned()) && told.contains(&"executed".to_owned()), "{told:?}");
    // A second decision, now that it is settled, changes nothing.
    let again = decide(&app, &token_as(&db.config, SECOND_SUPERVISOR, DECIDE), &approval, "deny").await;
    assert_eq!((again.0, again.1["status"].as_str()), (StatusCode::CONFLICT, Some("approved")));
    // The chain holds the request, the decision and the settling, and still verifies.
    let evidence = db.store.evidence().for_command("demo", id).await.expect("evidence");
    let kinds: Vec<String> = evidence.into_iter().map(|a| a.kind).collect();
    assert!(kinds.contains(&"approval.decided".to_owned()), "{kinds:?}");
    let audit = db.store.evidence().verify().await.expect("audit");
    assert!(audit.first_break.is_none(), "{audit:?}");
    app.stop().await.expect("stop");
}

async fn a_denial_rejects_the_request_and_the_requester_is_told(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let id = asked_and_confirmed(db, &app, CUSTOMER, "refund 1234 250.00").await;
    let supervisor = token_as(&db.config, SUPERVISOR, DECIDE);
    let approval = listed(&app, &supervisor, id).await;
    let (status, answer) = decide(&app, &supervisor, &approval, "deny").await;
    assert_eq!((status, answer["outcome"].as_str()), (StatusCode::OK, Some("denied")));
    assert_eq!(state_and_reason(db, id).await, ("rejected".into(), Some("approval_denied".into())));
    let told = replies_to(db, CUSTOMER).await;
    assert!(told.iter().any(|(t, v)| t == "rejected" && v["reason"] == "approval_denied"), "{told:?}");
    assert_eq!(db.count("SELECT COUNT(*) FROM outbox WHERE kind = $1", "dispatch").await, 0, "never dispatched");
    app.stop().await.expect("stop");
}

async fn over_1000_needs_two_distinct_supervisors_and_no_one_approves_their_own(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let (first, second) = (token_as(&db.config, SUPERVISOR, DECIDE), token_as(&db.config, SECOND_SUPERVISOR, DECIDE));
    let large = asked_and_confirmed(db, &app, ADMIN, "refund 1234 1500.00").await;
    let approval = listed(&app, &first, large).await;
    let (status, answer) = decide(&app, &first, &approval, "approve").await;
    assert_eq!((status, answer["outcome"].as_str()), (StatusCode::OK, Some("recorded")), "{answer}");
    assert_eq!(answer["missing"], json!([{"rule": "refund over 1,000.00", "approvals": 1, "roles": ["supervisor"]}]));
    // Approving twice counts once.
    let twice = decide(&app, &first, &approval, "approve").await;
    assert_eq!((twice.0, twice.1["code"].as_str()), (StatusCode::CONFLICT, Some("already_decided")));
    assert_eq!(state_and_reason(db, large).await.0, "authz_pending");
    let (status, answer) = decide(&app, &second, &approval, "approve").await;
    assert_eq!((status, answer["outcome"].as_str()), (StatusCode::OK, Some("approved")));
    assert_eq!(settled(db, large).await, "executed");

    // A supervisor's own refund over 100.00 waits for the other supervisor, never themselves.
    let own = asked_and_confirmed(db, &app, SUPERVISOR, "refund 4321 150.00").await;
    let approval = listed(&app, &first, own).await;
    let refused = decide(&app, &first, &approval, "approve").await;
    assert_eq!((refused.0, refused.1["code"].as_str()), (StatusCode::FORBIDDEN, Some("not_yours_to_decide")));
    assert_eq!(decide(&app, &second, &approval, "approve").await.0, StatusCode::OK);
    assert_eq!(settled(db, own).await, "executed");
    app.stop().await.expect("stop");
}

async fn two_supervisors_approving_at_once_make_one_execution(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let id = asked_and_confirmed(db, &app, CUSTOMER, "refund 1234 250.00").await;
    let (first, second) = (token_as(&db.config, SUPERVISOR, DECIDE), token_as(&db.config, SECOND_SUPERVISOR, DECIDE));
    let approval = listed(&app, &first, id).await;
    let (a, b) = tokio::join!(decide(&app, &first, &approval, "approve"), decide(&app, &second, &approval, "approve"));
    let approved = [&a, &b].iter().filter(|(_, answer)| answer["outcome"] == "approved").count();
    let settled_before = [&a, &b].iter().filter(|(status, _)| *status == StatusCode::CONFLICT).count();
    assert_eq!((approved, settled_before), (1, 1), "{a:?} {b:?}");
    assert_eq!(settled(db, id).await, "executed");
    assert_eq!(db.count("SELECT COUNT(*) FROM outbox WHERE kind = $1", "dispatch").await, 1, "one execution");
    app.stop().await.expect("stop");
}

async fn an_approval_nobody_completes_in_time_is_rejected_by_the_sweep(db: &TestDb) {
    // The shipped policy with a wait of two seconds for a customer's refund over their limit.
    let commands = chatgate::config::SHIPPED_COMMANDS.replacen(
        "within = \"4h\"\nescalate = { after = \"1h\", to = [\"admin\"] }",
        "within = \"2s\"",
        1,
    );
    assert_ne!(commands, chatgate::config::SHIPPED_COMMANDS, "the shipped policy reads as expected");
    let app = spawn_app_with_registry(db, db.config.clone(), &commands).await;
    let id = asked_and_confirmed(db, &app, CUSTOMER, "refund 1234 80.00").await;
    assert_eq!(state_and_reason(db, id).await.0, "authz_pending");
    assert_eq!(settled(db, id).await, "rejected", "the sweep ends the wait");
    assert_eq!(state_and_reason(db, id).await.1.as_deref(), Some("approval_expired"));
    let told = replies_to(db, CUSTOMER).await;
    assert!(told.iter().any(|(t, v)| t == "rejected" && v["reason"] == "approval_expired"), "{told:?}");
    assert_eq!(db.count("SELECT COUNT(*) FROM approvals WHERE status = $1", "expired").await, 1);
    app.stop().await.expect("stop");
}

async fn a_decision_on_an_unknown_or_foreign_approval_changes_nothing(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let supervisor = token_as(&db.config, SUPERVISOR, DECIDE);
    let unknown = json!({"approval_id": Uuid::now_v7().to_string()});
    let (status, problem) = decide(&app, &supervisor, &unknown, "approve").await;
    assert_eq!((status, problem["status"].as_u64()), (StatusCode::NOT_FOUND, Some(404)));
    let id = asked_and_confirmed(db, &app, CUSTOMER, "refund 1234 250.00").await;
    let approval = listed(&app, &supervisor, id).await;
    // Another tenant's token sees no such approval.
    let foreign = crate::e2e_security::token_for_tenant(&db.config, "other", "approvals:decide");
    assert_eq!(decide(&app, &foreign, &approval, "approve").await.0, StatusCode::NOT_FOUND);
    // Not a decision: 400, nothing recorded.
    let id_text = approval["approval_id"].as_str().expect("id");
    let bad = app
        .client
        .post(app.url(&format!("/v1/approvals/{id_text}/decision")))
        .bearer_auth(&supervisor)
        .json(&json!({"decision": "maybe"}))
        .send()
        .await
        .expect("request");
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    assert_eq!(db.count("SELECT COUNT(*) FROM approval_decisions WHERE approver <> $1", "").await, 0);
    // Without the scope: 403 from the bearer check.
    let reader = token_as(&db.config, SUPERVISOR, "approvals:read");
    assert_eq!(decide(&app, &reader, &approval, "approve").await.0, StatusCode::FORBIDDEN);
    assert_eq!(state_and_reason(db, id).await.0, "authz_pending");
    app.stop().await.expect("stop");
}

async fn tap(db: &TestDb, app: &TestApp, id: &str, from: &str, button: &str) {
    use chatgate::channels::whatsapp::simulate;
    let tapped = simulate::button_reply(id, from, button, "Approve");
    let meta = Meta::new(app, db);
    assert_eq!(meta.post(&simulate::notification(DEMO_NUMBER, vec![tapped], vec![])).await.status(), 200);
}

async fn supervisors_are_asked_on_whatsapp_and_a_tap_decides_once(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let id = asked_and_confirmed(db, &app, CUSTOMER, "refund 1234 250.00").await;
    // Each supervisor is asked on WhatsApp, with Approve and Deny; the requester is not.
    for supervisor in [SUPERVISOR, SECOND_SUPERVISOR] {
        let asked = replies_to(db, supervisor).await;
        let (_, vars) = asked.iter().find(|(t, _)| t == "approval_request").expect("asked");
        let (requester, what) = (vars["requester"].as_str(), vars["what"].as_str());
        assert_eq!((requester, what), (Some("Demo customer"), Some("refund 250 on order 1234")));
    }
    assert!(replies_to(db, CUSTOMER).await.iter().all(|(t, _)| t != "approval_request"));
    let outbox = db.outbox().await;
    let asked = outbox.iter().find(|(_, p)| p["template"] == "approval_request" && p["to"] == SUPERVISOR);
    let buttons = asked.expect("asked").1["buttons"].as_array().expect("buttons").clone();
    let ids: Vec<String> = buttons.iter().filter_map(|b| b["id"].as_str().map(str::to_owned)).collect();
    assert_eq!(ids.len(), 2);
    assert!(ids[0].starts_with("cg:approve:") && ids[1].starts_with("cg:deny:"), "{ids:?}");

    // The customer tapping their own request's button decides nothing.
    tap(db, &app, "wamid.T0", CUSTOMER, &ids[0]).await;
    assert_eq!(state_and_reason(db, id).await.0, "authz_pending");
    tap(db, &app, "wamid.T1", SUPERVISOR, &ids[0]).await;
    assert_eq!(settled(db, id).await, "executed");
    let told = replies_to(db, SUPERVISOR).await;
    assert!(told.iter().any(|(t, v)| t == "approval_answer" && v["outcome"] == "approved"), "{told:?}");
    // The other supervisor's later tap: already approved, nothing changes.
    tap(db, &app, "wamid.T2", SECOND_SUPERVISOR, &ids[1]).await;
    let told = replies_to(db, SECOND_SUPERVISOR).await;
    let settled_before = |(t, v): &(String, Value)| t == "approval_answer" && v["outcome"] == "settled";
    assert!(told.iter().any(|answer| settled_before(answer) && answer.1["status"] == "approved"), "{told:?}");
    let customer = replies_to(db, CUSTOMER).await;
    assert!(customer.iter().any(|(t, v)| t == "approval_answer" && v["outcome"] == "own_request"), "{customer:?}");
    assert_eq!(db.count("SELECT COUNT(*) FROM outbox WHERE kind = $1", "dispatch").await, 1, "one execution");
    app.stop().await.expect("stop");
}

async fn override_with(app: &TestApp, token: &str, approval: &Value, body: Value) -> (StatusCode, Value) {
    let id = approval["approval_id"].as_str().expect("id");
    let url = app.url(&format!("/v1/approvals/{id}/override"));
    let response = app.client.post(url).bearer_auth(token).json(&body).send().await.expect("override");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn break_glass_overrides_only_with_the_operators_step_up_and_a_reason(db: &TestDb) {
    use crate::e2e_security::step_up_token_of;
    let app = spawn_app_with(db, db.config.clone()).await;
    let id = asked_and_confirmed(db, &app, CUSTOMER, "refund 1234 250.00").await;
    let approval = listed(&app, &token_as(&db.config, SUPERVISOR, DECIDE), id).await;
    let command = db.store.commands().get(&tenant("demo"), id).await.expect("read").expect("command");
    let key = command.envelope.idempotency_key.as_str().to_owned();
    let operator = token_as(&db.config, "ops-oncall", "approvals:override approvals:read commands:read");
    let proof = step_up_token_of(&db.config, "ops-oncall", id, &key);
    let reason = "the customer is on the phone, order verified by hand";
    // Without the scope, a decider cannot override.
    let decider = token_as(&db.config, SUPERVISOR, DECIDE);
    let body = json!({"reason": reason, "step_up_token": proof});
    assert_eq!(override_with(&app, &decider, &approval, body.clone()).await.0, StatusCode::FORBIDDEN);
    // A reason that says nothing, or someone else's proof: refused, nothing changes.
    let short = override_with(&app, &operator, &approval, json!({"reason": "urgent", "step_up_token": proof})).await;
    assert_eq!(short.0, StatusCode::BAD_REQUEST, "{}", short.1);
    let theirs = step_up_token_of(&db.config, CUSTOMER, id, &key);
    let mismatch = override_with(&app, &operator, &approval, json!({"reason": reason, "step_up_token": theirs})).await;
    assert_eq!((mismatch.0, mismatch.1["code"].as_str()), (StatusCode::FORBIDDEN, Some("step_up_mismatch")));
    assert_eq!(state_and_reason(db, id).await.0, "authz_pending");

    let (status, answer) = override_with(&app, &operator, &approval, body.clone()).await;
    assert_eq!((status, answer["outcome"].as_str()), (StatusCode::OK, Some("overridden")), "{answer}");
    assert_eq!(settled(db, id).await, "executed");
    assert_eq!(answer["approval"]["status"], "overridden");
    // Shown on the command, its own evidence kind with the reason, the chain intact.
    let url = app.url(&format!("/v1/commands/{id}"));
    let shown: Value =
        app.client.get(url).bearer_auth(&operator).send().await.expect("read").json().await.expect("json");
    assert_eq!(
        (shown["approval"]["status"].as_str(), shown["approval"]["settled_by"].as_str()),
        (Some("overridden"), Some("ops-oncall"))
    );
    let evidence = db.store.evidence().for_command("demo", id).await.expect("evidence");
    let overridden = evidence.iter().find(|a| a.kind == "approval.overridden").expect("its own evidence");
    assert_eq!(overridden.body["decision"]["reason"], reason);
    assert!(db.store.evidence().verify().await.expect("audit").first_break.is_none());
    // Once: the approval is settled, and the proof is used.
    let again = override_with(&app, &operator, &approval, body).await;
    assert_eq!((again.0, again.1["code"].as_str()), (StatusCode::CONFLICT, Some("approval_settled")));
    assert_eq!(db.count("SELECT COUNT(*) FROM consumed_tokens WHERE jti <> $1", "").await, 1);
    app.stop().await.expect("stop");
}

async fn an_escalation_that_comes_due_asks_the_next_role_who_may_then_decide(db: &TestDb) {
    // The shipped policy with a customer's refund over their limit escalating to admins at once.
    let commands = chatgate::config::SHIPPED_COMMANDS.replacen(
        "within = \"4h\"\nescalate = { after = \"1h\", to = [\"admin\"] }",
        "within = \"4h\"\nescalate = { after = \"1s\", to = [\"admin\"] }",
        1,
    );
    assert_ne!(commands, chatgate::config::SHIPPED_COMMANDS, "the shipped policy reads as expected");
    let mut config = db.config.clone();
    config.outbound.confirmation_sweep_ms = 50;
    let app = spawn_app_with_registry(db, config, &commands).await;
    let id = asked_and_confirmed(db, &app, CUSTOMER, "refund 1234 80.00").await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !replies_to(db, ADMIN).await.iter().any(|(t, _)| t == "approval_request") {
        assert!(std::time::Instant::now() < deadline, "the admins were never asked");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // Asked once, by the escalation (its evidence says whom), not with the supervisors.
    let asked = replies_to(db, ADMIN).await.into_iter().filter(|(t, _)| t == "approval_request").count();
    assert_eq!(asked, 1);
    let evidence = db.store.evidence().for_command("demo", id).await.expect("evidence");
    let escalated: Vec<_> = evidence.iter().filter(|a| a.kind == "approval.escalated").collect();
    assert_eq!(escalated.len(), 1, "escalated once");
    assert_eq!(escalated[0].body["decision"]["roles"], json!(["admin"]));
    let approval = listed(&app, &token_as(&db.config, ADMIN, DECIDE), id).await;
    let (status, answer) = decide(&app, &token_as(&db.config, ADMIN, DECIDE), &approval, "approve").await;
    assert_eq!((status, answer["outcome"].as_str()), (StatusCode::OK, Some("approved")), "{answer}");
    assert_eq!(settled(db, id).await, "executed");
    app.stop().await.expect("stop");
}
