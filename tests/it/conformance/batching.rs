//! Group commit: a batch of admissions gets exactly the answers each would get alone, and writes
//! everything each would write.

use chatgate::domain::command::Channel;

use chatgate::domain::command::CommandRequest;

use chatgate::domain::command::ExternalId;
use chatgate::domain::lifecycle::Event;
use chatgate::domain::lifecycle::State;
use chatgate::service::engine::Admission;
use chatgate::store::{AdmissionWrite, Admitted, NewInbound, NewOutboxMessage};
use serde_json::json;

use super::{conformance, now};
use crate::helpers::{TestDb, refund};

conformance!(
    a_batch_of_new_commands_is_one_transaction_and_writes_everything_each_would,
    a_batch_with_redeliveries_or_shared_keys_answers_each_as_alone,
);

fn inbound(message_id: &str) -> NewInbound {
    NewInbound {
        channel: Channel::parse("whatsapp").expect("channel"),
        provider_message_id: ExternalId::parse(message_id).expect("id"),
        tenant_id: Some(crate::helpers::tenant("demo")),
        status: chatgate::domain::message::InboundStatus::Received,
        payload: json!({"id": message_id}),
        detail: None,
        received_at: now(),
    }
}

fn plan(db: &TestDb, request: CommandRequest, message_id: &str) -> AdmissionWrite {
    let prompt = NewOutboxMessage {
        kind: "prompt".into(),
        destination: "whatsapp:1:15550000001".into(),
        payload: json!({"template": "confirmation_prompt"}),
        hold: None,
    };
    let admission = Admission {
        then: &[Event::RequestConfirmation],
        inbound: Some(inbound(message_id)),
        outbox: vec![prompt],
        ..Admission::default()
    };
    db.engine.plan(request, admission, now()).expect("plan")
}

async fn a_batch_of_new_commands_is_one_transaction_and_writes_everything_each_would(db: &TestDb) {
    let mut writes: Vec<AdmissionWrite> = (0..40)
        .map(|n| plan(db, refund("demo", &format!("b{n}"), "1.00", &format!("wamid.B{n}")), &format!("wamid.B{n}")))
        .collect();
    // Another tenant in the same batch: its own chain.
    writes.push(plan(db, refund("acme", "b0", "1.00", "wamid.ACME"), "wamid.ACME"));
    // One refused at once (ends terminal at admission): its reservation must replay that outcome.
    let refused = Admission {
        then: &[Event::SubmitForAuthorization, Event::Deny],
        reason_code: Some("missing_scope".into()),
        inbound: Some(inbound("wamid.DENY")),
        ..Admission::default()
    };
    let refused = db.engine.plan(refund("demo", "deny", "1.00", "wamid.DENY"), refused, now()).expect("plan");
    let refused_id = refused.envelope.command_id;
    writes.push(refused);
    let results = db.store.commands().admit_many(&writes).await;
    assert_eq!(db.store.admission_stats(), (1, 42), "one transaction carried all 42");
    match results.last() {
        Some(Ok(Admitted::New { command_id, lifecycle, version: 3 })) => {
            assert_eq!((*command_id, lifecycle.state), (refused_id, State::Rejected));
        }
        other => panic!("expected the refusal, got {other:?}"),
    }
    let artifacts = db.store.evidence().for_command("demo", refused_id).await.expect("evidence");
    let outcome = artifacts.last().expect("evidence").artifact_id.to_string();
    assert_eq!(db.count("SELECT COUNT(*) FROM dedupe_records WHERE outcome_ref = $1", &outcome).await, 1, "settled");
    let (_, replay) =
        db.engine.accept(refund("demo", "deny", "1.00", "wamid.DENY2"), &[], now()).await.expect("accept");
    assert!(matches!(&replay, Admitted::Replayed(d) if d.command_id == refused_id), "{replay:?}");
    let writes = &writes[..41];
    let results = &results[..41];
    for (write, result) in writes.iter().zip(results) {
        match result {
            Ok(Admitted::New { command_id, lifecycle, version: 2 }) => {
                assert_eq!(*command_id, write.envelope.command_id);
                assert_eq!(lifecycle.state, State::ConfirmationRequired);
            }
            other => panic!("expected a new command, got {other:?}"),
        }
    }
    assert_eq!(db.count("SELECT COUNT(*) FROM commands WHERE state = $1", "confirmation_required").await, 41);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM command_transitions WHERE to_state = $1", "confirmation_required").await,
        41
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM inbound_messages WHERE status = $1", "command").await,
        42,
        "the refusal's too"
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM outbox WHERE kind = $1", "prompt").await, 41);
    assert_eq!(db.count("SELECT COUNT(*) FROM dedupe_records WHERE status = $1", "in_progress").await, 41);
    for write in writes {
        let id = write.envelope.command_id;
        let artifacts = db.store.evidence().for_command(write.envelope.tenant_id.as_str(), id).await.expect("evidence");
        let kinds: Vec<&str> = artifacts.iter().map(|a| a.kind.as_str()).collect();
        assert_eq!(kinds, ["command.accepted", "command.confirmation.requested"]);
        let linked = db.count("SELECT COUNT(*) FROM inbound_messages WHERE command_id = $1", &id.to_string()).await;
        assert_eq!(linked, 1);
    }
    let report = db.store.evidence().verify().await.expect("verify");
    assert!(report.first_break.is_none(), "{:?}", report.first_break);
    let chains: Vec<_> = report.chains.iter().map(|c| (c.chain_id.as_str(), c.artifacts)).collect();
    // demo: 40 × 2, the refusal's 4 (accepted, authz requested, authz decided, rejected), the replay's 1.
    assert_eq!(chains, [("acme", 2), ("demo", 85)]);
}

