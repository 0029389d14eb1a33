//! Issue 29, values with rules: a refund of a negative amount, of nothing, of a fraction of a
//! cent or of more than the registry allows is no command. The person is told the rule and how
//! to write the command — not the help text, not a prompt a "yes" would confirm — and nothing
//! is stored but the message. And a refund written as people write it is prompted with its
//! canonical reading, while a negation of it is not read at all.

use crate::e2e_conversation::Chat;
use crate::helpers::{CUSTOMER, TestDb, on_both_backends};

on_both_backends!(
    a_value_that_breaks_its_rule_is_told_the_rule_and_makes_no_command,
    a_refund_written_as_people_write_is_prompted_and_its_negation_is_not_read
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
    let evidence = "SELECT body FROM evidence WHERE command_id = $1 AND body LIKE '%read_as%'";
    let mut conn = db.raw().await;
    let row = sqlx::query(evidence).bind(id.to_string()).fetch_one(&mut conn).await.expect("the reading's evidence");
    let body: serde_json::Value = serde_json::from_str(&sqlx::Row::get::<String, _>(&row, "body")).expect("json");
    let read_as = body.pointer("/decision/read_as").cloned().unwrap_or_else(|| panic!("no read_as in {body}"));
    assert_eq!(
        read_as,
        serde_json::json!({"rule": "normalized", "pattern": "refund {order_id:id} {amount:money}", "typos": 0})
    );
    assert!(!body.to_string().contains("thanks"), "the text itself is not evidence");
    chat.stop().await;
}
