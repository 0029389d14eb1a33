//! The console and the bulk recovery over plain HTTP (the browser test drives the same pages in
//! chromium): sessions, their cookie and their end; CSRF and scopes on every change; tenant
//! isolation; the bulk recovery's key, filter, limit, evidence and summary, on both backends.

use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::conformance::{drive, path_to};
use crate::helpers::{TestApp, TestDb, api_token, on_both_backends, order_status, refund, spawn_app_with};
use chatgate::domain::lifecycle::{Event, State};

/// A read fails without a confirmation step.
const READ_FAILS: &[Event] = &[Event::SubmitForAuthorization, Event::Allow, Event::Start, Event::Fail];

on_both_backends!(bulk_recovery_acts_once_per_key_on_the_filtered_failures_and_sums_up);

const SCOPES: &str = "commands:read recovery:write audit:read agents:read agents:admin";

async fn bulk(app: &TestApp, token: &str, key: Option<&str>, body: &Value) -> (StatusCode, Value) {
    let mut request = app.client.post(app.url("/v1/recovery/bulk")).bearer_auth(token).json(body);
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    let response = request.send().await.expect("bulk");
    (response.status(), response.json().await.unwrap_or(Value::Null))
}

async fn bulk_recovery_acts_once_per_key_on_the_filtered_failures_and_sums_up(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let ops = api_token(db, "demo", "ops-1", SCOPES);
    let mut failed = vec![];
    for n in 1..=3 {
        failed.push(drive(db, order_status("demo", &format!("{n}"), &format!("mb{n}")), READ_FAILS).await);
    }
    let refund_failed = drive(db, refund("demo", "9", "1.00", "mbr"), path_to(State::Failed)).await;
    let theirs = drive(db, order_status("other", "1", "mbo"), READ_FAILS).await;
    let retry_statuses = json!({"action": "retry", "reason": "unlocked", "filter": {"command": "order_status"}});

    let (status, problem) = bulk(&app, &ops, None, &retry_statuses).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_body")),
        "a key is required"
    );
    for bad in [
        json!({"action": "compensate"}),
        json!({"action": "retry", "limit": 0}),
        json!({"action": "retry", "limit": 201}),
        json!({"action": "retry", "filter": {"state": "sleeping"}}),
        // An empty state is no state (the schema's enum), as schemathesis found: never "any".
        json!({"action": "retry", "filter": {"since": null, "state": ""}}),
        json!({"action": "retry", "filter": {"since": "yesterday"}}),
        json!({"action": "retry", "filter": {"until": ""}}),
        json!({"action": "retry", "limit": 2.5}),
        json!({"action": "retry", "everything": true}),
    ] {
        let (status, _) = bulk(&app, &ops, Some("bad-one"), &bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    }

    // As in the list, a command the registry does not know matches nothing.
    let (status, none) =
        bulk(&app, &ops, Some("bulk-0"), &json!({"action": "retry", "filter": {"command": "no_such_command"}})).await;
    assert_eq!((status, none["selected"].as_u64()), (StatusCode::OK, Some(0)), "{none}");

    let (status, whole) =
        bulk(&app, &ops, Some("bulk-00"), &json!({"action": "cancel", "limit": 5.0, "filter": {"command": "x"}})).await;
    assert_eq!(status, StatusCode::OK, "a whole number written 5.0 is 5: {whole}");

    let (status, summary) = bulk(&app, &ops, Some("bulk-1"), &retry_statuses).await;
    assert_eq!(status, StatusCode::OK, "{summary}");
    assert_eq!((summary["action"].as_str(), summary["selected"].as_u64()), (Some("retry"), Some(3)), "{summary}");
    let done: Vec<Uuid> = summary["done"]
        .as_array()
        .expect("done")
        .iter()
        .map(|d| d["command_id"].as_str().expect("id").parse().expect("uuid"))
        .collect();
    for id in &failed {
        assert!(done.contains(id), "{id} was retried: {summary}");
        assert_eq!(db.store.commands().recoveries_of(*id).await.expect("read").len(), 1);
        let evidence = db.store.evidence().for_command("demo", *id).await.expect("evidence");
        assert!(evidence.iter().any(|a| a.kind == "recovery.requested"), "evidence on {id}");
    }
    assert!(!done.contains(&refund_failed) && !done.contains(&theirs), "only the filtered, only the tenant's");

    // The same request again: the same answer, nothing done twice; the key for another: refused.
    let (status, again) = bulk(&app, &ops, Some("bulk-1"), &retry_statuses).await;
    assert_eq!((status, &again), (StatusCode::OK, &summary));
    for id in &failed {
        assert_eq!(db.store.commands().recoveries_of(*id).await.expect("read").len(), 1, "not retried twice");
    }
    let (status, _) = bulk(&app, &ops, Some("bulk-1"), &json!({"action": "cancel"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);

    // A new key: the retried ones no longer need attention; a failed refund cannot be canceled.
    let (status, refused) = bulk(&app, &ops, Some("bulk-2"), &json!({"action": "cancel", "limit": 10})).await;
    assert_eq!(status, StatusCode::OK, "{refused}");
    assert_eq!(refused["selected"], 1, "only the refund still needs attention: {refused}");
    assert_eq!(refused["done"], json!([]));
    assert_eq!(refused["refused"][0]["command_id"], refund_failed.to_string());
    assert_eq!(refused["refused"][0]["code"], "recovery_not_allowed");

    let other = api_token(db, "other", "ops-2", SCOPES);
    let (_, mine_only) =
        bulk(&app, &other, Some("bulk-1"), &json!({"action": "retry", "filter": {"state": "failed"}})).await;
    assert_eq!(mine_only["selected"], 1, "keys and commands are per tenant: {mine_only}");
    assert_eq!(mine_only["done"][0]["command_id"], theirs.to_string());
    app.stop().await.expect("stop");
}

/// A client that shows the console's redirects instead of following them, and keeps no cookies.
fn plain() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client")
}

/// Signs in with `token`; the session cookie's value.
pub(crate) async fn session(app: &TestApp, token: &str) -> String {
    let response = crate::helpers::console_sign_in(app, token, &[]).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let set = response.headers()["set-cookie"].to_str().expect("ascii").to_owned();
    let cookie = cookie::Cookie::parse(set.clone()).expect("cookie");
    assert_eq!((cookie.http_only(), cookie.same_site()), (Some(true), Some(cookie::SameSite::Strict)), "{set}");
    cookie.value().to_owned()
}

pub(crate) async fn page(app: &TestApp, cookie: &str, path: &str) -> (StatusCode, String) {
    let response =
        plain().get(app.url(path)).header("cookie", format!("chatgate_session={cookie}")).send().await.expect("get");
    (response.status(), response.text().await.unwrap_or_default())
}

pub(crate) async fn post_form(app: &TestApp, cookie: &str, path: &str, form: &[(&str, &str)]) -> (StatusCode, String) {
    let response = plain()
        .post(app.url(path))
        .header("cookie", format!("chatgate_session={cookie}"))
        .form(form)
        .send()
        .await
        .expect("post");
    (response.status(), response.text().await.unwrap_or_default())
}

/// The form token a page carries.
pub(crate) fn csrf_of(html: &str) -> String {
    let at = html.find("name=\"csrf\" value=\"").expect("a form token on the page") + 19;
    html[at..].split('"').next().expect("value").to_owned()
}

#[tokio::test]
async fn console_sessions_forms_scopes_and_tenants_hold_over_http() {
    let db = TestDb::sqlite().await;
    let app = spawn_app_with(&db, db.config.clone()).await;
    let bad = crate::helpers::console_sign_in(&app, "nope", &[]).await;
    let sets_session =
        bad.headers().get_all("set-cookie").iter().any(|c| c.as_bytes().starts_with(b"chatgate_session"));
    assert_eq!((bad.status(), sets_session), (StatusCode::UNAUTHORIZED, false));
    let cookie = session(&app, &api_token(&db, "demo", "ops-1", SCOPES)).await;
    let (status, html) = page(&app, &cookie, "/console/agents").await;
    assert_eq!(status, StatusCode::OK);
    let csrf = csrf_of(&html);
    let paused = || async { db.store.agents().get("orders").await.expect("agent").state.as_str().to_owned() };

    for forged in [vec![], vec![("csrf", "forged")], vec![("csrf", &csrf[..csrf.len() - 1])]] {
        let (status, html) = post_form(&app, &cookie, "/console/agents/orders/pause", &forged).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{forged:?}: {html}");
        assert_ne!(paused().await, "paused", "a forged form changes nothing");
    }
    let (status, _) = post_form(&app, &cookie, "/console/agents/orders/pause", &[("csrf", &csrf)]).await;
    assert_eq!((status, paused().await.as_str()), (StatusCode::SEE_OTHER, "paused"));

    // Scopes are the token's: a reader sees, and may not change.
    let reader = session(&app, &api_token(&db, "demo", "ops-2", "commands:read agents:read")).await;
    let (_, html) = page(&app, &reader, "/console/agents").await;
    assert!(!html.contains("Resume orders"), "no buttons for a reader");
    let reader_csrf = csrf_of(&html);
    let (status, _) = post_form(&app, &reader, "/console/agents/orders/resume", &[("csrf", &reader_csrf)]).await;
    assert_eq!((status, paused().await.as_str()), (StatusCode::FORBIDDEN, "paused"));
    assert_eq!(page(&app, &reader, "/console/audit").await.0, StatusCode::FORBIDDEN);

    // Another tenant's command is not found, as in the API.
    let theirs = drive(&db, refund("other", "7", "1.00", "mo"), path_to(State::Executed)).await;
    assert_eq!(page(&app, &cookie, &format!("/console/commands/{theirs}")).await.0, StatusCode::NOT_FOUND);
    assert_eq!(page(&app, &cookie, &format!("/console/commands/{theirs}/row")).await.0, StatusCode::NOT_FOUND);

    // The cookie opens the event stream for reading; it never authorizes a change through the API.
    let events = plain().get(app.url("/v1/events")).header("cookie", format!("chatgate_session={cookie}"));
    let events = events.send().await.expect("events");
    assert_eq!(events.status(), StatusCode::OK);
    drop(events);
    let change = plain()
        .post(app.url("/v1/agents/orders/resume"))
        .header("cookie", format!("chatgate_session={cookie}"))
        .send()
        .await
        .expect("resume");
    assert_eq!(change.status(), StatusCode::UNAUTHORIZED);

    // Signing out ends the session on the server.
    let (status, _) = post_form(&app, &cookie, "/console/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(page(&app, &cookie, "/console/commands").await.0, StatusCode::SEE_OTHER);
    app.stop().await.expect("stop");
}

#[tokio::test]
async fn a_console_session_ends_when_its_time_is_up() {
    let db = TestDb::sqlite().await;
    let mut config = db.config.clone();
    config.console.session_minutes = 0;
    let app = spawn_app_with(&db, config).await;
    let cookie = session(&app, &api_token(&db, "demo", "ops-1", SCOPES)).await;
    let (status, _) = page(&app, &cookie, "/console/commands").await;
    assert_eq!(status, StatusCode::SEE_OTHER, "an ended session is sent to sign in");
    app.stop().await.expect("stop");
}

#[tokio::test]
async fn the_audit_page_names_the_first_broken_link() {
    use sqlx::Executor as _;
    let db = TestDb::sqlite().await;
    drive(&db, refund("demo", "1234", "25.00", "m"), path_to(State::Executed)).await;
    let app = spawn_app_with(&db, db.config.clone()).await;
    let cookie = session(&app, &api_token(&db, "demo", "ops-1", SCOPES)).await;
    let (_, intact) = page(&app, &cookie, "/console/audit?verify=1").await;
    let mut conn = db.raw().await;
    // The chain holds the directory file's changes (the gateway applied it on start) and the refund's.
    let (count, executed): (i64, i64) = sqlx::query_as(
        "SELECT COUNT(*), MAX(CASE WHEN body LIKE '%\"executed\"%' THEN seq END) FROM evidence WHERE chain_id = 'demo'",
    )
    .fetch_one(&mut conn)
    .await
    .expect("the chain");
    assert!(intact.contains(&format!("Intact: {count} artifacts checked")), "{intact}");

    conn.execute("DROP TRIGGER evidence_no_update").await.expect("drop guard");
    let tamper =
        format!("UPDATE evidence SET body = REPLACE(body, '\"executed\"', '\"failed\"') WHERE seq = {executed}");
    conn.execute(sqlx::AssertSqlSafe(tamper)).await.expect("tamper");
    let (status, broken) = page(&app, &cookie, "/console/audit?verify=1").await;
    assert_eq!(status, StatusCode::OK);
    let link = format!("(#{executed})");
    assert!(broken.contains("Broken: the first link that does not hold") && broken.contains(&link), "{broken}");
    assert!(broken.contains("altered"), "{broken}");
    app.stop().await.expect("stop");
}

/// Issue 27.10b: a sign-in comes from this console's own form (a page on another site cannot sign
/// a victim's browser into the attacker's tenant: login CSRF), within the client address's budget
/// of attempts, and an operator keeps a bounded number of sessions (the oldest end).
#[tokio::test]
async fn sign_in_comes_from_its_own_form_within_a_budget_and_sessions_are_bounded() {
    let db = TestDb::sqlite().await;
    let mut config = db.config.clone();
    config.rate_limits.sign_in = chatgate::config::Rate { per_minute: 1, burst: 8 };
    config.console.max_sessions_per_operator = 3;
    let app = spawn_app_with(&db, config).await;
    let token = api_token(&db, "demo", "ops-1", SCOPES);
    // Another site's page posts the attacker's token: no form cookie, or a field of its own.
    let forged = plain().post(app.url("/console/sign-in")).form(&[("token", token.as_str())]).send().await;
    let forged = forged.expect("sign in");
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    assert!(!forged.headers().get_all("set-cookie").iter().any(|c| c.as_bytes().starts_with(b"chatgate_session")));
    let guessed = plain()
        .post(app.url("/console/sign-in"))
        .header("cookie", "chatgate_sign_in=chosen-by-the-attacker")
        .form(&[("token", token.as_str()), ("sign_in", "something-else")])
        .send()
        .await
        .expect("sign in");
    assert_eq!(guessed.status(), StatusCode::FORBIDDEN);
    assert_eq!(db.count("SELECT COUNT(*) FROM console_sessions WHERE subject = $1", "ops-1").await, 0);

    // Five sign-ins of one operator: three sessions stay, the oldest cookies open nothing.
    let mut cookies = vec![];
    for _ in 0..5 {
        cookies.push(session(&app, &token).await);
    }
    assert_eq!(db.count("SELECT COUNT(*) FROM console_sessions WHERE subject = $1", "ops-1").await, 3);
    assert_eq!(page(&app, &cookies[0], "/console/commands").await.0, StatusCode::SEE_OTHER, "the oldest ended");
    assert_eq!(page(&app, &cookies[4], "/console/commands").await.0, StatusCode::OK, "the newest stands");

    // Eight attempts from this address were allowed (two forged, five sign-ins, this one); the
    // next is refused with when to come back, before any token is looked at.
    assert_eq!(crate::helpers::console_sign_in(&app, "nope", &[]).await.status(), StatusCode::UNAUTHORIZED);
    let refused = crate::helpers::console_sign_in(&app, &token, &[]).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().contains_key("retry-after"));
    app.stop().await.expect("stop");
}

/// The Pending approvals page over HTTP (issue #46): a reader sees the waiting request without
/// buttons and their decision is refused; a forged form and the requester's own decision change
/// nothing; a supervisor's form decides as the API does, once.
#[tokio::test]
async fn the_pending_approvals_page_decides_as_the_api_does() {
    use crate::e2e_security::token_as;
    let db = TestDb::sqlite().await;
    let app = spawn_app_with(&db, db.config.clone()).await;
    let customer = crate::helpers::CUSTOMER;
    let id = crate::e2e_approvals::asked_and_confirmed(&db, &app, customer, "refund 1234 250.00").await;
    let tenant = crate::helpers::tenant("demo");
    let approval = db.store.approvals().of_command(&tenant, id).await.expect("read").expect("approval").id;
    let decide = format!("/console/approvals/{approval}/decision");
    let state = || async { db.store.commands().get(&tenant, id).await.expect("read").expect("it").lifecycle.state };

    let reader = session(&app, &token_as(&db.config, "15550000003", "approvals:read")).await;
    let (status, html) = page(&app, &reader, "/console/approvals").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("refund 250 on order 1234") && !html.contains("value=\"approve\""), "{html}");
    let csrf = csrf_of(&html);
    let refused = post_form(&app, &reader, &decide, &[("csrf", &csrf), ("decision", "approve")]).await;
    assert_eq!(refused.0, StatusCode::FORBIDDEN, "a reader decides nothing");

    let scopes = "approvals:read approvals:decide";
    let own = session(&app, &token_as(&db.config, customer, scopes)).await;
    let csrf = csrf_of(&page(&app, &own, "/console/approvals").await.1);
    let mine = post_form(&app, &own, &decide, &[("csrf", &csrf), ("decision", "approve")]).await;
    assert_eq!(mine.0, StatusCode::FORBIDDEN, "no one approves their own request: {}", mine.1);

    let supervisor = session(&app, &token_as(&db.config, "15550000003", scopes)).await;
    let html = page(&app, &supervisor, "/console/approvals").await.1;
    assert!(html.contains("value=\"approve\""), "{html}");
    let forged = post_form(&app, &supervisor, &decide, &[("csrf", "forged"), ("decision", "approve")]).await;
    assert!(forged.0.is_client_error(), "{forged:?}");
    assert_eq!(state().await, chatgate::domain::lifecycle::State::AuthzPending, "nothing changed");
    let done = post_form(&app, &supervisor, &decide, &[("csrf", &csrf_of(&html)), ("decision", "approve")]).await;
    assert_eq!(done.0, StatusCode::SEE_OTHER);
    assert_eq!(crate::helpers::settled(&db, id).await, "executed");
    let (_, after) = page(&app, &supervisor, "/console/approvals?decided=approved").await;
    assert!(after.contains("Your decision is in: approved") && after.contains("Nothing waits for approval"), "{after}");
    app.stop().await.expect("stop");
}

