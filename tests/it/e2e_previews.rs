//! Previews (issue #47), on both backends: a refund whose registry entry says `preview` is shown
//! to its person with what its executor says it would do — on WhatsApp and on Slack, as the
//! provider's stand-in receives the prompt —, the confirmation bound to the preview's digest and
//! the execution carrying it; an executor's refusal at the preview is told and nothing is
//! prompted; a preview that times out prompts without one (`optional`) or refuses (`required`);
//! answers that are malformed, oversized or for another command are never shown. The stand-in is
//! a small shop written from docs/EXECUTORS.md: it computes each preview from its own ledger and
//! the digest with its own canonical JSON, not the gateway's code.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Digest;
use uuid::Uuid;

use crate::e2e_approvals::{decide, listed, replies_to, state_and_reason};
use crate::e2e_security::token_as;
use crate::e2e_slack::{Signed, Slack, message};
use crate::helpers::{CUSTOMER, Meta, TestDb, command_of_message, on_both_backends, settled};

on_both_backends!(
    the_prompt_shows_the_preview_on_whatsapp_and_slack_and_the_execution_carries_it,
    an_executors_refusal_at_the_preview_is_told_and_nothing_is_prompted,
    a_preview_that_times_out_prompts_without_one_when_optional,
    a_preview_that_times_out_refuses_when_required,
    malformed_oversized_and_misaddressed_previews_are_never_shown,
    a_stale_preview_at_execution_asks_again_with_the_new_one,
    approvers_see_the_preview_confirmed_and_a_stale_one_asks_them_again,
);

const SUPERVISOR: &str = "15550000003";

/// What the stand-in answers to a preview request.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Previewing {
    Honest,
    Slow,
    Malformed,
    Oversized,
    ForAnotherCommand,
}

#[derive(Debug)]
struct Shop {
    previewing: Previewing,
    total: f64,
    refunded: f64,
    previews: Vec<Value>,
    executions: Vec<(HeaderMap, Value)>,
}

#[derive(Clone)]
struct ShopExecutor {
    url: String,
    shop: Arc<Mutex<Shop>>,
}

