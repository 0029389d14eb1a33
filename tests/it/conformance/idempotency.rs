//! IDS §XIII: duplicates never duplicate effects, concurrent duplicates converge, a duplicate
//! after success replays, one during progress answers "in progress", a collision is rejected
//! with evidence, and windows expire.

use std::time::Duration;

use chatgate::domain::command::IdempotencyKey;
use chatgate::domain::lifecycle::Event;
use chatgate::domain::lifecycle::State;
use chatgate::service::engine::EngineError;
use chatgate::service::engine::MoveContext;
use chatgate::store::{Admitted, RetentionPace};

use super::{admit_new, conformance, drive, evidence, kinds, now, path_to, step};
use crate::helpers::{TestDb, order_status, refund, tenant};

conformance!(
    duplicates_never_reenter_execution,
    fifty_concurrent_reservations_of_one_key_produce_exactly_one_winner,
    a_duplicate_after_success_replays_the_outcome,
    a_duplicate_of_any_terminal_outcome_replays_it,
    a_duplicate_during_progress_answers_in_progress_without_a_second_prompt,
    a_reused_key_with_a_different_command_is_rejected_with_both_fingerprints,
    keys_are_scoped_by_tenant,
    expired_records_are_purged_and_the_key_can_be_used_again,
    a_command_still_running_keeps_its_reservation_past_its_window,
    reads_are_not_reserved,
);

async fn duplicates_never_reenter_execution(db: &TestDb) {
    let demo = tenant("demo");
    let id = drive(db, refund("demo", "1234", "25.00", "wamid.1"), path_to(State::Started)).await;

    let (_, again) = db.engine.accept(refund("demo", "1234", "25.00", "wamid.2"), &[], now()).await.expect("accept");
    assert!(matches!(&again, Admitted::InProgress(d) if d.command_id == id && d.state == State::Started), "{again:?}");
    let restart = db.engine.advance(&demo, id, Event::Start, MoveContext::default(), now()).await;
    assert!(matches!(restart, Err(EngineError::InvalidTransition { .. })));

    step(db, &demo, id, Event::Succeed).await;
    let (_, again) = db.engine.accept(refund("demo", "1234", "25.00", "wamid.3"), &[], now()).await.expect("accept");
    assert!(matches!(&again, Admitted::Replayed(d) if d.command_id == id && d.state == State::Executed), "{again:?}");
    let restart = db.engine.advance(&demo, id, Event::Start, MoveContext::default(), now()).await;
    assert!(matches!(restart, Err(EngineError::InvalidTransition { .. })));

    let history = db.store.commands().transitions(id).await.expect("transitions");
    assert_eq!(history.iter().filter(|t| t.to == State::Started).count(), 1, "started once");
    let key = db.engine.command(&demo, id).await.expect("command").envelope.idempotency_key;
    let same_key = db.count("SELECT COUNT(*) FROM commands WHERE idempotency_key = $1", key.as_str()).await;
    assert_eq!(same_key, 1, "no second command for the same key");
}

