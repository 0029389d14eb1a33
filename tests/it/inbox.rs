//! Issue 31: webhooks answered once their messages are durable in the inbox (as shipped), and
//! admitted behind the answer — in each conversation's order, with the inbox's receipt time —;
//! a backlog past the configured limit answered 503 with `Retry-After`, nothing stored; another
//! instance's rows taken over once its hold ran out.

use std::time::{Duration, Instant};

use chatgate::channels::whatsapp::simulate::{notification, text};
use chatgate::config::{Acknowledge, Config};
use chatgate::store::{Lease, NewInboxEntry};
use serde_json::Value;

use crate::helpers::{CUSTOMER, DEMO_NUMBER, Meta, TestDb, on_both_backends, spawn_app_with};

/// The test database's configuration, answering at durability as shipped, `tweak`ed.
fn durable(db: &TestDb, tweak: impl FnOnce(&mut Config)) -> Config {
    let mut config = db.config.clone();
    config.ingest.acknowledge = Acknowledge::Durable;
    tweak(&mut config);
    config
}

/// Waits until `sql` (one text parameter) counts `wanted` rows (10 s at most); a count of the
/// inbox's rows is made in the inbox's database.
async fn until_count(db: &TestDb, sql: &'static str, bind: &str, wanted: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let count = || async {
        if sql.contains("FROM inbox ") { db.count_inbox(sql, bind).await } else { db.count(sql, bind).await }
    };
    while count().await != wanted {
        assert!(Instant::now() < deadline, "{sql} [{bind}] never counted {wanted}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A refund and its bare "yes" in one delivery, then another pair in the next delivery sent as
/// soon as the first is answered: each "yes" finds its refund waiting, so each conversation's
/// messages were admitted in the order they came, behind answers that only said they were stored.
async fn a_conversation_is_admitted_in_order_behind_the_answer(db: &TestDb) {
    let app = spawn_app_with(db, durable(db, |_| {})).await;
    let meta = Meta::new(&app, db);
    let pair = |n: u32| {
        let refund = text(&format!("wamid.ORDER{n}a"), CUSTOMER, &format!("refund {n} 1.00"));
        notification(DEMO_NUMBER, vec![refund, text(&format!("wamid.ORDER{n}b"), CUSTOMER, "yes")], vec![])
    };
    let first = meta.post(&pair(101)).await;
    assert_eq!(first.status(), 200);
    let summary: Value = first.json().await.expect("json");
    assert_eq!((summary["stored"].as_u64(), summary["pending"].as_u64()), (Some(2), Some(2)), "{summary}");
    assert_eq!(meta.post(&pair(102)).await.status(), 200);
    // The same delivery again is recognized in the inbox.
    let again: Value = meta.post(&pair(101)).await.json().await.expect("json");
    assert_eq!((again["stored"].as_u64(), again["redelivered"].as_u64()), (Some(0), Some(2)), "{again}");

    let confirmed = "SELECT COUNT(*) FROM commands WHERE confirmation = 'satisfied' AND tenant_id = $1";
    until_count(db, confirmed, "demo", 2).await;
    assert_eq!(db.count("SELECT COUNT(*) FROM commands WHERE tenant_id = $1", "demo").await, 2);
    let answers = "SELECT COUNT(*) FROM inbound_messages WHERE status = $1";
    assert_eq!(db.count(answers, "answer").await, 2, "each yes answered its refund");
    app.stop().await.expect("stop");
}

/// A delivery that would take the backlog past `ingest.max_backlog` is refused whole (503,
/// `Retry-After`, a problem document) and nothing of it is stored; one that fits is taken.
async fn a_delivery_past_the_backlog_limit_is_503_and_stores_nothing(db: &TestDb) {
    let app = spawn_app_with(db, durable(db, |c| (c.ingest.max_backlog, c.ingest.retry_after_secs) = (2, 7))).await;
    let meta = Meta::new(&app, db);
    let three = (1..=3).map(|n| text(&format!("wamid.FULL{n}"), CUSTOMER, &format!("order status {n}"))).collect();
    let refused = meta.post(&notification(DEMO_NUMBER, three, vec![])).await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "7");
    assert_eq!(refused.headers()["content-type"], "application/problem+json");
    let problem: Value = refused.json().await.expect("problem");
    assert_eq!(problem["code"], "backlog_full", "{problem}");
    assert_eq!(db.count_inbox("SELECT COUNT(*) FROM inbox WHERE channel = $1", "whatsapp").await, 0);
    assert_eq!(db.count("SELECT COUNT(*) FROM inbound_messages WHERE channel = $1", "whatsapp").await, 0);
    assert_eq!(meta.text("wamid.FITS", CUSTOMER, "order status 4").await.status(), 200);
    until_count(db, "SELECT COUNT(*) FROM inbound_messages WHERE provider_message_id = $1", "wamid.FITS", 1).await;
    app.stop().await.expect("stop");
}

/// A burst is answered at durability and admitted — every message exactly once, nothing left
/// waiting, whether it came fast enough to be deferred or not (`service::intake::inbox::burst`'s
/// own tests show when it is); the same burst again stores and admits nothing.
async fn a_burst_is_answered_first_and_admitted_once_after_it(db: &TestDb) {
    let app = spawn_app_with(db, durable(db, |c| c.ingest.admission_defer_ms = 500)).await;
    let meta = Meta::new(&app, db);
    let burst = || {
        futures_util::future::join_all((1..=96).map(|n| {
            let message = text(&format!("wamid.BURST{n}"), CUSTOMER, &format!("order status {n}"));
            meta.request(&notification(DEMO_NUMBER, vec![message], vec![])).send()
        }))
    };
    for answer in burst().await {
        let answer: Value = answer.expect("answered").json().await.expect("json");
        assert_eq!((answer["stored"].as_u64(), answer["pending"].as_u64()), (Some(1), Some(1)), "{answer}");
    }
    let admitted = "SELECT COUNT(*) FROM inbound_messages WHERE channel = $1";
    until_count(db, admitted, "whatsapp", 96).await;
    until_count(db, "SELECT COUNT(*) FROM inbox WHERE admitted_at IS NULL AND channel = $1", "whatsapp", 0).await;
    for answer in burst().await {
        let answer: Value = answer.expect("answered").json().await.expect("json");
        assert_eq!((answer["stored"].as_u64(), answer["redelivered"].as_u64()), (Some(0), Some(1)), "{answer}");
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(db.count(admitted, "whatsapp").await, 96, "a redelivered burst admits nothing");
    assert_eq!(db.count_inbox("SELECT COUNT(*) FROM inbox WHERE channel = $1", "whatsapp").await, 96);
    app.stop().await.expect("stop");
}

on_both_backends!(
    a_conversation_is_admitted_in_order_behind_the_answer,
    a_delivery_past_the_backlog_limit_is_503_and_stores_nothing,
    a_burst_is_answered_first_and_admitted_once_after_it
);

/// Rows another instance stored and holds count against this one's backlog limit (503 while they
/// fill it) and wait for that instance; once its hold runs out (it died), this instance admits
/// them, each with the time the inbox received it as its command's receipt time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn another_instances_backlog_counts_and_is_taken_over_when_its_hold_ends() {
    let Some(db) = TestDb::postgres().await else { return };
    let received_at = time::OffsetDateTime::now_utc() - Duration::from_secs(60);
    let entries: Vec<NewInboxEntry> = (1..=3)
        .map(|n| {
            let body = notification(
                DEMO_NUMBER,
                vec![text(&format!("wamid.OTHER{n}"), CUSTOMER, &format!("order status 9{n}"))],
                vec![],
            );
            let delivery = chatgate::channels::whatsapp::payload::parse(body.to_string().as_bytes()).expect("parse");
            let message = delivery.messages.into_iter().next().expect("a message");
            NewInboxEntry {
                channel: message.channel.clone(),
                provider_message_id: message.provider_message_id.clone(),
                conversation_id: chatgate::service::intake::reply_destination(&message),
                payload: serde_json::to_string(&message).expect("json"),
                hold: None,
                trace_parent: None,
                answer_waits: false,
            }
        })
        .collect();
    let held = Lease { owner: "another-instance", until: time::OffsetDateTime::now_utc() + Duration::from_secs(3_600) };
    db.store.inbox().enter(&[&entries], held, true, received_at).await.expect("stored by another instance");

    let app = spawn_app_with(&db, durable(&db, |c| c.ingest.max_backlog = 3)).await;
    let meta = Meta::new(&app, &db);
    let refused = meta.text("wamid.MINE", CUSTOMER, "order status 10").await;
    assert_eq!(refused.status(), 503, "three messages wait: the backlog is full");
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let pending = "SELECT COUNT(*) FROM inbox WHERE admitted_at IS NULL AND owner = $1";
    assert_eq!(db.count_inbox(pending, "another-instance").await, 3, "held by a live instance: not taken");
    let intake = overview_intake(&app, &db).await;
    assert!(intake.contains("<strong>3</strong>") && intake.contains("the oldest has waited 6"), "{intake}");

    // The other instance died: its hold runs out.
    let mut conn = db.raw().await;
    sqlx::query("UPDATE inbox_owners SET alive_until = 0").execute(&mut conn).await.expect("hold ended");
    let admitted = "SELECT COUNT(*) FROM inbound_messages WHERE provider_message_id LIKE $1";
    until_count(&db, admitted, "wamid.OTHER%", 3).await;
    let rows: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT c.received_at, i.received_at FROM commands c JOIN inbound_messages m ON m.command_id = c.command_id
         JOIN inbox i ON i.provider_message_id = m.provider_message_id AND i.channel = m.channel",
    )
    .fetch_all(&mut conn)
    .await
    .expect("receipt times");
    assert_eq!(rows.len(), 3);
    for (command, inbox) in rows {
        assert_eq!(command, inbox, "the command's receipt time is the inbox's");
        assert_eq!(inbox, received_at.unix_timestamp_nanos() as i64 / 1_000_000);
    }
    // Admitted by this instance: marked once the pass that admitted them committed, a moment
    // after their messages were recorded.
    let taken = "SELECT COUNT(*) FROM inbox WHERE admitted_at IS NOT NULL AND owner <> $1";
    until_count(&db, taken, "another-instance", 3).await;
    assert_eq!(meta.text("wamid.MINE", CUSTOMER, "order status 10").await.status(), 200, "room again");
    until_count(&db, "SELECT COUNT(*) FROM inbox WHERE admitted_at IS NULL AND channel = $1", "whatsapp", 0).await;
    assert!(overview_intake(&app, &db).await.contains("<strong>0</strong>."));
    app.stop().await.expect("stop");
}

