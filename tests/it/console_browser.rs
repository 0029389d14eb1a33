//! The operator console in a real browser (headless chromium over WebDriver, see `browser.rs`):
//! what an on-call operator does, checked on the page and in the store — signing in, a WhatsApp
//! command appearing live, a failed one retried with the button and executed once, a
//! compensation through step-up, a bulk retry, an agent paused and resumed, the audit chain
//! verified, signing out; and what must be refused: a forged form token, another tenant's
//! command, a cookie without the right flags, a session used after sign-out.

use std::time::Duration;

use chatgate::domain::lifecycle::State;
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::browser::Browser;
use crate::conformance::{drive, path_to};
use crate::fake_graph::FakeServer;
use crate::helpers::{CUSTOMER, Meta, TestApp, TestDb, refund, spawn_app_with, tenant};

const SCOPES: &str = "commands:read recovery:write audit:read agents:read agents:admin";

fn succeeded() -> Value {
    json!({"status": "succeeded", "result": {"state": "shipped"}})
}

fn refused() -> Value {
    json!({"error": {"code": "order_locked"}})
}

/// A client that shows redirects instead of following them (the console answers 303s).
fn plain_client() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client")
}

async fn state_of(db: &TestDb, id: Uuid) -> State {
    db.store.commands().get(&tenant("demo"), id).await.expect("read").expect("command").lifecycle.state
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_finds_and_fixes_commands_in_the_console() {
    let Some(mut browser) = Browser::open().await else { return };
    let db = TestDb::sqlite().await;
    let executor = FakeServer::executor().await;
    let mut config = db.config.clone();
    config.outbound.poll_interval_ms = 20;
    config.executors.get_mut("orders").expect("orders").url = executor.url.clone();
    let app = spawn_app_with(&db, config).await;
    let token = crate::helpers::api_token(&db, "demo", "ops-1", SCOPES);

    let cookie = sign_in(&mut browser, &app, &token).await;
    let failed = a_command_appears_live_and_fails(&mut browser, &app, &db, &executor).await;
    retry_with_the_button(&mut browser, &app, &db, &executor, failed).await;
    compensate_through_step_up(&mut browser, &app, &db, &executor).await;
    bulk_retry(&mut browser, &app, &db, &executor).await;
    pause_and_resume(&mut browser, &app).await;
    forged_form_token_is_refused(&mut browser, &app).await;
    audit_and_overview(&mut browser, &app).await;
    another_tenants_command_is_not_found(&browser, &app, &db).await;
    on_a_phone(&mut browser, &app).await;
    works_under_its_content_security_policy(&mut browser, &app).await;
    sign_out(&mut browser, &app, &cookie).await;
    browser.close().await;
    app.stop().await.expect("stop");
}

/// Signs in with the API token; returns the session cookie's value after checking its flags.
pub(crate) async fn sign_in(browser: &mut Browser, app: &TestApp, token: &str) -> String {
    browser.goto(&app.url("/console")).await;
    assert_eq!(browser.path().await, "/console/sign-in", "an operator without a session is sent to sign in");
    browser.type_into("#token", "not-a-token").await;
    browser.click("main form button[type=submit]").await;
    let refusal = browser.text("[data-testid=sign-in-error]").await;
    assert!(refusal.contains("does not sign you in"), "{refusal}");
    browser.screenshot("sign-in").await;
    browser.type_into("#token", token).await;
    browser.click("main form button[type=submit]").await;
    assert_eq!(browser.left("/console/sign-in").await, "/console/commands");
    let cookie = browser.client.get_named_cookie("chatgate_session").await.expect("the session cookie");
    assert_eq!(cookie.http_only(), Some(true), "no script reads the session");
    assert_eq!(cookie.same_site(), Some(cookie::SameSite::Strict), "no other site sends it");
    assert_ne!(cookie.secure(), Some(true), "plain http here: a Secure cookie would not come back");
    // Behind https (a proxy says so) the cookie is Secure; it never outlives the token (10 min).
    let response = crate::helpers::console_sign_in(app, token, &[("x-forwarded-proto", "https")]).await;
    let set_cookie = response.headers()["set-cookie"].to_str().expect("ascii").to_owned();
    let parsed = cookie::Cookie::parse(set_cookie.clone()).expect("a cookie");
    assert_eq!((parsed.secure(), parsed.http_only()), (Some(true), Some(true)), "{set_cookie}");
    assert_eq!(parsed.same_site(), Some(cookie::SameSite::Strict), "{set_cookie}");
    let max_age = parsed.max_age().expect("Max-Age").whole_seconds();
    assert!((1..=600).contains(&max_age), "the session ends with the token: {set_cookie}");
    cookie.value().to_owned()
}

/// A WhatsApp message becomes a row on the open Commands page without a reload, and turns failed.
async fn a_command_appears_live_and_fails(
    browser: &mut Browser,
    app: &TestApp,
    db: &TestDb,
    executor: &FakeServer,
) -> Uuid {
    browser.wait_text("#live-status", "the event stream", |t| t == "live").await;
    browser.client.execute("window.stillThisPage = true", vec![]).await.expect("mark the page");
    executor.answer_next(422, refused(), None);
    let sent = Meta::new(app, db).text("wamid.CONSOLE1", CUSTOMER, "order status 9").await;
    assert_eq!(sent.status(), StatusCode::OK);
    let id = crate::helpers::command_of_message(db, "wamid.CONSOLE1").await;
    let row = format!("tr[data-command='{id}']");
    browser.wait_text(&row, "the new command's row", |t| t.contains("order_status")).await;
    browser.wait_text(&format!("{row} .state"), "the failure", |t| t == "failed").await;
    let same_page = browser.client.execute("return window.stillThisPage === true", vec![]).await.expect("script");
    assert_eq!(same_page, json!(true), "the row came live, not by reloading the page");
    browser.no_script_error().await;
    id
}

/// The command's page offers retry; the button starts a retry that executes once.
async fn retry_with_the_button(browser: &mut Browser, app: &TestApp, db: &TestDb, executor: &FakeServer, id: Uuid) {
    browser.click(&format!("tr[data-command='{id}'] a")).await;
    assert_eq!(browser.left("/console/commands").await, format!("/console/commands/{id}"));
    let page = browser.text("main").await;
    for part in ["Timeline", "Deliveries", "Evidence", "Trace", "order_locked", "command.accepted"] {
        assert!(page.contains(part), "the command's page shows {part}: {page}");
    }
    browser.screenshot("command").await;
    executor.answer_next(200, succeeded(), None);
    browser.type_into("#reason", "the order is unlocked").await;
    let here = browser.path().await;
    browser.click("button[value=retry]").await;
    let retry_path = browser.left(&here).await;
    let retry: Uuid = retry_path.trim_start_matches("/console/commands/").parse().expect("the retry's page");
    assert_ne!(retry, id);
    browser.wait_text("[data-testid=state]", "the retry to execute", |t| t == "executed").await;
    let calls = executor.exactly(2).await;
    assert_eq!(
        calls[0].headers["idempotency-key"], calls[1].headers["idempotency-key"],
        "one key: the work is done once"
    );
    assert_eq!((state_of(db, retry).await, state_of(db, id).await), (State::Executed, State::Failed));
    let _ = app;
}

/// Compensating an executed refund is high-risk: the console asks for a step-up proof first.
async fn compensate_through_step_up(browser: &mut Browser, app: &TestApp, db: &TestDb, executor: &FakeServer) {
    let id = drive(db, refund("demo", "1234", "25.00", "wamid.CONSOLE-R"), path_to(State::Executed)).await;
    browser.goto(&app.url(&format!("/console/commands/{id}"))).await;
    browser.type_into("#reason", "refunded twice by the shop").await;
    let here = browser.path().await;
    browser.click("button[value=compensate]").await;
    browser.left(&here).await;
    let asked = browser.text("[data-testid=step-up-needed]").await;
    assert!(asked.contains("step-up"), "{asked}");
    browser.screenshot("step-up").await;
    let proof = crate::e2e_operator::operator_step_up(db, id).await;
    executor.answer_next(200, json!({"status": "succeeded", "result": {"reversed": true}}), None);
    browser.type_into("#step_up", &proof).await;
    let here = browser.path().await;
    browser.click("main form button[type=submit]").await;
    let path = browser.left(&here).await;
    let Ok(recovery) = path.trim_start_matches("/console/commands/").parse::<Uuid>() else {
        panic!("not the compensation's page but {path}: {}", browser.text("main").await);
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while state_of(db, id).await != State::Compensated {
        assert!(std::time::Instant::now() < deadline, "the refund was not compensated");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let made = db.store.commands().get(&tenant("demo"), recovery).await.expect("read").expect("compensation");
    assert_eq!(made.envelope.target_command_id, Some(id));
    let consumed = db.count("SELECT COUNT(*) AS n FROM consumed_tokens WHERE command_id = $1", &id.to_string()).await;
    assert_eq!(consumed, 1, "the proof is used up");
}

/// Three failed status requests, retried together from Needs attention, each executed once.
async fn bulk_retry(browser: &mut Browser, app: &TestApp, db: &TestDb, executor: &FakeServer) {
    let before = executor.requests().len();
    let meta = Meta::new(app, db);
    let mut failed = vec![];
    for n in 1..=3 {
        executor.answer_next(422, refused(), None);
        let message = format!("wamid.CONSOLE-B{n}");
        meta.text(&message, CUSTOMER, &format!("order status 5{n}")).await;
        let id = crate::helpers::command_of_message(db, &message).await;
        crate::helpers::settled(db, id).await;
        failed.push(id);
    }
    browser.goto(&app.url("/console/attention?command=order_status")).await;
    for id in &failed {
        browser.wait_text(&format!("tr[data-command='{id}'] .state"), "a failed command", |t| t == "failed").await;
    }
    browser.screenshot("attention").await;
    for _ in 0..3 {
        executor.answer_next(200, succeeded(), None);
    }
    browser.type_into("#bulk-reason", "the lock is gone").await;
    browser.click("button[value=retry]").await;
    let summary = browser.text("[data-testid=bulk-summary]").await;
    assert!(summary.contains("3 done, 0 refused"), "{summary}");
    browser.screenshot("bulk-retry").await;
    let calls = executor.wait_for(before + 6, Duration::from_secs(10)).await;
    assert_eq!(calls.len(), before + 6, "three failures and three retries, nothing more");
    for id in failed {
        let retries = db.store.commands().recoveries_of(id).await.expect("read");
        assert_eq!(retries.len(), 1, "one retry each");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while state_of(db, retries[0]).await != State::Executed {
            assert!(std::time::Instant::now() < deadline, "a bulk retry did not execute");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The orders agent paused and resumed from its page.
async fn pause_and_resume(browser: &mut Browser, app: &TestApp) {
    browser.goto(&app.url("/console/agents")).await;
    let row = "tr[data-agent=orders]";
    browser.click(&format!("{row} button")).await;
    browser.wait_text(&format!("{row} [data-testid=agent-state]"), "paused", |t| t == "paused").await;
    browser.screenshot("agents").await;
    browser.click(&format!("{row} button")).await;
    browser.wait_text(&format!("{row} [data-testid=agent-state]"), "resumed", |t| t != "paused").await;
}

/// A form whose CSRF token was tampered with changes nothing.
async fn forged_form_token_is_refused(browser: &mut Browser, app: &TestApp) {
    browser.goto(&app.url("/console/agents")).await;
    let row = "tr[data-agent=orders]";
    let forge = "document.querySelector(\"tr[data-agent=orders] input[name=csrf]\").value = 'forged'";
    browser.client.execute(forge, vec![]).await.expect("forge");
    browser.click(&format!("{row} button")).await;
    let refusal = browser.text("[data-testid=message]").await;
    assert!(refusal.contains("form token"), "{refusal}");
    browser.goto(&app.url("/console/agents")).await;
    let state = browser.text(&format!("{row} [data-testid=agent-state]")).await;
    assert_ne!(state, "paused", "the forged pause changed nothing");
}

async fn audit_and_overview(browser: &mut Browser, app: &TestApp) {
    browser.goto(&app.url("/console/audit")).await;
    browser.click("main form button").await;
    let verdict = browser.text("[data-testid=audit-verdict]").await;
    assert!(verdict.starts_with("Intact"), "{verdict}");
    browser.screenshot("audit").await;
    browser.goto(&app.url("/console")).await;
    let bars = browser.client.find_all(fantoccini::Locator::Css("#per-minute rect")).await.expect("bars");
    assert!(!bars.is_empty(), "this hour's commands are drawn");
    let latency = browser.text("#latency").await;
    assert!(latency.contains("ms") || latency.contains(" s"), "{latency}");
    browser.no_script_error().await;
    browser.screenshot("overview").await;
}

async fn another_tenants_command_is_not_found(browser: &Browser, app: &TestApp, db: &TestDb) {
    let theirs = drive(db, refund("other", "77", "1.00", "wamid.OTHER"), path_to(State::Executed)).await;
    browser.goto(&app.url(&format!("/console/commands/{theirs}"))).await;
    assert_eq!(browser.text("h1").await, "Not found");
    let row = plain_client().get(app.url(&format!("/console/commands/{theirs}/row"))).send().await.expect("row");
    assert_eq!(row.status(), StatusCode::SEE_OTHER, "without the session, only sign-in");
}

async fn on_a_phone(browser: &mut Browser, app: &TestApp) {
    browser.goto(&app.url("/console/commands")).await;
    browser.screenshot("commands").await;
    browser.client.set_window_size(390, 844).await.expect("phone size");
    browser.goto(&app.url("/console/commands")).await;
    let overflow = browser.client.execute("return document.body.scrollWidth <= window.innerWidth + 1", vec![]).await;
    assert_eq!(overflow.expect("script"), json!(true), "nothing runs off a phone's screen");
    browser.screenshot("phone-commands").await;
    browser.client.set_window_size(1280, 1000).await.expect("desktop size");
}

/// Issue 27.8: the pages carry a Content-Security-Policy that allows only the gateway's own script
/// and stylesheet and no framing; under it the console's stylesheet and script work, the step-up
/// page's too, and the browser refuses to show a console page in a frame.
async fn works_under_its_content_security_policy(browser: &mut Browser, app: &TestApp) {
    browser.goto(&app.url("/console/commands")).await;
    browser.wait_text("#live-status", "the event stream", |t| t == "live").await;
    let js = |script: &'static str| browser.client.execute(script, vec![]);
    let styled = js("return getComputedStyle(document.querySelector('.top')).backgroundColor").await;
    assert_eq!(styled.expect("script"), json!("rgb(16, 42, 67)"), "the stylesheet applies");
    browser.no_script_error().await;
    // Another site (another port) that frames the console: the browser shows an error page in
    // the frame, not the console (the session cookie would be sent: same host).
    let framing = axum::Router::new().route(
        "/",
        axum::routing::get(move |axum::extract::State(target): axum::extract::State<String>| async move {
            axum::response::Html(format!("<!doctype html><iframe src=\"{target}\" width=800 height=600></iframe>"))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("port");
    let elsewhere = format!("http://{}/", listener.local_addr().expect("address"));
    let framing = framing.with_state(app.url("/console/commands"));
    let site = tokio::spawn(async move { axum::serve(listener, framing).await });
    browser.goto(&elsewhere).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    browser.client.enter_frame(0).await.expect("the frame");
    let shown = browser.client.find_all(fantoccini::Locator::Css("main")).await.expect("find");
    browser.client.enter_parent_frame().await.expect("back");
    assert!(shown.is_empty(), "the browser shows no console page in another site's frame");
    site.abort();
    browser.goto(&app.url("/step-up?command=none&nonce=none")).await;
    let width = js("return getComputedStyle(document.body).maxWidth").await;
    assert_eq!(width.expect("script"), json!("544px"), "the step-up page's own stylesheet applies");
}

/// Signing out ends the session on the server: the old cookie opens nothing, not even the stream.
async fn sign_out(browser: &mut Browser, app: &TestApp, cookie: &str) {
    browser.goto(&app.url("/console/commands")).await;
    browser.click(".who button").await;
    assert_eq!(browser.left("/console/commands").await, "/console/sign-in");
    let client = plain_client();
    let with_old = |path: &str| client.get(app.url(path)).header("cookie", format!("chatgate_session={cookie}")).send();
    let page = with_old("/console/commands").await.expect("page");
    assert_eq!(page.status(), StatusCode::SEE_OTHER);
    let events = with_old("/v1/events").await.expect("events");
    assert_eq!(events.status(), StatusCode::UNAUTHORIZED);
}
