//! The console's Pending approvals page in a real browser (issue #46): a supervisor signs in,
//! sees the customer's refund that waits for them — what, who asked, which rule, what it still
//! needs —, approves it with the button, and it executes once; the page then has nothing waiting.

use crate::browser::Browser;
use crate::e2e_approvals::asked_and_confirmed;
use crate::e2e_security::token_as;
use crate::helpers::{CUSTOMER, TestDb, settled, spawn_app_with, tenant};

const SUPERVISOR: &str = "15550000003";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supervisor_approves_a_waiting_refund_in_the_console() {
    let Some(mut browser) = Browser::open().await else { return };
    let db = TestDb::sqlite().await;
    let app = spawn_app_with(&db, db.config.clone()).await;
    let id = asked_and_confirmed(&db, &app, CUSTOMER, "refund 1234 250.00").await;
    let approval = db.store.approvals().of_command(&tenant("demo"), id).await.expect("read").expect("approval").id;
    let token = token_as(&db.config, SUPERVISOR, "approvals:read approvals:decide commands:read");
    crate::console_browser::sign_in(&mut browser, &app, &token).await;

    browser.click("nav a[href='/console/approvals']").await;
    assert_eq!(browser.left("/console/commands").await, "/console/approvals");
    let row = format!("tr[data-approval='{approval}']");
    let shown = browser.text(&row).await;
    for part in ["refund 250 on order 1234", CUSTOMER, "a customer's own limit", "refund over 100.00"] {
        assert!(shown.contains(part), "the row shows {part}: {shown}");
    }
    let missing = browser.text(&format!("{row} [data-testid=missing]")).await;
    assert_eq!(missing, "a customer's own limit: 1 × supervisor; refund over 100.00: 1 × supervisor");
    browser.screenshot("approvals").await;
    browser.no_script_error().await;

    browser.click(&format!("{row} button[value=approve]")).await;
    browser.wait_text("[data-testid=decided]", "the decision", |t| t.contains("approved")).await;
    assert_eq!(settled(&db, id).await, "executed");
    assert_eq!(db.count("SELECT COUNT(*) FROM outbox WHERE kind = $1", "dispatch").await, 1, "executed once");
    let via = db.store.approvals().decisions(approval).await.expect("decisions");
    assert_eq!((via.len(), via[0].via.as_str(), via[0].approver.as_str()), (1, "console", SUPERVISOR));
    browser.text("[data-testid=none]").await;
    browser.close().await;
    app.stop().await.expect("stop");
}