/// A message of this instance waits while an older one of its conversation is another live
/// instance's, and is taken after it once that instance is gone; other conversations go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_waits_behind_another_live_instances_older_message() {
    let Some(db) = TestDb::postgres().await else { return };
    let now = time::OffsetDateTime::now_utc();
    let entry = |id: &str, conversation: &str| bare_entry(id, conversation, false);
    let hour = Duration::from_secs(3_600);
    let theirs = Lease { owner: "another-instance", until: now + hour };
    let mine = Lease { owner: "this-instance", until: now + hour };
    let inbox = db.store.inbox();
    inbox
        .enter(&[&[entry("wamid.T1", "whatsapp:1:c1"), entry("wamid.T2", "whatsapp:1:c1")]], theirs, true, now)
        .await
        .expect("theirs");
    inbox
        .enter(&[&[entry("wamid.M1", "whatsapp:1:c1"), entry("wamid.M2", "whatsapp:1:c2")]], mine, true, now)
        .await
        .expect("mine");
    assert_eq!(ids(inbox.claim(mine, now, 10).await.expect("claim")), ["wamid.M2"], "c1 waits behind theirs");
    let gone = Lease { owner: "another-instance", until: now - hour };
    inbox.renew(gone).await.expect("their hold ended");
    let taken = ids(inbox.claim(mine, now, 10).await.expect("claim"));
    assert_eq!(taken, ["wamid.T1", "wamid.T2", "wamid.M1", "wamid.M2"], "theirs first, in order, then mine");
    let owned = "SELECT COUNT(*) FROM inbox WHERE owner = $1";
    assert_eq!(db.count_inbox(owned, "this-instance").await, 4, "what a dead instance left is this one's now");
}

