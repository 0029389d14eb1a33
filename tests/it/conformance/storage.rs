//! Storage behaviour beyond the lifecycle: migrations, transport dedupe, the outbox, isolation.

use std::time::Duration;

use chatgate::domain::command::Channel;

use chatgate::domain::command::ExternalId;
use chatgate::domain::lifecycle::Event;
use chatgate::domain::lifecycle::State;
use chatgate::domain::message::{InboundStatus, NoCommand};
use chatgate::service::engine::MoveContext;
use chatgate::store::{InboundOutcome, NewInbound, NewOutboxMessage};
use serde_json::json;

use super::{conformance, drive, now, path_to};
use crate::helpers::{TestDb, refund, tenant};

conformance!(
    migrations_apply_twice_without_change,
    a_redelivered_provider_message_is_one_row,
    outbox_rows_are_written_with_their_move_and_claimed_by_one_worker,
    claimed_rows_come_back_in_the_order_they_were_written,
    a_message_waits_behind_an_earlier_one_held_for_an_answer_or_in_flight,
    evidence_chains_are_per_tenant,
);

async fn claimed_rows_come_back_in_the_order_they_were_written(db: &TestDb) {
    // Replies to one person must go out in order, whatever order the database returns them in.
    let replies: Vec<NewOutboxMessage> = (0..40)
        .map(|n| NewOutboxMessage {
            kind: "message".into(),
            destination: "whatsapp:1:2".into(),
            payload: json!({"n": n}),
            hold: None,
        })
        .collect();
    let inbound = NewInbound {
        channel: Channel::parse("whatsapp").expect("channel"),
        provider_message_id: ExternalId::parse("wamid.ORDER").expect("id"),
        tenant_id: Some(tenant("demo")),
        status: InboundStatus::NoCommand(NoCommand::Help),
        payload: json!({}),
        detail: None,
        received_at: now(),
    };
    db.store.inbound().record(&inbound, &replies).await.expect("record");
    let claimed = db.store.outbox().claim("message", 40, Duration::from_secs(30), now()).await.expect("claim");
    let order: Vec<i64> = claimed.iter().filter_map(|m| m.payload["n"].as_i64()).collect();
    assert_eq!(order, (0..40).collect::<Vec<_>>());
}

async fn a_message_waits_behind_an_earlier_one_held_for_an_answer_or_in_flight(db: &TestDb) {
    let lease = Duration::from_secs(30);
    let message = |destination: &str, n: i64, hold: Option<Duration>| NewOutboxMessage {
        kind: "message".into(),
        destination: destination.into(),
        payload: json!({"n": n}),
        hold,
    };
    let record = |id: &str, replies: Vec<NewOutboxMessage>| {
        let inbound = NewInbound {
            channel: Channel::parse("twilio").expect("channel"),
            provider_message_id: ExternalId::parse(id).expect("id"),
            tenant_id: Some(tenant("demo")),
            status: InboundStatus::NoCommand(NoCommand::Help),
            payload: json!({}),
            detail: None,
            received_at: now(),
        };
        let store = db.store.clone();
        async move { store.inbound().record(&inbound, &replies).await.expect("record") }
    };
    let numbers = |claimed: &[chatgate::store::ClaimedMessage]| -> Vec<i64> {
        claimed.iter().filter_map(|m| m.payload["n"].as_i64()).collect()
    };
    // A reply held for the provider's answer, then a later one to the same person, and one to
    // somebody else.
    record("SMHELD", vec![message("twilio:a:b", 1, Some(Duration::from_secs(5)))]).await;
    record("SMLATER", vec![message("twilio:a:b", 2, None), message("twilio:a:c", 3, None)]).await;
    let claimed = db.store.outbox().claim("message", 10, lease, now()).await.expect("claim");
    assert_eq!(numbers(&claimed), [3], "the later reply waits behind the held one");
    // The answer takes the held reply: while it is in flight the later one still waits.
    let held = db.store.outbox().claim_held("twilio:a:b", lease, now()).await.expect("claim held");
    assert_eq!(numbers(&held), [1]);
    assert!(db.store.outbox().claim("message", 10, lease, now()).await.expect("claim").is_empty());
    // Once it is sent, the later one goes.
    db.store.outbox().complete(held[0].id, now()).await.expect("complete");
    let later = db.store.outbox().claim("message", 10, lease, now()).await.expect("claim");
    assert_eq!(numbers(&later), [2]);
    // A reply in retry backoff does not hold up the next one to the same person.
    db.store
        .outbox()
        .fail(later[0].id, "provider 503", Some(now() + Duration::from_secs(60)), now())
        .await
        .expect("fail");
    record("SMNEXT", vec![message("twilio:a:b", 4, None)]).await;
    let next = db.store.outbox().claim("message", 10, lease, now()).await.expect("claim");
    assert_eq!(numbers(&next), [4]);
}

