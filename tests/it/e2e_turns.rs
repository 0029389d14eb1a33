//! Commands written in turns (issue #48, goal 1), through the channels on both backends: a
//! refund sent as "refund", "1234", "25.00" is asked for each missing value and prompted as the
//! same command, with the same key, as one typed at once; a wrong value is explained and asked
//! again, a few times at most; "cancel" ends it; a whole command starts that command instead; a
//! conversation left alone ends quietly; it survives a restart, and another instance takes the
//! next turn; and "refund" "1234" "25.00" sent in a burst, even to two instances, gives one prompt
//! and no question (goal 3). And a thank-you is answered in a few words, not the help (goal 4).

use serde_json::json;

use chatgate::channels::telegram::simulate;
use chatgate::store::RetentionPace;

use crate::e2e_conversation::Chat;
use crate::e2e_telegram::{CUSTOMER as TELEGRAM_CUSTOMER, Telegram};
use crate::fake_graph::{FakeGraph, sending_through, text_of};
use crate::helpers::{CUSTOMER, Meta, TestDb, on_both_backends, respawn_app_with, spawn_app_with};
use crate::value_rules::read_as;

on_both_backends!(
    a_refund_in_three_turns_is_the_refund_typed_at_once,
    a_wrong_value_is_asked_again_and_too_many_end_it,
    cancel_ends_it_and_a_whole_command_starts_instead,
    a_conversation_left_alone_ends_quietly,
    a_restart_and_another_instance_take_the_next_turn,
    a_refund_in_three_turns_on_telegram,
    three_split_messages_give_one_prompt,
    a_thank_you_is_answered_in_a_few_words,
    conversations_read_together_are_each_as_read_alone,
    two_turns_in_one_delivery_are_each_read_in_the_conversation,
);

/// Questions held for a tenth of a second only: each test's person answers after reading them.
fn answering_each(config: &mut chatgate::config::Config) {
    config.ingest.conversation_burst_ms = 100;
}

async fn a_refund_in_three_turns_is_the_refund_typed_at_once(db: &TestDb) {
    let mut chat = Chat::start_with(db, answering_each).await;
    chat.says("wamid.W1", CUSTOMER, "Refund, please").await;
    assert_eq!(chat.next_reply().await.1, "Which order? (like 1234) Reply \"cancel\" to stop.");
    chat.says("wamid.W2", CUSTOMER, "#1234").await;
    assert_eq!(chat.next_reply().await.1, "How much, in USD? (like 25.00)");
    let (id, _, _) = chat.refund_prompted("wamid.W3", "25.00 🙏").await;
    assert_eq!(chat.state(id).await.0, "confirmation_required");
    assert_eq!(read_as(db, id).await["rule"], "collected", "its evidence says the values came in turns");
    let conversations = "SELECT COUNT(*) FROM conversations WHERE channel = $1";
    assert_eq!(db.count(conversations, "whatsapp").await, 0, "the conversation ended with its command");
    // The same refund typed at once is the same command: its key answers it as a duplicate.
    chat.says("wamid.W4", CUSTOMER, "refund 1234 25").await;
    chat.next_reply().await;
    assert_eq!(db.count("SELECT COUNT(*) FROM commands WHERE tenant_id = $1", "demo").await, 1, "no second command");
    let duplicate = "SELECT COUNT(*) FROM inbound_messages WHERE provider_message_id = $1 AND status = 'duplicate'";
    assert_eq!(db.count(duplicate, "wamid.W4").await, 1);
    chat.app.stop().await.expect("stop");
}