/// The instance holding a conversation's oldest message takes the conversation's later messages
/// with it, another live instance's too — but not one whose webhook waits for its answer there,
/// nor what comes after that one — and the other instance takes nothing of it meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_instance_with_a_conversations_oldest_message_takes_its_followers_but_none_awaited() {
    let Some(db) = TestDb::postgres().await else { return };
    let now = time::OffsetDateTime::now_utc();
    let hour = Duration::from_secs(3_600);
    let theirs = Lease { owner: "another-instance", until: now + hour };
    let mine = Lease { owner: "this-instance", until: now + hour };
    let inbox = db.store.inbox();
    let enter = |id: &'static str, lease, answer_waits| async move {
        let entry = bare_entry(id, "whatsapp:1:c1", answer_waits);
        inbox.enter(&[&[entry]], lease, true, now).await.expect("stored");
    };
    enter("wamid.1", mine, false).await;
    enter("wamid.2", theirs, false).await;
    enter("wamid.3", mine, false).await;
    enter("wamid.4", theirs, true).await;
    enter("wamid.5", mine, false).await;
    assert!(inbox.claim(theirs, now, 10).await.expect("claim").is_empty(), "the oldest is mine: theirs wait");
    let claimed = inbox.claim(mine, now, 10).await.expect("claim");
    let claimed_ids: Vec<i64> = claimed.iter().map(|entry| entry.id).collect();
    assert_eq!(ids(claimed), ["wamid.1", "wamid.2", "wamid.3"], "up to their message whose answer waits");
    assert!(inbox.claim(theirs, now, 10).await.expect("claim").is_empty(), "mine are being admitted");
    let owned = "SELECT COUNT(*) FROM inbox WHERE owner = $1";
    assert_eq!(db.count_inbox(owned, "this-instance").await, 4, "their follower is mine now");

    inbox.admitted(&claimed_ids, now).await.expect("marked");
    assert!(inbox.claim(mine, now, 10).await.expect("claim").is_empty(), "their awaited message is the oldest now");
    let taken = ids(inbox.claim(theirs, now, 10).await.expect("claim"));
    assert_eq!(taken, ["wamid.4", "wamid.5"], "theirs, and my message behind it");
    assert_eq!(db.count_inbox(owned, "another-instance").await, 2);
}

