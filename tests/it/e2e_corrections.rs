//! Corrections (issue #48, goal 2), through WhatsApp on both backends: while a refund waits for
//! its confirmation, "no, 30" or "actually order 4410" replaces it — the old request canceled
//! (`corrected`) with its confirmation closed, the corrected one prompted and, confirmed with a
//! bare "yes", executed with the corrected value; a corrected value that breaks its rule is told
//! the rule and changes nothing; "no, 30" with nothing waiting corrects nothing.

use crate::e2e_conversation::Chat;
use crate::helpers::{CUSTOMER, TestDb, on_both_backends};
use crate::value_rules::read_as;

on_both_backends!(
    a_refund_waiting_for_its_confirmation_is_corrected_and_the_correction_runs,
    corrections_that_correct_nothing_change_nothing
);

async fn a_refund_waiting_for_its_confirmation_is_corrected_and_the_correction_runs(db: &TestDb) {
    let mut chat = Chat::start(db).await;
    let (old, _, _) = chat.refund_prompted("wamid.F1", "refund 1234 25.00").await;
    // The amount: the old request ends, saying so, and the new one is prompted in its place (it
    // takes the order's lock the old one held).
    chat.says("wamid.F2", CUSTOMER, "no, 30").await;
    let (_, canceled, _) = chat.next_reply().await;
    assert!(canceled.contains("refund 25 on order 1234 was canceled (corrected)"), "{canceled}");
    let (_, prompt, _) = chat.next_reply().await;
    assert!(prompt.starts_with("Please confirm: refund 30 on order 1234"), "{prompt}");
    assert_eq!(chat.state(old).await, ("canceled".to_owned(), Some("corrected".to_owned())));
    let corrected = chat.command_of("wamid.F2").await;
    assert_eq!(chat.state(corrected).await.0, "confirmation_required");
    assert_eq!(read_as(db, corrected).await["rule"], "corrected");
    // The order, named: corrected again.
    chat.says("wamid.F3", CUSTOMER, "actually order 4410").await;
    chat.next_reply().await;
    let (_, prompt, _) = chat.next_reply().await;
    assert!(prompt.starts_with("Please confirm: refund 30 on order 4410"), "{prompt}");
    // One request waits: a bare yes confirms it, and it runs with the corrected values.
    let last = chat.command_of("wamid.F3").await;
    chat.says("wamid.F4", CUSTOMER, "yes").await;
    assert_eq!(crate::helpers::settled(db, last).await, "executed");
    let command = db.store.commands().get(&crate::helpers::tenant("demo"), last).await.expect("read").expect("one");
    assert_eq!(
        (command.envelope.args["order_id"].as_str(), command.envelope.args["amount"].as_str()),
        (Some("4410"), Some("30"))
    );
    assert_eq!(chat.state(corrected).await, ("canceled".to_owned(), Some("corrected".to_owned())));
    let declined = "SELECT COUNT(*) FROM confirmations WHERE status = $1";
    assert_eq!(db.count(declined, "declined").await, 2, "each corrected request's confirmation closed");
    chat.app.stop().await.expect("stop");
}

async fn corrections_that_correct_nothing_change_nothing(db: &TestDb) {
    let mut chat = Chat::start(db).await;
    // Nothing waits: not a correction.
    chat.says("wamid.G1", CUSTOMER, "no, 30").await;
    assert!(!chat.next_reply().await.1.starts_with("Please confirm"));
    let (old, _, _) = chat.refund_prompted("wamid.G2", "refund 1234 25.00").await;
    chat.says("wamid.G3", CUSTOMER, "no, -5").await;
    let (_, told, _) = chat.next_reply().await;
    assert!(told.starts_with("I didn't do that: the amount must be more than 0"), "{told}");
    // A form the tables do not list, or one that names nothing, is no correction either.
    chat.says("wamid.G4", CUSTOMER, "no, the other one").await;
    chat.next_reply().await;
    assert_eq!(chat.state(old).await.0, "confirmation_required", "the request stays as it was");
    assert_eq!(db.count("SELECT COUNT(*) FROM commands WHERE tenant_id = $1", "demo").await, 1);
    chat.app.stop().await.expect("stop");
}
