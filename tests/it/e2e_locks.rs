//! Locks on what a mutation changes (issue #47), on both backends: a refund holds its order from
//! admission until it ends, so that two people refunding one order at the same moment — on two
//! channels — make one change, the other refused at once and told which request holds it. Every
//! way a command ends releases what it held (a test per way); an operator may release a lock,
//! with a reason, as evidence. The shipped registry locks refunds with `lock = "refuse"`.

use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use chatgate::domain::command::ShortRef;

use crate::e2e_approvals::{asked_and_confirmed, decide, listed, state_and_reason};
use crate::e2e_security::token_as;
use crate::e2e_slack::{Signed, Slack, message};
use crate::fake_graph::FakeServer;
use crate::helpers::{
    ADMIN, CUSTOMER, Meta, TestApp, TestDb, command_of_message, confirmation_of, on_both_backends, settled,
    spawn_app_with,
};

on_both_backends!(
    two_people_refunding_one_order_at_once_on_two_channels_make_one_change,
    an_executed_refund_releases_its_order,
    a_declined_refund_releases_its_order,
    an_expired_confirmation_releases_its_order,
    a_denied_approval_releases_its_order,
    a_failed_execution_releases_its_order,
    an_operators_cancel_releases_its_order,
    a_refund_past_its_ttl_releases_its_order,
    an_operator_releases_a_lock_with_a_reason_and_its_evidence,
    reads_and_other_orders_never_wait_for_a_lock,
);

const LOCKS: &str = "locks:read locks:release";

/// The tenant's locks, as `GET /v1/locks` lists them.
async fn locks(app: &TestApp, db: &TestDb) -> Vec<Value> {
    let token = token_as(&db.config, ADMIN, LOCKS);
    let response = app.client.get(app.url("/v1/locks")).bearer_auth(token).send().await.expect("locks");
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.expect("json");
    body["locks"].as_array().expect("locks").clone()
}

async fn held(db: &TestDb) -> i64 {
    db.count("SELECT COUNT(*) FROM resource_locks WHERE tenant_id = $1", "demo").await
}

/// `who` asks for `text` on WhatsApp and is asked to confirm: the command and its code.
async fn prompted(db: &TestDb, app: &TestApp, (id, who, text): (&str, &str, &str)) -> (Uuid, String) {
    assert_eq!(Meta::new(app, db).text(id, who, text).await.status(), 200);
    let (command, _, code) = confirmation_of(db, id).await;
    assert_eq!(state_and_reason(db, command).await.0, "confirmation_required");
    (command, code)
}

/// `message`'s command was refused because `holder` held its order, and its person told so.
async fn refused_by(db: &TestDb, refused: Uuid, holder: Uuid) {
    assert_eq!(state_and_reason(db, refused).await, ("rejected".into(), Some("resource_locked".into())));
    let evidence = db.store.evidence().for_command("demo", refused).await.expect("evidence");
    let decision = evidence.iter().find_map(|a| a.body["decision"]["holder"].as_str().map(str::to_owned));
    assert_eq!(decision, Some(holder.to_string()), "the refusal names the holder in its evidence");
}

/// After an end, the order is free: nothing held, and another person's refund of it is prompted
/// (the words a refused person sent before, too: a refusal keeps no key).
async fn free_again(db: &TestDb, app: &TestApp, next: &str) {
    assert_eq!(held(db).await, 0, "the end released the order");
    prompted(db, app, (next, ADMIN, "refund 1234 7.00")).await;
    assert_eq!(held(db).await, 1, "the next refund holds it");
}