/// A message of `conversation` as an instance stores it; `answer_waits`: its webhook waits.
fn bare_entry(id: &str, conversation: &str, answer_waits: bool) -> NewInboxEntry {
    NewInboxEntry {
        channel: chatgate::domain::command::Channel::parse("whatsapp").expect("channel"),
        provider_message_id: chatgate::domain::command::ExternalId::parse(id).expect("id"),
        conversation_id: conversation.to_owned(),
        payload: "{}".to_owned(),
        hold: None,
        trace_parent: None,
        answer_waits,
    }
}

/// The provider message ids of claimed rows, in their order.
fn ids(claimed: Vec<chatgate::store::InboxEntry>) -> Vec<String> {
    claimed.into_iter().map(|entry| entry.provider_message_id).collect()
}

/// The console overview's intake paragraph, as an operator sees it.
async fn overview_intake(app: &crate::helpers::TestApp, db: &TestDb) -> String {
    let token = crate::helpers::api_token(db, "demo", "ops-1", "commands:read");
    let signed = crate::helpers::console_sign_in(app, &token, &[]).await;
    let set = signed.headers()["set-cookie"].to_str().expect("ascii").to_owned();
    let cookie = cookie::Cookie::parse(set).expect("cookie");
    let page = app.client.get(app.url("/console")).header("cookie", format!("chatgate_session={}", cookie.value()));
    let html = page.send().await.expect("overview").text().await.expect("html");
    let start = html.find("<p id=\"intake\">").expect("the intake figures");
    html[start..].split("</p>").next().unwrap_or_default().to_owned()
}