#[tokio::test]
async fn the_locks_page_shows_what_is_held_and_releases_with_a_reason() {
    use crate::e2e_security::token_as;
    let db = TestDb::sqlite().await;
    let app = spawn_app_with(&db, db.config.clone()).await;
    let meta = crate::helpers::Meta::new(&app, &db);
    meta.text("wamid.CL1", crate::helpers::CUSTOMER, "refund 1234 25.00").await;
    let (id, _, _) = crate::helpers::confirmation_of(&db, "wamid.CL1").await;
    let held = || db.count("SELECT COUNT(*) FROM resource_locks WHERE tenant_id = $1", "demo");

    let reader = session(&app, &token_as(&db.config, crate::helpers::ADMIN, "locks:read")).await;
    let (status, html) = page(&app, &reader, "/console/locks").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("order 1234") && html.contains(&id.to_string()) && !html.contains(">Release<"), "{html}");
    let path = "/console/locks/release";
    let form = |csrf: &str, reason: &str| -> Vec<(String, String)> {
        vec![("csrf".into(), csrf.into()), ("resource".into(), "order:1234".into()), ("reason".into(), reason.into())]
    };
    let post = |cookie: &str, pairs: Vec<(String, String)>| {
        let (app, cookie) = (&app, cookie.to_owned());
        async move {
            let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            post_form(app, &cookie, path, &pairs).await
        }
    };
    let refused = post(&reader, form(&csrf_of(&html), "a reader tries")).await;
    assert_eq!(refused.0, StatusCode::FORBIDDEN, "a reader releases nothing");

    let operator = session(&app, &token_as(&db.config, crate::helpers::ADMIN, "locks:read locks:release")).await;
    let html = page(&app, &operator, "/console/locks").await.1;
    assert!(html.contains(">Release<"), "{html}");
    let short = post(&operator, form(&csrf_of(&html), "why")).await;
    assert_eq!(short.0, StatusCode::SEE_OTHER);
    assert_eq!(held().await, 1, "a reason too short releases nothing");
    let html = page(&app, &operator, "/console/locks?released=reason_too_short").await.1;
    let done = post(&operator, form(&csrf_of(&html), "done by phone already")).await;
    assert_eq!(done.0, StatusCode::SEE_OTHER);
    assert_eq!(held().await, 0);
    let evidence = db.store.evidence().for_command("demo", id).await.expect("evidence");
    assert!(
        evidence.iter().any(|a| a.kind == "lock.released" && a.body["decision"]["reason"] == "done by phone already")
    );
    let (_, after) = page(&app, &operator, "/console/locks?released=released").await;
    assert!(after.contains("Released.") && after.contains("Nothing is locked"), "{after}");
    app.stop().await.expect("stop");
}