async fn a_wrong_value_is_asked_again_and_too_many_end_it(db: &TestDb) {
    let mut chat = Chat::start_with(db, answering_each).await;
    chat.says("wamid.X1", CUSTOMER, "refund").await;
    chat.next_reply().await;
    chat.says("wamid.X2", CUSTOMER, "12/34").await;
    assert_eq!(chat.next_reply().await.1, "That is not the order id. Which order? (like 1234)");
    chat.says("wamid.X3", CUSTOMER, "1234").await;
    chat.next_reply().await;
    chat.says("wamid.X4", CUSTOMER, "-5").await;
    assert_eq!(chat.next_reply().await.1, "The amount must be more than 0. How much, in USD? (like 25.00)");
    chat.says("wamid.X5", CUSTOMER, "lots").await;
    assert_eq!(chat.next_reply().await.1, "That is not an amount. How much, in USD? (like 25.00)");
    chat.says("wamid.X6", CUSTOMER, "a lot").await;
    let ended = chat.next_reply().await.1;
    assert!(ended.starts_with("Let's stop there: nothing was done.") && ended.contains("refund {order_id}"), "{ended}");
    // Ended: an amount alone is no turn any more.
    chat.says("wamid.X7", CUSTOMER, "25").await;
    assert!(!chat.next_reply().await.1.contains("How much"));
    assert_eq!(db.count("SELECT COUNT(*) FROM commands WHERE tenant_id = $1", "demo").await, 0);
    chat.app.stop().await.expect("stop");
}

async fn cancel_ends_it_and_a_whole_command_starts_instead(db: &TestDb) {
    let mut chat = Chat::start_with(db, answering_each).await;
    chat.says("wamid.C1", CUSTOMER, "refund 1234").await;
    assert_eq!(chat.next_reply().await.1, "How much, in USD? (like 25.00) Reply \"cancel\" to stop.");
    chat.says("wamid.C2", CUSTOMER, "Cancel").await;
    assert!(chat.next_reply().await.1.starts_with("OK, stopped. Nothing was done."));
    chat.says("wamid.C3", CUSTOMER, "25").await;
    assert!(!chat.next_reply().await.1.contains("How much"), "cancelled: no turn");
    // A whole command mid-conversation is that command, and ends the conversation.
    chat.says("wamid.C4", CUSTOMER, "refund").await;
    chat.next_reply().await;
    chat.says("wamid.C5", CUSTOMER, "order status 1234").await;
    assert_eq!(crate::helpers::first_command_state(db, "executed").await, "executed");
    chat.next_reply().await;
    assert_eq!(db.count("SELECT COUNT(*) FROM conversations WHERE channel = $1", "whatsapp").await, 0);
    chat.app.stop().await.expect("stop");
}

async fn a_conversation_left_alone_ends_quietly(db: &TestDb) {
    // Idle for no time at all: the conversation has ended by the next message.
    let quiet = |config: &mut chatgate::config::Config| {
        answering_each(config);
        config.ingest.conversation_idle_secs = 0;
    };
    let mut chat = Chat::start_with(db, quiet).await;
    chat.says("wamid.Q1", CUSTOMER, "refund").await;
    assert!(chat.next_reply().await.1.starts_with("Which order?"));
    chat.says("wamid.Q2", CUSTOMER, "1234").await;
    let reply = chat.next_reply().await.1;
    assert!(!reply.contains("How much"), "ended quietly, so 1234 is read alone: {reply}");
    chat.nothing_more().await;
    // The clean-up forgets it.
    let conversations = "SELECT COUNT(*) FROM conversations WHERE channel = $1";
    assert_eq!(db.count(conversations, "whatsapp").await, 1, "kept until the clean-up");
    let forgotten = db
        .store
        .forget_conversations(time::OffsetDateTime::now_utc(), &mut RetentionPace::of(&Default::default()))
        .await
        .expect("forget");
    assert_eq!((forgotten, db.count(conversations, "whatsapp").await), (1, 0));
    chat.app.stop().await.expect("stop");
}