async fn fifty_concurrent_reservations_of_one_key_produce_exactly_one_winner(db: &TestDb) {
    let attempts = (0..50).map(|i| {
        let engine = db.engine.clone();
        tokio::spawn(
            async move { engine.accept(refund("demo", "5000", "10.00", &format!("wamid.c{i}")), &[], now()).await },
        )
    });
    let mut winners = vec![];
    let mut duplicates = vec![];
    for attempt in attempts {
        match attempt.await.expect("task").expect("accept") {
            (_, Admitted::New { command_id, .. }) => winners.push(command_id),
            (_, Admitted::InProgress(d) | Admitted::Replayed(d)) => duplicates.push(d.command_id),
            (_, other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one winner");
    assert_eq!(duplicates.len(), 49);
    assert!(duplicates.iter().all(|d| *d == winners[0]), "every duplicate names the winner");
    let key = db.engine.command(&tenant("demo"), winners[0]).await.expect("command").envelope.idempotency_key;
    assert_eq!(db.count("SELECT COUNT(*) FROM commands WHERE idempotency_key = $1", key.as_str()).await, 1);
    assert_eq!(db.store.dedupe().count("demo", key.as_str()).await.expect("count"), 1);
    let artifacts = evidence(db, &tenant("demo"), winners[0]).await;
    let decided = artifacts.iter().filter(|a| a.kind == "dedupe.decided").count();
    assert_eq!(decided, 49, "every duplicate decision is evidence");
}

async fn a_duplicate_after_success_replays_the_outcome(db: &TestDb) {
    let demo = tenant("demo");
    let id = drive(db, refund("demo", "42", "3.50", "wamid.a"), path_to(State::Executed)).await;
    let executed = evidence(db, &demo, id).await.into_iter().find(|a| a.kind == "execution.executed").expect("outcome");

    for redelivery in ["wamid.b", "wamid.c"] {
        let (_, again) = db.engine.accept(refund("demo", "42", "3.50", redelivery), &[], now()).await.expect("accept");
        match again {
            Admitted::Replayed(d) => {
                assert_eq!((d.command_id, d.state), (id, State::Executed));
                assert_eq!(d.outcome_ref, Some(executed.artifact_id), "the same outcome, by reference");
            }
            other => panic!("expected a replay, got {other:?}"),
        }
    }
    let artifacts = evidence(db, &demo, id).await;
    let replays: Vec<_> = artifacts.iter().filter(|a| a.kind == "dedupe.decided").collect();
    assert_eq!(replays.len(), 2);
    for r in replays {
        assert_eq!(r.body["decision"]["dedupe"], "duplicate_replayed");
        assert_eq!(r.body["decision"]["outcome_ref"], executed.artifact_id.to_string());
        assert_eq!(r.body["decision"]["idempotency_key"].as_str().map(str::len), Some(64));
    }
}

async fn a_duplicate_of_any_terminal_outcome_replays_it(db: &TestDb) {
    for (n, terminal) in [State::Rejected, State::Failed, State::Canceled, State::Compensated].into_iter().enumerate() {
        let order = format!("t{n}");
        let id = drive(db, refund("demo", &order, "1.00", "m1"), path_to(terminal)).await;
        let (_, again) = db.engine.accept(refund("demo", &order, "1.00", "m2"), &[], now()).await.expect("accept");
        assert!(
            matches!(&again, Admitted::Replayed(d) if d.command_id == id && d.state == terminal && d.outcome_ref.is_some()),
            "{terminal}: {again:?}"
        );
    }
}

async fn a_duplicate_during_progress_answers_in_progress_without_a_second_prompt(db: &TestDb) {
    let demo = tenant("demo");
    let (envelope, first) = db
        .engine
        .accept(refund("demo", "88", "8.00", "m1"), &[Event::RequestConfirmation], now())
        .await
        .expect("accept");
    assert!(matches!(first, Admitted::New { .. }));
    let (_, again) = db
        .engine
        .accept(refund("demo", "88", "8.00", "m2"), &[Event::RequestConfirmation], now())
        .await
        .expect("accept");
    match again {
        Admitted::InProgress(d) => {
            assert_eq!((d.command_id, d.state), (envelope.command_id, State::ConfirmationRequired));
            assert_eq!(d.outcome_ref, None);
        }
        other => panic!("expected in progress, got {other:?}"),
    }
    let artifacts = evidence(db, &demo, envelope.command_id).await;
    assert_eq!(
        kinds(&artifacts),
        ["command.accepted", "command.confirmation.requested", "dedupe.decided"],
        "the duplicate asked for no second confirmation"
    );
    assert_eq!(artifacts[2].body["decision"]["dedupe"], "duplicate_in_progress");
}

async fn a_reused_key_with_a_different_command_is_rejected_with_both_fingerprints(db: &TestDb) {
    let demo = tenant("demo");
    let key = IdempotencyKey::parse("client-key-7").expect("key");
    let original = refund("demo", "700", "70.00", "m1");
    let first =
        admit_new(db, chatgate::domain::command::CommandRequest { supplied_key: Some(key.clone()), ..original }).await;
    let first_fp = db.engine.command(&demo, first).await.expect("command").envelope.fingerprint;

    let different = refund("demo", "700", "7000.00", "m2");
    let (attempted, outcome) = db
        .engine
        .accept(chatgate::domain::command::CommandRequest { supplied_key: Some(key.clone()), ..different }, &[], now())
        .await
        .expect("accept");
    let evidence_id = match outcome {
        Admitted::Conflict { existing_command_id, existing_fingerprint, evidence_id } => {
            assert_eq!(existing_command_id, first);
            assert_eq!(existing_fingerprint, first_fp);
            evidence_id
        }
        other => panic!("expected a conflict, got {other:?}"),
    };
    assert_ne!(attempted.fingerprint, first_fp);
    assert!(db.engine.command(&demo, attempted.command_id).await.is_err(), "nothing was created");
    assert!(evidence(db, &demo, attempted.command_id).await.is_empty(), "the refused command never exists");
    // The decision is on the command that holds the key.
    let artifacts = evidence(db, &demo, first).await;
    let a = artifacts.last().expect("the decision");
    assert_eq!((a.artifact_id, a.kind.as_str()), (evidence_id, "dedupe.decided"));
    assert_eq!(a.body["decision"]["attempted_command_id"], attempted.command_id.to_string());
    assert_eq!(a.body["reason_code"], "idempotency_conflict");
    assert_eq!(a.body["decision"]["dedupe"], "conflict_rejected");
    assert_eq!(a.body["decision"]["existing_fingerprint"], first_fp.as_str());
    assert_eq!(a.body["decision"]["attempted_fingerprint"], attempted.fingerprint.as_str());
    assert_eq!(a.body["decision"]["existing_command_id"], first.to_string());
    // The original is untouched.
    assert_eq!(db.engine.command(&demo, first).await.expect("command").version, 1);
}

async fn keys_are_scoped_by_tenant(db: &TestDb) {
    let a = admit_new(db, refund("demo", "1", "1.00", "m")).await;
    let b = admit_new(db, refund("acme", "1", "1.00", "m")).await;
    assert_ne!(a, b);
    assert!(db.engine.command(&tenant("acme"), a).await.is_err(), "another tenant's command is not found");
}

async fn expired_records_are_purged_and_the_key_can_be_used_again(db: &TestDb) {
    let short = |m: &str| chatgate::domain::command::CommandRequest {
        dedupe_window: Duration::from_millis(1),
        ..refund("demo", "900", "9.00", m)
    };
    let first = drive(db, short("m1"), path_to(State::Executed)).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    // Past the window, even before the cleanup runs, the key may be taken again.
    let second = admit_new(db, short("m2")).await;
    assert_ne!(first, second);
    let demo = tenant("demo");
    for event in path_to(State::Executed) {
        step(db, &demo, second, *event).await;
    }
    let key = db.engine.command(&demo, second).await.expect("command").envelope.idempotency_key;
    let pace = &mut RetentionPace::of(&Default::default());
    let removed = db.store.dedupe().purge_expired(now() + Duration::from_secs(1), pace).await.expect("purge");
    assert!(removed >= 1);
    assert_eq!(db.store.dedupe().count("demo", key.as_str()).await.expect("count"), 0);
}

async fn a_command_still_running_keeps_its_reservation_past_its_window(db: &TestDb) {
    let short = |m: &str| chatgate::domain::command::CommandRequest {
        dedupe_window: Duration::from_millis(1),
        ..refund("demo", "901", "9.00", m)
    };
    let running = drive(db, short("m1"), path_to(State::Started)).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let pace = &mut RetentionPace::of(&Default::default());
    db.store.dedupe().purge_expired(now() + Duration::from_secs(1), pace).await.expect("purge");
    let (_, again) = db.engine.accept(short("m2"), &[], now()).await.expect("accept");
    assert!(matches!(&again, Admitted::InProgress(d) if d.command_id == running), "{again:?}");
}

async fn reads_are_not_reserved(db: &TestDb) {
    let a = admit_new(db, order_status("demo", "1234", "m1")).await;
    let b = admit_new(db, order_status("demo", "1234", "m2")).await;
    assert_ne!(a, b, "a repeated read is a new read");
    let artifacts = evidence(db, &tenant("demo"), a).await;
    assert_eq!(artifacts[0].body["decision"]["dedupe"], "not_reserved");
}