async fn two_people_refunding_one_order_at_once_on_two_channels_make_one_change(db: &TestDb) {
    let slack = Slack::start(db).await;
    let meta = Meta::new(&slack.app, db);
    // The customer on Slack and the admin on WhatsApp, at the same moment.
    let on_slack = message("Ev0LOCK1", "1764150000.000101", "refund 1234 25.00").to_string();
    let (whatsapp, slack_answer) = tokio::join!(
        meta.text("wamid.L1", ADMIN, "refund 1234 30.00"),
        slack.post("/webhooks/slack/events", "application/json", &on_slack, Signed::Now),
    );
    assert_eq!((whatsapp.status(), slack_answer.0), (StatusCode::OK, StatusCode::OK));
    let admins = command_of_message(db, "wamid.L1").await;
    let customers = command_of_message(db, "Ev0LOCK1").await;
    let states = [state_and_reason(db, admins).await.0, state_and_reason(db, customers).await.0];
    let (holder, refused) = match states.each_ref().map(String::as_str) {
        ["confirmation_required", "rejected"] => (admins, customers),
        ["rejected", "confirmation_required"] => (customers, admins),
        other => panic!("one refund holds the order, the other is refused: {other:?}"),
    };
    refused_by(db, refused, holder).await;
    // The refused person is told which request holds it, by its reference — never by whose it is.
    let outbox = db.outbox().await;
    let mut told = outbox.iter().filter(|(kind, p)| kind == "message" && p["vars"]["reason"] == "resource_locked");
    let (_, told) = told.next().expect("the refused person is told");
    let channel = if refused == admins { "whatsapp" } else { "slack" };
    assert_eq!((told["template"].as_str(), told["channel"].as_str()), (Some("failed"), Some(channel)), "{told}");
    let vars = &told["vars"];
    assert_eq!(vars["error"]["holder"], ShortRef::of(holder).to_string());
    assert!(!vars.to_string().contains(CUSTOMER) && !vars.to_string().contains(ADMIN), "{vars}");
    // The lock, as operators see it.
    let listed = locks(&slack.app, db).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        (listed[0]["resource"].as_str(), listed[0]["command_id"].as_str()),
        (Some("order:1234"), Some(&*holder.to_string()))
    );
    assert_eq!(listed[0]["state"], "confirmation_required");

    // The holder confirms on its own channel: executed once, and the order is free again.
    let code = code_of(db, holder).await;
    if holder == admins {
        meta.text("wamid.L1-yes", ADMIN, &format!("YES {code}")).await;
    } else {
        let yes = message("Ev0LOCK2", "1764150000.000102", &format!("YES {code}")).to_string();
        assert_eq!(slack.post("/webhooks/slack/events", "application/json", &yes, Signed::Now).await.0, StatusCode::OK);
    }
    assert_eq!(settled(db, holder).await, "executed");
    assert_eq!(db.count("SELECT COUNT(*) FROM outbox WHERE kind = $1", "dispatch").await, 1, "one change");
    assert!(locks(&slack.app, db).await.is_empty(), "released when it executed");
    slack.app.stop().await.expect("stop");
}

/// The code of the confirmation `command` waits for.
async fn code_of(db: &TestDb, command: Uuid) -> String {
    let mut conn = db.raw().await;
    let row = sqlx::query("SELECT code FROM confirmations WHERE command_id = $1")
        .bind(command.to_string())
        .fetch_one(&mut conn)
        .await
        .expect("its confirmation");
    sqlx::Row::try_get(&row, 0).expect("code")
}

async fn an_executed_refund_releases_its_order(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let (id, code) = prompted(db, &app, ("wamid.X1", CUSTOMER, "refund 1234 25.00")).await;
    let other = refused_refund(db, &app, "wamid.X2").await;
    refused_by(db, other, id).await;
    Meta::new(&app, db).text("wamid.X1-yes", CUSTOMER, &format!("YES {code}")).await;
    assert_eq!(settled(db, id).await, "executed");
    free_again(db, &app, "wamid.X3").await;
    app.stop().await.expect("stop");
}

/// The admin's refund of the held order: refused.
async fn refused_refund(db: &TestDb, app: &TestApp, message_id: &str) -> Uuid {
    assert_eq!(Meta::new(app, db).text(message_id, ADMIN, "refund 1234 7.00").await.status(), 200);
    command_of_message(db, message_id).await
}

async fn a_declined_refund_releases_its_order(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let (id, code) = prompted(db, &app, ("wamid.D1", CUSTOMER, "refund 1234 25.00")).await;
    assert_eq!(held(db).await, 1);
    Meta::new(&app, db).text("wamid.D1-no", CUSTOMER, &format!("NO {code}")).await;
    assert_eq!(state_and_reason(db, id).await, ("canceled".into(), Some("confirmation_declined".into())));
    free_again(db, &app, "wamid.D2").await;
    app.stop().await.expect("stop");
}