async fn a_restart_and_another_instance_take_the_next_turn(db: &TestDb) {
    let graph = FakeGraph::start().await;
    let mut config = sending_through(&db.config, &graph);
    answering_each(&mut config);
    let first = spawn_app_with(db, config.clone()).await;
    assert_eq!(Meta::new(&first, db).text("wamid.R1", CUSTOMER, "refund").await.status(), 200);
    graph.wait_for(1, std::time::Duration::from_secs(20)).await;
    first.stop().await.expect("stop");
    // Restarted: the conversation is in the database.
    let second = respawn_app_with(config.clone()).await;
    assert_eq!(Meta::new(&second, db).text("wamid.R2", CUSTOMER, "1234").await.status(), 200);
    let asked = graph.wait_for(2, std::time::Duration::from_secs(20)).await;
    assert_eq!(text_of(&asked[1].body), "How much, in USD? (like 25.00)");
    // On PostgreSQL another instance, beside it, takes the last turn.
    let third = if db.is_postgres() { Some(respawn_app_with(config).await) } else { None };
    let last = third.as_ref().unwrap_or(&second);
    assert_eq!(Meta::new(last, db).text("wamid.R3", CUSTOMER, "25.00").await.status(), 200);
    let sent = graph.wait_for(3, std::time::Duration::from_secs(20)).await;
    assert!(text_of(&sent[2].body).starts_with("Please confirm: refund 25"), "{}", text_of(&sent[2].body));
    if let Some(third) = third {
        third.stop().await.expect("stop");
    }
    second.stop().await.expect("stop");
}

async fn a_refund_in_three_turns_on_telegram(db: &TestDb) {
    let telegram = Telegram::start(db).await;
    let wait = std::time::Duration::from_secs(20);
    for (n, text, want) in [
        (1, "refund", "Which order? (like 1234) Reply \"cancel\" to stop."),
        (2, "1234", "How much, in USD? (like 25.00)"),
    ] {
        let (status, _, answer) = telegram
            .post(simulate::text(n, TELEGRAM_CUSTOMER, text).to_string().as_bytes(), Some(&telegram.secret))
            .await;
        assert_eq!((status.as_u16(), answer), (200, json!({})));
        let sent = telegram.api.wait_for(n as usize, wait).await;
        assert_eq!(sent[n as usize - 1].body["text"], want);
    }
    let last = simulate::text(3, TELEGRAM_CUSTOMER, "25.00").to_string();
    telegram.post(last.as_bytes(), Some(&telegram.secret)).await;
    let prompt = &telegram.api.wait_for(3, wait).await[2];
    assert!(
        prompt.body["text"].as_str().is_some_and(|t| t.starts_with("Please confirm: refund 25")),
        "{}",
        prompt.body
    );
    assert!(prompt.body["reply_markup"]["inline_keyboard"][0][0]["callback_data"].is_string(), "with its buttons");
    telegram.app.stop().await.expect("stop");
}

async fn three_split_messages_give_one_prompt(db: &TestDb) {
    // The shipped burst window (2 s): each question waits that long for the next message.
    let graph = FakeGraph::start().await;
    let config = sending_through(&db.config, &graph);
    let first = spawn_app_with(db, config.clone()).await;
    // On PostgreSQL the middle message goes to another instance: the order and the turns hold.
    let second = if db.is_postgres() { Some(respawn_app_with(config).await) } else { None };
    let middle = second.as_ref().unwrap_or(&first);
    for (app, id, text) in [(&first, "wamid.B1", "refund"), (middle, "wamid.B2", "1234"), (&first, "wamid.B3", "25.00")]
    {
        assert_eq!(Meta::new(app, db).text(id, CUSTOMER, text).await.status(), 200);
    }
    let sent = graph.wait_for(1, std::time::Duration::from_secs(20)).await;
    assert!(text_of(&sent[0].body).starts_with("Please confirm: refund 25"), "{}", text_of(&sent[0].body));
    // Both questions were withdrawn before any sender took them (never attempted): never sent.
    let withdrawn = "SELECT COUNT(*) FROM outbox WHERE status = 'done' AND attempts = 0 AND last_error LIKE $1";
    assert_eq!(db.count(withdrawn, "withdrawn%").await, 2);
    assert_eq!(graph.exactly(1).await.len(), 1);
    if let Some(second) = second {
        second.stop().await.expect("stop");
    }
    first.stop().await.expect("stop");
}