async fn a_batch_with_redeliveries_or_shared_keys_answers_each_as_alone(db: &TestDb) {
    let first = plan(db, refund("demo", "x", "1.00", "wamid.X1"), "wamid.X1");
    let Ok(Admitted::New { command_id: existing, .. }) =
        db.store.commands().admit_many(std::slice::from_ref(&first)).await.remove(0)
    else {
        panic!("the first admission is new")
    };
    let writes = vec![
        plan(db, refund("demo", "y", "1.00", "wamid.Y1"), "wamid.Y1"),
        // The same message again (a redelivered webhook).
        plan(db, refund("demo", "x", "1.00", "wamid.X1"), "wamid.X1"),
        // The same command in a new message (IDS duplicate, still in progress).
        plan(db, refund("demo", "x", "1.00", "wamid.X2"), "wamid.X2"),
        // Two new messages with one new command between them.
        plan(db, refund("demo", "z", "1.00", "wamid.Z1"), "wamid.Z1"),
        plan(db, refund("demo", "z", "1.00", "wamid.Z2"), "wamid.Z2"),
    ];
    let results: Vec<Admitted> =
        db.store.commands().admit_many(&writes).await.into_iter().map(|r| r.expect("admitted")).collect();
    assert!(matches!(results[0], Admitted::New { .. }), "{:?}", results[0]);
    assert!(
        matches!(results[1], Admitted::Redelivered { command_id: Some(id), .. } if id == existing),
        "{:?}",
        results[1]
    );
    assert!(matches!(&results[2], Admitted::InProgress(d) if d.command_id == existing), "{:?}", results[2]);
    let Admitted::New { command_id: z, .. } = results[3] else { panic!("{:?}", results[3]) };
    assert!(matches!(&results[4], Admitted::InProgress(d) if d.command_id == z), "{:?}", results[4]);
    assert_eq!(db.store.admission_stats().0, 0, "these were decided one at a time");
    assert_eq!(db.count("SELECT COUNT(*) FROM commands WHERE tenant_id = $1", "demo").await, 3);
}