async fn an_expired_confirmation_releases_its_order(db: &TestDb) {
    let mut config = db.config.clone();
    config.outbound.confirmation_sweep_ms = 50;
    let app = spawn_app_with(db, config).await;
    let (id, _) = prompted(db, &app, ("wamid.E1", CUSTOMER, "refund 1234 25.00")).await;
    crate::e2e_conversation::expire_now(db, id).await;
    assert_eq!(settled(db, id).await, "canceled");
    assert_eq!(state_and_reason(db, id).await.1.as_deref(), Some("confirmation_expired"));
    free_again(db, &app, "wamid.E2").await;
    app.stop().await.expect("stop");
}

async fn a_denied_approval_releases_its_order(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    // Over 100.00: it waits for a supervisor, holding the order all the while.
    let id = asked_and_confirmed(db, &app, CUSTOMER, "refund 1234 250.00").await;
    assert_eq!(state_and_reason(db, id).await.0, "authz_pending");
    assert_eq!(held(db).await, 1, "held while it waits for approval");
    let supervisor = token_as(&db.config, "15550000003", "approvals:read approvals:decide");
    let approval = listed(&app, &supervisor, id).await;
    assert_eq!(decide(&app, &supervisor, &approval, "deny").await.0, StatusCode::OK);
    assert_eq!(state_and_reason(db, id).await, ("rejected".into(), Some("approval_denied".into())));
    free_again(db, &app, "wamid.A2").await;
    app.stop().await.expect("stop");
}

async fn a_failed_execution_releases_its_order(db: &TestDb) {
    let executor = FakeServer::executor().await;
    executor.answer_next(422, json!({"error": {"code": "order_closed", "message": "closed"}}), None);
    let mut config = db.config.clone();
    config.outbound.poll_interval_ms = 20;
    config.executors.get_mut("orders").expect("orders").url = executor.url.clone();
    let app = spawn_app_with(db, config).await;
    let (id, code) = prompted(db, &app, ("wamid.F1", CUSTOMER, "refund 1234 25.00")).await;
    Meta::new(&app, db).text("wamid.F1-yes", CUSTOMER, &format!("YES {code}")).await;
    assert_eq!(settled(db, id).await, "failed");
    executor.exactly(1).await;
    free_again(db, &app, "wamid.F2").await;
    app.stop().await.expect("stop");
}

async fn an_operators_cancel_releases_its_order(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let (id, _) = prompted(db, &app, ("wamid.C1", CUSTOMER, "refund 1234 25.00")).await;
    let ops = token_as(&db.config, ADMIN, "commands:read recovery:write");
    let cancel = app.client.post(app.url(&format!("/v1/commands/{id}/recovery"))).bearer_auth(ops);
    let response = cancel.json(&json!({"action": "cancel"})).send().await.expect("cancel");
    assert!(response.status().is_success(), "{}", response.text().await.unwrap_or_default());
    assert_eq!(settled(db, id).await, "canceled");
    free_again(db, &app, "wamid.C2").await;
    app.stop().await.expect("stop");
}

