//! Approvals where gateways run as a deployment does (issue #46, goals 4 and 6): three instances
//! on one PostgreSQL count each approver once and execute once when approvers decide at the same
//! moment on different instances; a pending approval is rows, so it outlives a gateway killed
//! with SIGKILL and is decided on the next one.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::e2e_security::token_as;
use crate::fake_graph::FakeServer;
use crate::helpers::{CUSTOMER, Meta, TestApp, TestDb, on_both_backends, respawn_app_with, tenant, whatsapp_text_to};
use crate::process::ConfigDir;

on_both_backends!(a_pending_approval_outlives_a_gateway_killed_with_sigkill);

const SUPERVISOR: &str = "15550000003";
const SECOND_SUPERVISOR: &str = "15550000004";
const DECIDE: &str = "approvals:read approvals:decide";

/// `who` asks for `text` through `app` and confirms it; the command, waiting for approval.
async fn waiting_for_approval(db: &TestDb, app: &TestApp, id: &str, text: &str) -> Uuid {
    let meta = Meta::new(app, db);
    assert_eq!(meta.text(id, CUSTOMER, text).await.status(), StatusCode::OK);
    let (command, _, code) = crate::helpers::confirmation_of(db, id).await;
    assert_eq!(meta.text(&format!("{id}-yes"), CUSTOMER, &format!("YES {code}")).await.status(), StatusCode::OK);
    state_becomes(db, command, "authz_pending").await;
    command
}

async fn state_becomes(db: &TestDb, id: Uuid, want: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let command = db.store.commands().get(&tenant("demo"), id).await.expect("read").expect("command");
        if command.lifecycle.state.as_str() == want {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "still {}", command.lifecycle.state);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn approval_of(db: &TestDb, command: Uuid) -> Uuid {
    db.store.approvals().of_command(&tenant("demo"), command).await.expect("read").expect("an approval").id
}

async fn approve(app: &TestApp, who: &str, db: &TestDb, approval: Uuid) -> (StatusCode, Value) {
    let response = app
        .client
        .post(app.url(&format!("/v1/approvals/{approval}/decision")))
        .bearer_auth(token_as(&db.config, who, DECIDE))
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .expect("decision");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_instances_count_each_approver_once_and_execute_once() {
    let Some(db) = TestDb::postgres().await else { return };
    let executor = FakeServer::succeeding_executor().await;
    let mut config = db.config.clone();
    config.executors.get_mut("orders").expect("orders").url = executor.url.clone();
    let mut apps: Vec<TestApp> = vec![];
    for _ in 0..3 {
        apps.push(respawn_app_with(config.clone()).await);
    }
    let one = waiting_for_approval(&db, &apps[0], "wamid.SC1", "refund 1234 250.00").await;
    let two = waiting_for_approval(&db, &apps[0], "wamid.SC2", "refund 4321 1500.00").await;
    let (one_approval, two_approval) = (approval_of(&db, one).await, approval_of(&db, two).await);
    // Both supervisors at the same moment, each on another instance, on both requests.
    let (a, b, c, d) = tokio::join!(
        approve(&apps[1], SUPERVISOR, &db, one_approval),
        approve(&apps[2], SECOND_SUPERVISOR, &db, one_approval),
        approve(&apps[1], SUPERVISOR, &db, two_approval),
        approve(&apps[2], SECOND_SUPERVISOR, &db, two_approval),
    );
    let outcomes = |answers: [&(StatusCode, Value); 2]| {
        let mut outcomes: Vec<String> =
            answers.iter().map(|(s, v)| format!("{} {}", s.as_u16(), v["outcome"].as_str().unwrap_or("-"))).collect();
        outcomes.sort();
        outcomes
    };
    assert_eq!(outcomes([&a, &b]), ["200 approved", "409 -"], "one settles the one-supervisor request");
    assert_eq!(outcomes([&c, &d]), ["200 approved", "200 recorded"], "the second completes the two-supervisor one");
    for id in [one, two] {
        assert_eq!(crate::helpers::settled(&db, id).await, "executed");
    }
    executor.exactly(2).await; // each request executed once
    // Every decision made while its approval was pending is kept, each with its evidence: the
    // other supervisor's on the one-supervisor request too when it came before the settling (it
    // then changed nothing else), not when it came after.
    let decisions = db.count("SELECT COUNT(*) AS n FROM approval_decisions WHERE approver <> $1", "-").await;
    assert!((3..=4).contains(&decisions), "{decisions} decisions");
    let decided = db.count("SELECT COUNT(*) AS n FROM evidence WHERE kind = $1", "approval.decided").await;
    assert_eq!(decided, decisions, "each decision has its evidence");
    let audit = db.store.evidence().verify().await.expect("verify");
    assert!(audit.chains.iter().all(|c| c.intact), "{:?}", audit.first_break);
    for app in apps {
        app.stop().await.ok();
    }
}

async fn a_pending_approval_outlives_a_gateway_killed_with_sigkill(db: &TestDb) {
    let executor = FakeServer::succeeding_executor().await;
    let config = ConfigDir::shipped(|config| config);
    let env = [("CHATGATE_DATABASE_URL", db.url.as_str()), ("CHATGATE_ORDERS_EXECUTOR_URL", executor.url.as_str())];
    let mut first = crate::process::start(&config.path(), &env).await;
    let base = first.base.clone();
    whatsapp_text_to(db, &base, ("wamid.KILL1", CUSTOMER, "refund 1234 250.00")).await;
    let (id, _, code) = crate::helpers::confirmation_of(db, "wamid.KILL1").await;
    whatsapp_text_to(db, &base, ("wamid.KILL2", CUSTOMER, &format!("YES {code}"))).await;
    state_becomes(db, id, "authz_pending").await;
    let approval = approval_of(db, id).await;
    first.kill();

    let mut config = db.config.clone();
    config.executors.get_mut("orders").expect("orders").url = executor.url.clone();
    let second = respawn_app_with(config).await;
    let listed = second
        .client
        .get(second.url(&format!("/v1/approvals/{approval}")))
        .bearer_auth(token_as(&db.config, SUPERVISOR, DECIDE))
        .send()
        .await
        .expect("read");
    let listed: Value = listed.json().await.expect("json");
    assert_eq!(listed["status"], "pending", "the approval is still there: {listed}");
    let (status, answer) = approve(&second, SUPERVISOR, db, approval).await;
    assert_eq!((status, answer["outcome"].as_str()), (StatusCode::OK, Some("approved")), "{answer}");
    assert_eq!(crate::helpers::settled(db, id).await, "executed");
    assert_eq!(executor.requests().len(), 1, "executed once");
    second.stop().await.ok();
}
