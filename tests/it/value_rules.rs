//! Issue 29, values with rules: a refund of a negative amount, of nothing, of a fraction of a
//! cent or of more than the registry allows is no command. The person is told the rule and how
//! to write the command — not the help text, not a prompt a "yes" would confirm — and nothing
//! is stored but the message. And a refund written as people write it is prompted with its
//! canonical reading, while a negation of it is not read at all.

use crate::e2e_conversation::Chat;
use crate::helpers::{CUSTOMER, TestDb, on_both_backends};

on_both_backends!(
    a_value_that_breaks_its_rule_is_told_the_rule_and_makes_no_command,
    a_refund_written_as_people_write_is_prompted_and_its_negation_is_not_read,
    a_typo_is_confirmed_showing_the_reading_and_a_suggestion_is_accepted_with_one_tap,
    an_amount_with_two_readings_or_another_currency_is_asked_back_or_refused
);

async fn a_value_that_breaks_its_rule_is_told_the_rule_and_makes_no_command(db: &TestDb) {
    let mut chat = Chat::start(db).await;
    let usage = "Write it as: refund {order_id} {amount}";
    let cases = [
        ("wamid.V1", "refund 1234 -25", "the amount must be more than 0"),
        ("wamid.V2", "refund 1234 0", "the amount must be more than 0"),
        ("wamid.V3", "refund 1234 25.999", "the amount has at most 2 digits after the point"),
        ("wamid.V4", "Refund 1234 10000.01", "the amount must be at most 10000"),
    ];
    for (id, text, rule) in cases {
        chat.says(id, CUSTOMER, text).await;
        let (to, reply, _) = chat.next_reply().await;
        assert_eq!((to.as_str(), reply), (CUSTOMER, format!("I didn't do that: {rule}. {usage}")), "{text}");
        let status = "SELECT status FROM inbound_messages WHERE provider_message_id = $1";
        let mut conn = db.raw().await;
        let row = sqlx::query(status).bind(id).fetch_one(&mut conn).await.expect("stored");
        assert_eq!(sqlx::Row::get::<String, _>(&row, "status"), "invalid_value", "{text}");
    }
    assert_eq!(db.count("SELECT COUNT(*) FROM commands WHERE tenant_id = $1", "demo").await, 0, "no command");
    assert_eq!(db.count("SELECT COUNT(*) FROM confirmations WHERE tenant_id = $1", "demo").await, 0);
    chat.says("wamid.V5", CUSTOMER, "yes").await;
    let (_, reply, _) = chat.next_reply().await;
    assert!(reply.starts_with("There is nothing waiting for your confirmation."), "{reply}");
    // The same refund written within its rules is prompted as ever.
    let (id, _, _) = chat.refund_prompted("wamid.V6", "refund 1234 25.00").await;
    assert_eq!(chat.state(id).await.0, "confirmation_required");
    chat.stop().await;
}

async fn a_refund_written_as_people_write_is_prompted_and_its_negation_is_not_read(db: &TestDb) {
    let mut chat = Chat::start(db).await;
    chat.says("wamid.N1", CUSTOMER, "don't refund 1234 25.00").await;
    let (_, reply, _) = chat.next_reply().await;
    assert_eq!(reply, "OK, I won't do that. Nothing was done.");
    chat.says("wamid.N3", CUSTOMER, "refund 1234 25.00 and order status 1234").await;
    let (_, reply, _) = chat.next_reply().await;
    assert_eq!(reply, "One request at a time, please: send each in a message of its own. Nothing was done.");
    assert_eq!(db.count("SELECT COUNT(*) FROM commands WHERE tenant_id = $1", "demo").await, 0, "no command");
    let (id, _, _) = chat.refund_prompted("wamid.N2", "Hi, please refund #1234 25.00, thanks!").await;
    let command = db.store.commands().get(&crate::helpers::tenant("demo"), id).await.expect("read").expect("command");
    let args = &command.envelope.args;
    assert_eq!((args["order_id"].as_str(), args["amount"].as_str()), (Some("1234"), Some("25")));
    // The evidence says how the text was read: normalized, by which pattern (never the text).
    let body = evidence_body(db, id).await;
    assert_eq!(
        read_as(db, id).await,
        serde_json::json!({"rule": "normalized", "pattern": "refund {order_id:id} {amount:money}", "typos": 0})
    );
    assert!(!body.to_string().contains("thanks"), "the text itself is not evidence");
    chat.stop().await;
}