async fn release(app: &TestApp, db: &TestDb, resource: &str, reason: &str) -> (StatusCode, Value) {
    let token = token_as(&db.config, ADMIN, LOCKS);
    let url = app.url(&format!("/v1/locks/{resource}/release"));
    let response = app.client.post(url).bearer_auth(token).json(&json!({"reason": reason})).send().await.expect("post");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn an_operator_releases_a_lock_with_a_reason_and_its_evidence(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let (id, _) = prompted(db, &app, ("wamid.R1", CUSTOMER, "refund 1234 25.00")).await;
    // Bad requests change nothing: a short reason, an unknown resource, a reader's token.
    let (status, body) = release(&app, db, "order:1234", "because").await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::BAD_REQUEST, Some("invalid_body")), "{body}");
    assert_eq!(release(&app, db, "order:9999", "the order was closed by hand").await.0, StatusCode::NOT_FOUND);
    let reader = token_as(&db.config, ADMIN, "locks:read");
    let url = app.url("/v1/locks/order:1234/release");
    let forbidden = app.client.post(url).bearer_auth(reader).json(&json!({"reason": "a reader tries it"})).send();
    assert_eq!(forbidden.await.expect("post").status(), StatusCode::FORBIDDEN);
    assert_eq!(held(db).await, 1, "nothing released");

    let (status, body) = release(&app, db, "order:1234", "the customer asked on the phone instead").await;
    assert_eq!((status, body["command_id"].as_str()), (StatusCode::OK, Some(&*id.to_string())), "{body}");
    let evidence = db.store.evidence().for_command("demo", id).await.expect("evidence");
    let released = evidence.iter().find(|a| a.kind == "lock.released").expect("evidence of the release");
    assert_eq!(released.artifact_id.to_string(), body["evidence_id"].as_str().unwrap_or_default());
    assert_eq!(released.body["decision"]["reason"], "the customer asked on the phone instead");
    assert_eq!(released.body["decision"]["resource"], "order:1234");
    assert!(db.store.evidence().verify().await.expect("audit").first_break.is_none());
    // The command goes on; the order is free for another.
    assert_eq!(state_and_reason(db, id).await.0, "confirmation_required");
    free_again(db, &app, "wamid.R2").await;
    assert_eq!(release(&app, db, "order:1234", "again, once it moved on").await.0, StatusCode::OK);
    assert_eq!(release(&app, db, "order:1234", "a second release of nothing").await.0, StatusCode::NOT_FOUND);
    app.stop().await.expect("stop");
}

async fn reads_and_other_orders_never_wait_for_a_lock(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let (held_by, _) = prompted(db, &app, ("wamid.O1", CUSTOMER, "refund 1234 25.00")).await;
    // A read of the held order runs at once; a refund of another order is prompted.
    Meta::new(&app, db).text("wamid.O2", ADMIN, "order status 1234").await;
    let read = command_of_message(db, "wamid.O2").await;
    assert_eq!(settled(db, read).await, "executed");
    prompted(db, &app, ("wamid.O3", ADMIN, "refund 4410 5.00")).await;
    assert_eq!(held(db).await, 2);
    // The same person sending the same refund again is a duplicate, not a lock refusal.
    Meta::new(&app, db).text("wamid.O4", CUSTOMER, "refund 1234 25.00").await;
    assert_eq!(state_and_reason(db, held_by).await.0, "confirmation_required");
    assert_eq!(db.count("SELECT COUNT(*) FROM commands WHERE reason_code = $1", "resource_locked").await, 0);
    app.stop().await.expect("stop");
}

async fn a_refund_past_its_ttl_releases_its_order(db: &TestDb) {
    let mut config = db.config.clone();
    config.outbound.poll_interval_ms = 20;
    let app = spawn_app_with(db, config).await;
    // The agent paused: the confirmed refund is started but never handed over, holding its order.
    let admin = token_as(&db.config, ADMIN, "agents:admin");
    let paused = app.client.post(app.url("/v1/agents/orders/pause")).bearer_auth(admin).json(&json!({}));
    assert_eq!(paused.send().await.expect("pause").status(), StatusCode::OK);
    let (id, code) = prompted(db, &app, ("wamid.T1", CUSTOMER, "refund 1234 25.00")).await;
    Meta::new(&app, db).text("wamid.T1-yes", CUSTOMER, &format!("YES {code}")).await;
    let started = std::time::Instant::now();
    while state_and_reason(db, id).await.0 != "started" {
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "never started");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(held(db).await, 1, "held while it waits for its agent");
    let mut conn = db.raw().await;
    sqlx::query("UPDATE commands SET expires_at = 1 WHERE command_id = $1")
        .bind(id.to_string())
        .execute(&mut conn)
        .await
        .expect("expire");
    assert_eq!(settled(db, id).await, "canceled");
    assert_eq!(state_and_reason(db, id).await.1.as_deref(), Some("TTL_EXPIRED"));
    free_again(db, &app, "wamid.T2").await;
    app.stop().await.expect("stop");
}