impl ShopExecutor {
    async fn start(previewing: Previewing) -> Self {
        let shop = Shop { previewing, total: 80.0, refunded: 0.0, previews: vec![], executions: vec![] };
        let shop = Arc::new(Mutex::new(shop));
        let app = Router::new().fallback(answer).with_state(shop.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let addr = listener.local_addr().expect("address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url: format!("http://{addr}"), shop }
    }

    fn answer_as(&self, previewing: Previewing) {
        self.shop.lock().expect("lock").previewing = previewing;
    }

    /// A refund made outside the gateway (the shop's own back office).
    fn refunded_elsewhere(&self, amount: f64) {
        self.shop.lock().expect("lock").refunded += amount;
    }

    fn previews(&self) -> usize {
        self.shop.lock().expect("lock").previews.len()
    }

    fn executions(&self) -> Vec<(HeaderMap, Value)> {
        self.shop.lock().expect("lock").executions.clone()
    }
}

/// The shop's own preview of a refund of `amount` on order 1234.
fn preview_of(shop: &Shop, amount: f64) -> Result<Value, Value> {
    let left = shop.total - shop.refunded;
    if amount > left {
        let message = format!("order 1234 has {left:.2} left to refund");
        return Err(json!({"code": "refund_exceeds_balance", "message": message}));
    }
    let summary = format!(
        "Order 1234 — paid {:.2} on 20 Nov, already refunded {:.2}; refunding {amount:.2} leaves {:.2}",
        shop.total,
        shop.refunded,
        left - amount
    );
    Ok(
        json!({"summary": summary, "fields": {"total": format!("{:.2}", shop.total), "left": format!("{:.2}", left - amount)}}),
    )
}

/// SHA-256 of the RFC 8785 form, hex (written here, not taken from the gateway).
fn digest(preview: &Value) -> String {
    hex::encode(sha2::Sha256::digest(serde_jcs::to_vec(preview).expect("jcs")))
}

async fn answer(
    State(shop): State<Arc<Mutex<Shop>>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let envelope: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let id = envelope["command_id"].clone();
    let amount: f64 = envelope["args"]["amount"].as_str().and_then(|a| a.parse().ok()).unwrap_or(0.0);
    if uri.path() == "/execute" {
        let mut shop = shop.lock().expect("lock");
        shop.executions.push((headers, envelope.clone()));
        // Confirmed on what the shop would preview now, or refused as stale.
        let now = preview_of(&shop, amount).map(|preview| digest(&preview)).unwrap_or_default();
        if envelope["preview"]["digest"] != now.as_str() {
            let stale = json!({"code": "stale_preview", "message": format!("order 1234 has {:.2} refunded now", shop.refunded)});
            return axum::Json(json!({"status": "failed", "error": stale})).into_response();
        }
        shop.refunded += amount;
        return axum::Json(json!({"status": "succeeded", "result": {"refunded": format!("{amount:.2}")}}))
            .into_response();
    }
    let previewing = {
        let mut shop = shop.lock().expect("lock");
        shop.previews.push(envelope.clone());
        shop.previewing
    };
    let answer = match previewing {
        Previewing::Slow => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            json!({"command_id": id, "status": "preview", "preview": {"summary": "too late"}})
        }
        Previewing::Malformed => return "<html>a proxy's error page</html>".into_response(),
        Previewing::Oversized => {
            json!({"command_id": id, "status": "preview", "preview": {"summary": "x".repeat(9_000)}})
        }
        Previewing::ForAnotherCommand => {
            json!({"command_id": Uuid::now_v7(), "status": "preview", "preview": {"summary": "another order"}})
        }
        Previewing::Honest => match preview_of(&shop.lock().expect("lock"), amount) {
            Ok(preview) => json!({"command_id": id, "status": "preview", "preview": preview}),
            Err(error) => {
                let refused = json!({"command_id": id, "status": "refused", "error": error});
                return (StatusCode::UNPROCESSABLE_ENTITY, axum::Json(refused)).into_response();
            }
        },
    };
    axum::Json(answer).into_response()
}

/// The shipped registry with refunds previewed under `rule`.
pub(crate) fn previewed(rule: &str) -> String {
    let shipped = chatgate::config::SHIPPED_COMMANDS;
    let at = shipped.find("[commands.refund]").expect("the refund entry");
    let (before, after) = shipped.split_at(at);
    format!("{before}{}", after.replacen("preview = \"optional\"\n", &format!("preview = \"{rule}\"\n"), 1))
}

async fn gateway(db: &TestDb, shop: &ShopExecutor, rule: &str) -> Slack {
    let mut config = db.config.clone();
    config.outbound.poll_interval_ms = 20;
    let orders = config.executors.get_mut("orders").expect("orders");
    orders.url = format!("{}/execute", shop.url);
    orders.preview_url = Some(format!("{}/preview", shop.url));
    orders.preview_timeout_ms = 500;
    Slack::start_as(db, config, Some(&previewed(rule))).await
}

/// Waits (20 s at most) until the command leaves `canonicalized`, where it waits for its preview.
async fn previewed_state(db: &TestDb, id: Uuid) -> (String, Option<String>) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let now = state_and_reason(db, id).await;
        if now.0 != "canonicalized" || std::time::Instant::now() > deadline {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The prompt the customer was sent on WhatsApp (its variables).
async fn prompt_vars(db: &TestDb) -> Value {
    let told = replies_to(db, CUSTOMER).await;
    told.into_iter().find(|(t, _)| t == "confirmation_prompt").map(|(_, vars)| vars).expect("a prompt")
}

async fn the_prompt_shows_the_preview_on_whatsapp_and_slack_and_the_execution_carries_it(db: &TestDb) {
    let shop = ShopExecutor::start(Previewing::Honest).await;
    let slack = gateway(db, &shop, "required").await;
    let meta = Meta::new(&slack.app, db);
    assert_eq!(meta.text("wamid.P1", CUSTOMER, "refund 1234 25.00").await.status(), 200);
    let id = command_of_message(db, "wamid.P1").await;
    assert_eq!(previewed_state(db, id).await.0, "confirmation_required");
    let summary = "Order 1234 — paid 80.00 on 20 Nov, already refunded 0.00; refunding 25.00 leaves 55.00";
    let vars = prompt_vars(db).await;
    assert_eq!(vars["preview"]["summary"], summary, "{vars}");
    let sent = slack.graph.wait_for(1, Duration::from_secs(20)).await;
    assert!(sent[0].raw.contains(summary), "the WhatsApp prompt shows it: {}", sent[0].raw);

    // The confirmation is bound to the preview: its digest is in the evidence.
    let expected = digest(&json!({"summary": summary, "fields": {"total": "80.00", "left": "55.00"}}));
    let evidence = db.store.evidence().for_command("demo", id).await.expect("evidence");
    let requested = evidence.iter().find(|a| a.kind == "command.confirmation.requested").expect("requested");
    assert_eq!(requested.body["decision"]["preview_digest"], expected.as_str(), "{:?}", requested.body);
    assert_eq!(requested.body["decision"]["preview"], "shown");

    let (_, _, code) = crate::helpers::confirmation_of(db, "wamid.P1").await;
    assert_eq!(meta.text("wamid.P1-yes", CUSTOMER, &format!("YES {code}")).await.status(), 200);
    assert_eq!(settled(db, id).await, "executed");
    let executions = shop.executions();
    assert_eq!(executions.len(), 1);
    let (headers, body) = &executions[0];
    assert_eq!(body["preview"]["digest"], expected.as_str(), "the execution carries what was confirmed");
    assert_eq!(body["preview"]["summary"], summary);
    assert_eq!(headers["x-chatgate-preview-digest"].to_str().ok(), Some(expected.as_str()));
    // Operators see what it was confirmed on: the API's view of the command.
    let token = crate::e2e_security::token_as(&db.config, crate::helpers::ADMIN, "commands:read");
    let view = slack.app.client.get(slack.app.url(&format!("/v1/commands/{id}"))).bearer_auth(token).send().await;
    let view: Value = view.expect("the command").json().await.expect("json");
    assert_eq!(
        (&view["preview"]["summary"], &view["preview"]["digest"]),
        (&json!(summary), &json!(expected)),
        "{view}"
    );

    // On Slack: the same refund's preview, now with what the first one left, in the thread.
    let thread = "1764150000.000300";
    assert_eq!(slack.event(&message("Ev0PREVIEW1", thread, "refund 1234 10.00"), Signed::Now).await, json!({}));
    let prompt = &slack.api.wait_for(1, Duration::from_secs(20)).await[0];
    let second = "Order 1234 — paid 80.00 on 20 Nov, already refunded 25.00; refunding 10.00 leaves 45.00";
    assert!(prompt.raw.contains(second), "the Slack prompt shows it: {}", prompt.raw);
    assert_eq!(shop.previews(), 2);
    slack.app.stop().await.expect("stop");
}

async fn an_executors_refusal_at_the_preview_is_told_and_nothing_is_prompted(db: &TestDb) {
    let shop = ShopExecutor::start(Previewing::Honest).await;
    let slack = gateway(db, &shop, "optional").await;
    let meta = Meta::new(&slack.app, db);
    assert_eq!(meta.text("wamid.P2", CUSTOMER, "refund 1234 95.00").await.status(), 200);
    let id = command_of_message(db, "wamid.P2").await;
    assert_eq!(previewed_state(db, id).await, ("rejected".into(), Some("preview_refused".into())));
    let told = replies_to(db, CUSTOMER).await;
    assert!(told.iter().all(|(t, _)| t != "confirmation_prompt"), "nothing prompted: {told:?}");
    let (_, failed) = told.iter().find(|(t, _)| t == "failed").expect("told why");
    assert_eq!(failed["error"]["message"], "order 1234 has 80.00 left to refund", "{failed}");
    let sent = slack.graph.wait_for(1, Duration::from_secs(20)).await;
    assert!(sent[0].raw.contains("order 1234 has 80.00 left to refund"), "{}", sent[0].raw);
    assert_eq!(db.count("SELECT COUNT(*) FROM confirmations WHERE command_id = $1", &id.to_string()).await, 0);
    assert_eq!(db.count("SELECT COUNT(*) FROM resource_locks WHERE tenant_id = $1", "demo").await, 0);
    let evidence = db.store.evidence().for_command("demo", id).await.expect("evidence");
    assert!(
        evidence
            .iter()
            .any(|a| a.body["decision"]["preview"] == "refused"
                && a.body["decision"]["code"] == "refund_exceeds_balance")
    );
    assert!(shop.executions().is_empty());
    slack.app.stop().await.expect("stop");
}

async fn a_preview_that_times_out_prompts_without_one_when_optional(db: &TestDb) {
    let shop = ShopExecutor::start(Previewing::Slow).await;
    let slack = gateway(db, &shop, "optional").await;
    let meta = Meta::new(&slack.app, db);
    assert_eq!(meta.text("wamid.P3", CUSTOMER, "refund 1234 25.00").await.status(), 200);
    let id = command_of_message(db, "wamid.P3").await;
    assert_eq!(previewed_state(db, id).await.0, "confirmation_required", "prompted without one");
    let vars = prompt_vars(db).await;
    assert_eq!((vars.get("preview"), &vars["preview_missing"]), (None, &json!(true)), "{vars}");
    let sent = slack.graph.wait_for(1, Duration::from_secs(20)).await;
    assert!(sent[0].raw.contains("No preview"), "the prompt says so: {}", sent[0].raw);
    let evidence = db.store.evidence().for_command("demo", id).await.expect("evidence");
    assert!(evidence.iter().any(|a| a.body["decision"]["preview"] == "missing"));
    slack.app.stop().await.expect("stop");
}

async fn a_preview_that_times_out_refuses_when_required(db: &TestDb) {
    let shop = ShopExecutor::start(Previewing::Slow).await;
    let slack = gateway(db, &shop, "required").await;
    let meta = Meta::new(&slack.app, db);
    assert_eq!(meta.text("wamid.P4", CUSTOMER, "refund 1234 5.00").await.status(), 200);
    let id = command_of_message(db, "wamid.P4").await;
    assert_eq!(previewed_state(db, id).await, ("rejected".into(), Some("preview_unavailable".into())));
    let told = replies_to(db, CUSTOMER).await;
    assert!(told.iter().all(|(t, _)| t != "confirmation_prompt"), "nothing prompted: {told:?}");
    assert!(shop.executions().is_empty());
    slack.app.stop().await.expect("stop");
}

async fn malformed_oversized_and_misaddressed_previews_are_never_shown(db: &TestDb) {
    let shop = ShopExecutor::start(Previewing::Honest).await;
    let slack = gateway(db, &shop, "required").await;
    let meta = Meta::new(&slack.app, db);
    for (n, (previewing, reason)) in [
        (Previewing::Malformed, "preview_malformed"),
        (Previewing::Oversized, "preview_oversized"),
        (Previewing::ForAnotherCommand, "preview_malformed"),
    ]
    .into_iter()
    .enumerate()
    {
        shop.answer_as(previewing);
        let message_id = format!("wamid.PB{n}");
        assert_eq!(meta.text(&message_id, CUSTOMER, &format!("refund 1234 {n}.50")).await.status(), 200);
        let id = command_of_message(db, &message_id).await;
        assert_eq!(previewed_state(db, id).await, ("rejected".into(), Some(reason.into())), "{previewing:?}");
        assert_eq!(db.count("SELECT COUNT(*) FROM confirmations WHERE command_id = $1", &id.to_string()).await, 0);
    }
    assert_eq!(shop.previews(), 3);
    assert!(shop.executions().is_empty(), "never executed on them");
    slack.app.stop().await.expect("stop");
}

async fn a_stale_preview_at_execution_asks_again_with_the_new_one(db: &TestDb) {
    let shop = ShopExecutor::start(Previewing::Honest).await;
    let slack = gateway(db, &shop, "required").await;
    let meta = Meta::new(&slack.app, db);
    assert_eq!(meta.text("wamid.PS1", CUSTOMER, "refund 1234 25.00").await.status(), 200);
    let (old, _, code) = crate::helpers::confirmation_of(db, "wamid.PS1").await;
    // The world changes between the prompt and the answer.
    shop.refunded_elsewhere(30.0);
    assert_eq!(meta.text("wamid.PS1-yes", CUSTOMER, &format!("YES {code}")).await.status(), 200);
    assert_eq!(settled(db, old).await, "failed");
    assert_eq!(state_and_reason(db, old).await.1.as_deref(), Some("stale_preview"));

    // The same request, admitted anew and naming the old one, is shown how it stands now.
    let again = wait_for_command_caused_by(db, old).await;
    assert_eq!(previewed_state(db, again).await.0, "confirmation_required");
    let told = replies_to(db, CUSTOMER).await;
    let (_, failed) = told.iter().find(|(t, _)| t == "failed").expect("told the old one failed");
    assert_eq!(failed["reason"], "stale_preview", "{failed}");
    let prompts: Vec<&Value> = told.iter().filter(|(t, _)| t == "confirmation_prompt").map(|(_, v)| v).collect();
    assert_eq!(prompts.len(), 2, "asked again");
    let now = "Order 1234 — paid 80.00 on 20 Nov, already refunded 30.00; refunding 25.00 leaves 25.00";
    assert_eq!(prompts[1]["preview"]["summary"], now);
    let code = prompts[1]["code"].as_str().expect("a code").to_owned();
    assert_eq!(meta.text("wamid.PS1-yes2", CUSTOMER, &format!("YES {code}")).await.status(), 200);
    assert_eq!(settled(db, again).await, "executed");
    let executions = shop.executions();
    assert_eq!(executions.len(), 2, "the stale one refused, the new one done");
    assert_ne!(executions[0].1["preview"]["digest"], executions[1].1["preview"]["digest"]);
    assert_ne!(executions[0].1["idempotency_key"], executions[1].1["idempotency_key"], "a request of its own");
    assert!(db.store.evidence().verify().await.expect("audit").first_break.is_none());
    slack.app.stop().await.expect("stop");
}

/// The command admitted anew for `old` (its causation), once there is one (20 s at most).
async fn wait_for_command_caused_by(db: &TestDb, old: Uuid) -> Uuid {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let mut conn = db.raw().await;
        let id: Option<String> = sqlx::query_scalar("SELECT command_id FROM commands WHERE causation_id = $1")
            .bind(old.to_string())
            .fetch_optional(&mut conn)
            .await
            .expect("read");
        if let Some(id) = id {
            return id.parse().expect("uuid");
        }
        assert!(std::time::Instant::now() < deadline, "never asked again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn approvers_see_the_preview_confirmed_and_a_stale_one_asks_them_again(db: &TestDb) {
    let shop = ShopExecutor::start(Previewing::Honest).await;
    let slack = gateway(db, &shop, "required").await;
    let meta = Meta::new(&slack.app, db);
    // Over the customer's own limit of 50.00: a supervisor approves after the customer confirms.
    assert_eq!(meta.text("wamid.PA1", CUSTOMER, "refund 1234 60.00").await.status(), 200);
    let (first, _, code) = crate::helpers::confirmation_of(db, "wamid.PA1").await;
    assert_eq!(meta.text("wamid.PA1-yes", CUSTOMER, &format!("YES {code}")).await.status(), 200);
    assert_eq!(state_and_reason(db, first).await.0, "authz_pending");
    let confirmed = "Order 1234 — paid 80.00 on 20 Nov, already refunded 0.00; refunding 60.00 leaves 20.00";
    assert_eq!(prompt_vars(db).await["preview"]["summary"], confirmed);
    let asked = replies_to(db, SUPERVISOR).await;
    let (_, request) = asked.iter().find(|(t, _)| t == "approval_request").expect("the supervisor is asked");
    assert_eq!(request["preview"]["summary"], confirmed, "the approver sees what the requester confirmed");

    // Approved, but the order changed meanwhile: the executor refuses the stale preview, and the
    // request asked again needs a new confirmation and a new approval, on the new preview.
    shop.refunded_elsewhere(10.0);
    let supervisor = token_as(&db.config, SUPERVISOR, "approvals:read approvals:decide");
    let approval = listed(&slack.app, &supervisor, first).await;
    assert_eq!(decide(&slack.app, &supervisor, &approval, "approve").await.0, StatusCode::OK);
    assert_eq!(settled(db, first).await, "failed");
    let again = wait_for_command_caused_by(db, first).await;
    assert_eq!(previewed_state(db, again).await.0, "confirmation_required");
    let told = replies_to(db, CUSTOMER).await;
    let prompt = told.iter().filter(|(t, _)| t == "confirmation_prompt").nth(1).map(|(_, v)| v).expect("asked again");
    let now = "Order 1234 — paid 80.00 on 20 Nov, already refunded 10.00; refunding 60.00 leaves 10.00";
    assert_eq!(prompt["preview"]["summary"], now);
    let code = prompt["code"].as_str().expect("a code").to_owned();
    assert_eq!(meta.text("wamid.PA1-yes2", CUSTOMER, &format!("YES {code}")).await.status(), 200);
    assert_eq!(state_and_reason(db, again).await.0, "authz_pending", "the old approval does not carry over");
    let requests: Vec<Value> =
        replies_to(db, SUPERVISOR).await.into_iter().filter(|(t, _)| t == "approval_request").map(|(_, v)| v).collect();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1]["preview"]["summary"], now);
    assert_eq!(shop.executions().len(), 1, "nothing done on the old preview");
    slack.app.stop().await.expect("stop");
}
