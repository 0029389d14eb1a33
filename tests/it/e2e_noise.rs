//! Noise is not meaning (issue #48, goal 4, the reading part), through a channel on both
//! backends: a request ended with a courtesy emoji or "if possible" is read as the request it is,
//! and prompted; one whose emoji is not in the language tables is not guessed into a command.

use crate::e2e_approvals::state_and_reason;
use crate::helpers::{CUSTOMER, Meta, TestDb, confirmation_of, on_both_backends, spawn_app_with};

on_both_backends!(a_request_ended_with_courtesy_is_read_and_prompted);

async fn a_request_ended_with_courtesy_is_read_and_prompted(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let meta = Meta::new(&app, db);
    assert_eq!(meta.text("wamid.N1", CUSTOMER, "refund 1234 25.00 if possible 🙏").await.status(), 200);
    let (id, _, _) = confirmation_of(db, "wamid.N1").await;
    assert_eq!(state_and_reason(db, id).await.0, "confirmation_required");
    let command = db.store.commands().get(&crate::helpers::tenant("demo"), id).await.expect("read").expect("command");
    assert_eq!(command.envelope.args["amount"], "25", "{:?}", command.envelope.args);
    // An emoji the tables do not list is not dropped: no command is guessed from the message.
    assert_eq!(meta.text("wamid.N2", CUSTOMER, "refund 4410 10 ❌").await.status(), 200);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while db.count("SELECT COUNT(*) FROM inbound_messages WHERE provider_message_id = $1", "wamid.N2").await == 0 {
        assert!(std::time::Instant::now() < deadline, "the message was never admitted");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let commands = db.count("SELECT COUNT(*) FROM commands WHERE tenant_id = $1", "demo").await;
    assert_eq!(commands, 1, "only the first became a command");
    app.stop().await.expect("stop");
}
