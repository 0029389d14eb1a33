//! Issue 28.8: the console's Directory page in a real browser (headless chromium): an operator
//! finds a person by name, number and id, sees their roles and recent commands, changes their
//! roles, deactivates them, and erases them — asked for a step-up proof first, as other high-risk
//! actions are. Each change is checked in the store.

use std::time::Duration;

use serde_json::json;

use crate::browser::Browser;
use crate::directory_api::Api;
use crate::helpers::{Meta, TestApp, TestDb, api_token, spawn_app_with, tenant};

const SCOPES: &str = "commands:read directory:read directory:write";

async fn sign_in(browser: &Browser, app: &TestApp, token: &str) {
    browser.goto(&app.url("/console/sign-in")).await;
    browser.type_into("#token", token).await;
    browser.click("main form button[type=submit]").await;
    browser.left("/console/sign-in").await;
}

/// Submits `form` and waits for the page its answer loads (the same address or another).
async fn submit(browser: &Browser, form: &str) {
    browser.client.execute("window.beforeSubmit = true", vec![]).await.expect("mark the page");
    browser.click(&format!("{form} button[type=submit]")).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let loaded = "return window.beforeSubmit === undefined && document.readyState === 'complete'";
        if browser.client.execute(loaded, vec![]).await.ok() == Some(json!(true)) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{form}: no page came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_finds_changes_deactivates_and_erases_a_person_in_the_console() {
    let Some(mut browser) = Browser::open().await else { return };
    let db = TestDb::sqlite().await;
    let app = spawn_app_with(&db, db.config.clone()).await;
    let api = Api::new(&app, &db);
    let person = json!({"id": "c-1042", "name": "Ana Souza", "roles": ["customer"],
        "addresses": {"whatsapp": "5511999990000", "whatsapp_user_id": "BR.1042"}});
    api.post("/v1/directory/actors", person).await;
    api.post("/v1/directory/actors", json!({"id": "c-2001", "name": "Bruno Lima", "roles": ["customer"]})).await;
    Meta::new(&app, &db).text("wamid.DIR1", "5511999990000", "order status 4242").await;
    let command = crate::helpers::command_of_message(&db, "wamid.DIR1").await;
    crate::helpers::settled(&db, command).await;
    sign_in(&browser, &app, &api_token(&db, "demo", "ops-1", SCOPES)).await;

    // Found by any part of the name, by number, by id.
    for q in ["souza", "+55 11 99999-0000", "c-1042"] {
        let url = app.url(&format!("/console/directory?q={}", crate::directory_api::urlencode(q)));
        browser.goto(&url).await;
        let rows = browser.text("#people tbody").await;
        assert!(rows.contains("c-1042") && !rows.contains("c-2001"), "{q}: {rows}");
    }
    browser.screenshot("directory").await;
    browser.click("#people a[href='/console/directory/c-1042']").await;
    browser.left("/console/directory").await;
    assert!(browser.text("#recent").await.contains("order_status"), "their recent commands");
    browser.screenshot("person").await;

    // Roles changed with the checkboxes.
    browser.click("#roles-form input[name='role:admin']").await;
    submit(&browser, "#roles-form").await;
    let stored = db.store.directory().get(&tenant("demo"), "c-1042").await.expect("read").expect("Ana");
    assert_eq!(stored.person.roles, ["admin", "customer"]);

    // Deactivated.
    submit(&browser, "form[action$='/active']").await;
    browser.wait_text("[data-testid=status]", "deactivated", |t| t == "deactivated").await;
    assert!(!db.store.directory().get(&tenant("demo"), "c-1042").await.expect("read").expect("Ana").person.active);

    // Erased: a step-up proof first, then gone.
    submit(&browser, "#erase-form").await;
    let asked = browser.text("[data-testid=step-up-needed]").await;
    assert!(asked.contains("step-up"), "{asked}");
    let (id, key) = chatgate::service::directory::erasure_binding(&tenant("demo"), "c-1042");
    let now = time::OffsetDateTime::now_utc();
    let proof = crate::helpers::test_settings(db.config.clone()).security.stepup.mint("ops-1", id, &key, now);
    browser.type_into("#step_up", &proof.expect("proof")).await;
    submit(&browser, "#erase-form").await;
    let said = browser.text("[data-testid=message]").await;
    assert!(said.contains("commands stay under erased:"), "{said}");
    assert!(db.store.directory().get(&tenant("demo"), "c-1042").await.expect("read").is_none());
    browser.close().await;
    app.stop().await.expect("stop");
}