/// The artifact that records how a command's text was read.
async fn evidence_body(db: &TestDb, id: uuid::Uuid) -> serde_json::Value {
    let evidence = "SELECT body FROM evidence WHERE command_id = $1 AND body LIKE '%read_as%'";
    let mut conn = db.raw().await;
    let row = sqlx::query(evidence).bind(id.to_string()).fetch_one(&mut conn).await.expect("the reading's evidence");
    serde_json::from_str(&sqlx::Row::get::<String, _>(&row, "body")).expect("json")
}

/// How a command's text was read (`decision.read_as`).
pub(crate) async fn read_as(db: &TestDb, id: uuid::Uuid) -> serde_json::Value {
    let body = evidence_body(db, id).await;
    body.pointer("/decision/read_as").cloned().unwrap_or_else(|| panic!("no read_as in {body}"))
}

async fn a_typo_is_confirmed_showing_the_reading_and_a_suggestion_is_accepted_with_one_tap(db: &TestDb) {
    let mut chat = Chat::start(db).await;
    // A typo in the command's word: read, prompted with the canonical reading, the typo evidenced.
    let (id, _, _) = chat.refund_prompted("wamid.T1", "refnd 1234 25.00").await;
    let command = db.store.commands().get(&crate::helpers::tenant("demo"), id).await.expect("read").expect("command");
    assert_eq!(command.envelope.args["amount"], "25");
    assert_eq!(read_as(db, id).await["rule"], "fuzzy");
    assert_eq!(read_as(db, id).await["typos"], 1);
    // Two typos: not read, but offered whole, with a button that sends it.
    chat.says("wamid.T2", CUSTOMER, "rfnd 4410 12.50").await;
    let (_, reply, body) = chat.next_reply().await;
    assert!(reply.starts_with("Did you mean: refund 4410 12.5?"), "{reply}");
    let button = body["interactive"]["action"]["buttons"][0]["reply"]["id"].as_str().expect("a button").to_owned();
    assert_eq!(button, "cg:try:refund 4410 12.5");
    assert_eq!(db.count("SELECT COUNT(*) FROM commands WHERE tenant_id = $1", "demo").await, 1, "only the first");
    // The tap makes the command, which still asks for its confirmation.
    chat.taps("wamid.T3", CUSTOMER, &button).await;
    let (_, prompt, _) = chat.next_reply().await;
    assert!(prompt.starts_with("Please confirm: refund 12.5 on order 4410"), "{prompt}");
    let tapped = chat.command_of("wamid.T3").await;
    assert_eq!(chat.state(tapped).await.0, "confirmation_required");
    assert_eq!(read_as(db, tapped).await["rule"], "accepted");
    // Close to no command with its values: the closest command's usage, not the whole help.
    chat.says("wamid.T4", CUSTOMER, "close acount").await;
    let (_, reply, body) = chat.next_reply().await;
    assert!(reply.starts_with("I didn't understand that. Did you mean: close account {account_id}?"), "{reply}");
    assert!(body.get("interactive").is_none(), "nothing to tap: {body}");
    chat.stop().await;
}

async fn an_amount_with_two_readings_or_another_currency_is_asked_back_or_refused(db: &TestDb) {
    let mut chat = Chat::start(db).await;
    chat.says("wamid.A1", CUSTOMER, "refund 1234 2,500").await;
    let (_, reply, _) = chat.next_reply().await;
    assert_eq!(
        reply,
        "I didn't do that: the amount could be 2500 or 2.5. Send it again written as one of those: \
         refund {order_id} {amount}"
    );
    chat.says("wamid.A2", CUSTOMER, "refund 1234 25 EUR").await;
    let (_, reply, _) = chat.next_reply().await;
    assert_eq!(reply, "I didn't do that: the amount is in USD. Write it as: refund {order_id} {amount}");
    assert_eq!(db.count("SELECT COUNT(*) FROM commands WHERE tenant_id = $1", "demo").await, 0, "no command");
    // In the tenant's currency and with its thousands, it is the refund it says.
    let (id, _, _) = chat.refund_prompted("wamid.A3", "refund #1234 $2,500.00").await;
    let command = db.store.commands().get(&crate::helpers::tenant("demo"), id).await.expect("read").expect("command");
    assert_eq!(command.envelope.args["amount"], "2500");
    chat.stop().await;
}