async fn migrations_apply_twice_without_change(db: &TestDb) {
    db.store.migrate().await.expect("second run is a no-op");
    db.store.ping().await.expect("ping");
}

async fn a_redelivered_provider_message_is_one_row(db: &TestDb) {
    let message = |channel: &str| NewInbound {
        channel: Channel::parse(channel).expect("channel"),
        provider_message_id: ExternalId::parse("wamid.HBgLMTU1NTAwMDAwMDEVAgASGBQ=").expect("id"),
        tenant_id: Some(tenant("demo")),
        status: InboundStatus::Received,
        payload: json!({"text": "refund 1234 25.00"}),
        detail: None,
        received_at: now(),
    };
    let first = db.store.inbound().record(&message("whatsapp"), &[]).await.expect("record");
    let InboundOutcome::FirstSeen { id } = first else { panic!("first delivery is new: {first:?}") };
    let again = db.store.inbound().record(&message("whatsapp"), &[]).await.expect("record");
    assert_eq!(again, InboundOutcome::Duplicate { id, command_id: None });
    // The same id on another channel is another message.
    assert!(matches!(db.store.inbound().record(&message("twilio"), &[]).await, Ok(InboundOutcome::FirstSeen { .. })));
}

async fn outbox_rows_are_written_with_their_move_and_claimed_by_one_worker(db: &TestDb) {
    let demo = tenant("demo");
    let id = drive(db, refund("demo", "ob", "1.00", "m"), path_to(State::Canonicalized)).await;
    let prompt = NewOutboxMessage {
        kind: "prompt".into(),
        destination: "whatsapp:15550000001".into(),
        payload: json!({"text": "Refund order ob of 1.00? Reply YES or NO"}),
        hold: None,
    };
    let context = MoveContext { outbox: vec![prompt.clone()], ..MoveContext::default() };
    db.engine.advance(&demo, id, Event::RequestConfirmation, context, now()).await.expect("move");

    // Each worker claims its own kind only.
    let lease = Duration::from_secs(30);
    assert!(db.store.outbox().claim("dispatch", 10, lease, now()).await.expect("claim").is_empty());
    // Two workers race for the row: exactly one gets it.
    let (a, b) = tokio::join!(
        db.store.outbox().claim("prompt", 10, lease, now()),
        db.store.outbox().claim("prompt", 10, lease, now())
    );
    let claimed: Vec<_> = a.expect("claim").into_iter().chain(b.expect("claim")).collect();
    assert_eq!(claimed.len(), 1, "one row, one worker");
    let row = &claimed[0];
    assert_eq!((row.command_id, row.kind.as_str(), row.attempt), (Some(id), "prompt", 1));
    assert_eq!(row.payload, prompt.payload);

    // A failed attempt comes back when its retry is due, not before.
    let retry_at = now() + Duration::from_secs(60);
    db.store.outbox().fail(row.id, "provider 503", Some(retry_at), now()).await.expect("fail");
    assert!(db.store.outbox().claim("prompt", 10, lease, now()).await.expect("claim").is_empty());
    let due = db.store.outbox().claim("prompt", 10, lease, retry_at).await.expect("claim");
    assert_eq!(due.iter().map(|r| r.attempt).collect::<Vec<_>>(), [2]);
    db.store.outbox().complete(row.id, now()).await.expect("complete");
    assert!(
        db.store
            .outbox()
            .claim("prompt", 10, lease, retry_at + Duration::from_secs(3600))
            .await
            .expect("claim")
            .is_empty()
    );

    // A move that fails writes no outbox row either.
    let refused = MoveContext { outbox: vec![prompt], ..MoveContext::default() };
    assert!(db.engine.advance(&demo, id, Event::Start, refused, now()).await.is_err());
    assert_eq!(db.count("SELECT COUNT(*) FROM outbox WHERE command_id = $1", &id.to_string()).await, 1);
}

async fn evidence_chains_are_per_tenant(db: &TestDb) {
    drive(db, refund("demo", "1", "1.00", "m"), path_to(State::Confirmed)).await;
    drive(db, refund("acme", "1", "1.00", "m"), path_to(State::Canceled)).await;
    let report = db.store.evidence().verify().await.expect("verify");
    let chains: Vec<_> = report.chains.iter().map(|c| (c.chain_id.as_str(), c.artifacts, c.intact)).collect();
    assert_eq!(chains, [("acme", 3, true), ("demo", 3, true)]);
}
