//! Issue 27.10: senders a tenant does not know count against the same limits as its people (each
//! address its own budget), the refusals sent to them are bounded per tenant (each is a paid
//! conversation on WhatsApp; the rest are kept and counted, not answered), and a refusal to a
//! stranger never makes a known person's reply wait: the sender takes those first.

use chatgate::domain::replies::{Rejection, RejectionReason, Reply};
use std::time::Duration;

use chatgate::config::Rate;
use chatgate::store::{NOTICE_KIND, NewInbound, ReplyTo};
use serde_json::json;

use crate::fake_graph::{FakeGraph, sending_through, text_of};
use crate::helpers::{CUSTOMER, DEMO_NUMBER, Meta, TestDb, on_both_backends, spawn_app_with, tenant};

on_both_backends!(unknown_senders_are_limited_and_their_refusals_bounded, a_known_persons_reply_goes_before_notices);

async fn statuses(db: &TestDb, status: &str) -> i64 {
    db.count("SELECT COUNT(*) FROM inbound_messages WHERE status = $1", status).await
}

async fn unknown_senders_are_limited_and_their_refusals_bounded(db: &TestDb) {
    let mut config = db.config.clone();
    // One token a minute: sixty messages slowed by a busy machine never earn one back mid-run.
    config.rate_limits.actor = Rate { per_minute: 1, burst: 10 };
    config.rate_limits.unknown_sender_replies = Rate { per_minute: 30, burst: 10 };
    let app = spawn_app_with(db, config).await;
    let meta = Meta::new(&app, db);
    // One stranger, 60 messages: limited like a known person (a burst of 10), each kept.
    for n in 0..60 {
        assert_eq!(meta.text(&format!("wamid.S{n}"), "15559990000", "refund 1 1.00").await.status(), 200);
    }
    assert_eq!(statuses(db, "rate_limited").await, 50, "one stranger: 10, like an actor");
    // 200 strangers, one message each: refusals are bounded by the tenant's budget (10 at once,
    // then 30 a minute); every message is kept.
    for n in 0..200 {
        let from = format!("1555800{n:04}");
        assert_eq!(meta.text(&format!("wamid.M{n}"), &from, "hello").await.status(), 200);
    }
    assert_eq!(statuses(db, "refused_unknown_sender").await, 210, "every message kept");
    let notices = db.count("SELECT COUNT(*) FROM outbox WHERE kind = $1", NOTICE_KIND).await;
    assert!((10..=14).contains(&notices), "refusals sent within the budget, not one each: {notices}");
    assert_eq!(db.count("SELECT COUNT(*) FROM outbox WHERE kind = $1", "message").await, 0, "none as messages");
    // A known customer is served as ever.
    assert_eq!(meta.text("wamid.K1", CUSTOMER, "order status 1").await.status(), 200);
    let id = crate::helpers::command_of_message(db, "wamid.K1").await;
    assert_eq!(crate::helpers::settled(db, id).await, "executed");
    app.stop().await.expect("stop");
}

/// Twelve refusals to strangers queued before a reply to a known customer: with one message a
/// claim, the customer's goes first.
async fn a_known_persons_reply_goes_before_notices(db: &TestDb) {
    let reply_to = |person: &str| ReplyTo {
        destination: format!("whatsapp:{DEMO_NUMBER}:{person}"),
        base: chatgate::domain::outbound::ReplyAddress::new(
            chatgate::domain::command::Channel::parse("whatsapp").expect("channel"),
            DEMO_NUMBER,
            person,
            "en",
        ),
        command: None,
        what: None,
        executed_template: None,
        hold: None,
    };
    let now = time::OffsetDateTime::now_utc();
    let store = |n: usize, reply| {
        let message = NewInbound {
            channel: chatgate::domain::command::Channel::parse("whatsapp").expect("channel"),
            provider_message_id: chatgate::domain::command::ExternalId::parse(&format!("wamid.Q{n}")).expect("id"),
            tenant_id: Some(tenant("demo")),
            status: chatgate::domain::message::InboundStatus::Received,
            payload: json!({}),
            detail: None,
            received_at: now + time::Duration::milliseconds(n as i64),
        };
        async move { db.store.inbound().record(&message, &[reply]).await.expect("recorded") }
    };
    for n in 0..12 {
        let refusal = reply_to(&format!("1555700{n:04}"))
            .message(&Reply::Rejected(Rejection::because(RejectionReason::UnknownSender)));
        store(n, chatgate::store::NewOutboxMessage { kind: NOTICE_KIND.into(), ..refusal }).await;
    }
    store(
        12,
        reply_to(CUSTOMER).message(&Reply::Rejected(Rejection {
            codes: Some(vec![]),
            ..Rejection::because(RejectionReason::NothingToConfirm)
        })),
    )
    .await;
    let graph = FakeGraph::start().await;
    let mut config = sending_through(&db.config, &graph);
    config.outbound.batch = 1;
    let app = spawn_app_with(db, config).await;
    let sent = graph.wait_for(13, Duration::from_secs(20)).await;
    assert_eq!(sent[0].body["to"], CUSTOMER, "the known person first: {}", text_of(&sent[0].body));
    assert!(sent[1..].iter().all(|r| r.body["to"] != CUSTOMER));
    app.stop().await.expect("stop");
}