/// An admission pass reads its writers' conversations in one statement (issue #49): each is the
/// one read alone, an ended one is read too (each message checks the end against its own time),
/// and only the tenant's people are read.
async fn conversations_read_together_are_each_as_read_alone(db: &TestDb) {
    use chatgate::domain::command::{ActorId, Channel, TenantId};
    let mut chat = Chat::start_with(db, answering_each).await;
    chat.says("wamid.T1", CUSTOMER, "refund").await;
    assert!(chat.next_reply().await.1.starts_with("Which order?"));
    let tenant = TenantId::parse("demo").expect("tenant");
    let (actor, channel) = (ActorId::parse(CUSTOMER).expect("actor"), Channel::parse("whatsapp").expect("channel"));
    let key = chatgate::store::ConversationKey { tenant: tenant.clone(), actor, channel };
    let now = time::OffsetDateTime::now_utc();
    let alone = db.store.conversation(&key, now).await.expect("read").expect("open");
    let people = [CUSTOMER.to_owned(), "15550000002".to_owned(), "nobody".to_owned()];
    let together = db.store.conversations_of(&tenant, &people).await.expect("read");
    assert_eq!(together, vec![(key.clone(), alone.clone())]);
    let after_its_end = alone.expires_at + time::Duration::milliseconds(1);
    assert_eq!(db.store.conversation(&key, after_its_end).await.expect("read"), None, "ended, read alone");
    assert_eq!(db.store.conversations_of(&tenant, &people).await.expect("read").len(), 1, "read together too");
    let elsewhere = TenantId::parse("elsewhere").expect("tenant");
    assert!(db.store.conversations_of(&elsewhere, &people).await.expect("read").is_empty(), "another tenant's");
    chat.app.stop().await.expect("stop");
}

/// Two messages of one person in one delivery (one admission pass), their conversation open
/// before it: the pass reads the conversation once, the first message takes what was read and
/// the second reads the store, where the first moved it (the shipped burst window withdraws the
/// question between them).
async fn two_turns_in_one_delivery_are_each_read_in_the_conversation(db: &TestDb) {
    use chatgate::channels::whatsapp::simulate as whatsapp;
    let mut chat = Chat::start(db).await;
    chat.says("wamid.D1", CUSTOMER, "refund").await;
    assert!(chat.next_reply().await.1.starts_with("Which order?"));
    let turns = vec![whatsapp::text("wamid.D2", CUSTOMER, "1234"), whatsapp::text("wamid.D3", CUSTOMER, "25.00")];
    let delivery = whatsapp::notification(crate::helpers::DEMO_NUMBER, turns, vec![]);
    assert_eq!(chat.meta().post(&delivery).await.status(), 200);
    let prompt = chat.next_reply().await.1;
    assert!(prompt.starts_with("Please confirm: refund 25"), "{prompt}");
    chat.nothing_more().await;
    chat.app.stop().await.expect("stop");
}

async fn a_thank_you_is_answered_in_a_few_words(db: &TestDb) {
    let mut chat = Chat::start(db).await;
    for (id, text) in [("wamid.K1", "Thank you 🙏"), ("wamid.K2", "👍"), ("wamid.K3", "obrigado!")] {
        chat.says(id, CUSTOMER, text).await;
        assert_eq!(chat.next_reply().await.1, "You're welcome! 🙂 Send \"help\" whenever you need something.");
    }
    let courtesy = "SELECT COUNT(*) FROM inbound_messages WHERE status = $1";
    assert_eq!(db.count(courtesy, "courtesy").await, 3, "stored as courtesy");
    chat.app.stop().await.expect("stop");
}
