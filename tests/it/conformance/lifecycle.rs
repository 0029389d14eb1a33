//! SMCL §XI: invalid transitions are refused with evidence, the ordering invariants hold for
//! persisted histories, and every required evidence kind is written.

use std::collections::BTreeSet;

use chatgate::service::engine::EngineError;

use chatgate::domain::lifecycle;
use chatgate::domain::lifecycle::Event;
use chatgate::domain::lifecycle::EvidenceKind;
use chatgate::domain::lifecycle::State;
use chatgate::service::engine::MoveContext;
use chatgate::store::StoreError;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{conformance, drive, evidence, kinds, now, path_to, step};
use crate::helpers::{TestDb, order_status, refund, tenant};

conformance!(
    every_disallowed_transition_is_refused_and_leaves_evidence,
    a_mutation_cannot_skip_confirmation_through_the_pre_confirm_path,
    random_histories_never_start_a_mutation_without_confirmation_and_authorization,
    every_required_evidence_kind_is_written_with_its_stage_and_trace,
    a_read_skips_confirmation,
    a_lost_compare_and_swap_is_reported_never_overwritten,
    admission_can_apply_the_first_moves_in_the_same_transaction,
);

async fn every_disallowed_transition_is_refused_and_leaves_evidence(db: &TestDb) {
    let demo = tenant("demo");
    for &target in State::ALL.iter().filter(|s| **s != State::Received) {
        let id = drive(db, refund("demo", target.as_str(), "25.00", "m"), path_to(target)).await;
        let before = db.engine.command(&demo, id).await.expect("command");
        assert_eq!(before.lifecycle.state, target);
        let refused: Vec<Event> =
            Event::ALL.iter().copied().filter(|&e| lifecycle::lookup(target, e).is_none()).collect();
        for &event in &refused {
            match db.engine.advance(&demo, id, event, MoveContext::default(), now()).await {
                Err(EngineError::InvalidTransition { state, .. }) => assert_eq!(state, target),
                other => panic!("{target} -{event}-> must be refused, got {other:?}"),
            }
        }
        let after = db.engine.command(&demo, id).await.expect("command");
        assert_eq!((after.lifecycle, after.version), (before.lifecycle, before.version), "{target} unchanged");

        let attempts: Vec<_> = evidence(db, &demo, id)
            .await
            .into_iter()
            .filter(|a| a.kind == EvidenceKind::InvalidTransitionAttempt.as_str())
            .collect();
        assert_eq!(attempts.len(), refused.len(), "one artifact per refused attempt from {target}");
        for (artifact, event) in attempts.iter().zip(&refused) {
            assert_eq!(artifact.body["lifecycle"]["stage"], target.as_str());
            assert_eq!(artifact.body["decision"]["attempted_event"], event.as_str());
            assert_eq!(artifact.body["reason_code"], "transition_not_allowed");
        }
    }
}

async fn a_mutation_cannot_skip_confirmation_through_the_pre_confirm_path(db: &TestDb) {
    let demo = tenant("demo");
    // canonicalized → authz_pending is allowed (to refuse early), but it grants nothing.
    let id = drive(db, refund("demo", "77", "5.00", "m"), &[Event::SubmitForAuthorization]).await;
    let refused = db.engine.advance(&demo, id, Event::Allow, MoveContext::default(), now()).await;
    assert!(matches!(refused, Err(EngineError::InvalidTransition { state: State::AuthzPending, .. })), "{refused:?}");
    let artifacts = evidence(db, &demo, id).await;
    let last = artifacts.last().expect("evidence");
    assert_eq!(last.kind, "invalid_transition_attempt");
    assert_eq!(last.body["reason_code"], "confirmation_required");
    // The deny path stays open.
    assert_eq!(step(db, &demo, id, Event::Deny).await.transition.to, State::Rejected);
}

async fn random_histories_never_start_a_mutation_without_confirmation_and_authorization(db: &TestDb) {
    let demo = tenant("demo");
    let mut rng = StdRng::seed_from_u64(0x5eed_c4a7);
    for case in 0..40 {
        let id = super::admit_new(db, refund("demo", &format!("r{case}"), "1.00", "m")).await;
        for _ in 0..14 {
            let event = Event::ALL[rng.random_range(0..Event::ALL.len())];
            // Refusals are expected and recorded; only the persisted history matters here.
            let _ = db.engine.advance(&demo, id, event, MoveContext::default(), now()).await;
        }
        let history = db.store.commands().transitions(id).await.expect("transitions");
        let command = db.engine.command(&demo, id).await.expect("command");
        assert_eq!(history.last().map(|t| t.to), Some(command.lifecycle.state), "row state is the last move");
        assert_eq!(history.len() as i64, command.version, "one row per version");
        for pair in history.windows(2) {
            assert_eq!(pair[0].to, pair[1].from, "history is contiguous");
            assert!(lifecycle::lookup(pair[1].from, pair[1].event).is_some(), "every move is in the table");
        }
        let starts = history.iter().filter(|t| t.to == State::Started).count();
        assert!(starts <= 1, "started at most once");
        if let Some(at) = history.iter().position(|t| t.to == State::Started) {
            let before = &history[..at];
            assert!(before.iter().any(|t| t.to == State::Authorized), "case {case}: started unauthorized");
            assert!(
                before.iter().any(|t| t.to == State::Confirmed || t.event == Event::AutoConfirm),
                "case {case}: mutation started unconfirmed: {history:?}"
            );
        }
    }
}

async fn every_required_evidence_kind_is_written_with_its_stage_and_trace(db: &TestDb) {
    let demo = tenant("demo");
    let mut written = BTreeSet::new();
    for target in [State::Compensated, State::Failed, State::Rejected, State::Canceled] {
        let id = drive(db, refund("demo", target.as_str(), "9.99", "wamid.E1"), path_to(target)).await;
        let history = db.store.commands().transitions(id).await.expect("transitions");
        let artifacts = evidence(db, &demo, id).await;
        // Each move's artifacts, in order, are exactly the kinds SMCL §IX names for its new state.
        let expected: Vec<&str> =
            history.iter().flat_map(|t| EvidenceKind::for_state(t.to).iter().map(|k| k.as_str())).collect();
        assert_eq!(kinds(&artifacts), expected, "evidence of the path to {target}");
        let mut artifacts = artifacts.iter();
        for t in &history {
            for _ in EvidenceKind::for_state(t.to) {
                let a = artifacts.next().expect("artifact");
                assert_eq!(a.body["lifecycle"]["command_id"], id.to_string());
                assert_eq!(a.body["lifecycle"]["stage"], t.to.as_str());
                assert_eq!(a.body["lifecycle"]["event"], t.event.as_str());
                assert_eq!(a.body["trace"]["message_ids"][0], "wamid.E1");
                assert!(a.body["trace"]["correlation_id"].is_string());
                let text = a.body.to_string();
                assert!(!text.contains("15550000001"), "no phone number in clear: {text}");
                assert!(a.body["trace"]["actor"].as_str().is_some_and(|s| s.starts_with("hk1:")));
            }
        }
        for t in &history {
            written.extend(EvidenceKind::for_state(t.to).iter().map(|k| k.as_str()));
        }
        let decisions: Vec<_> =
            evidence(db, &demo, id).await.into_iter().filter(|a| a.kind == "authz.decided").collect();
        for d in decisions {
            let expected = if d.body["lifecycle"]["stage"] == "rejected" { "deny" } else { "allow" };
            assert_eq!(d.body["decision"]["authz"], expected);
        }
    }
    let required = [
        "command.accepted",
        "command.confirmation.requested",
        "command.confirmation.satisfied",
        "authz.decided",
        "execution.started",
        "execution.executed",
        "execution.failed",
        "execution.rejected",
        "compensation.compensated",
    ];
    for kind in required {
        assert!(written.contains(kind), "{kind} was never written");
    }
}

async fn a_read_skips_confirmation(db: &TestDb) {
    let demo = tenant("demo");
    use Event::*;
    let id = drive(db, order_status("demo", "1234", "m"), &[SubmitForAuthorization, Allow, Start, Succeed]).await;
    assert_eq!(db.engine.command(&demo, id).await.expect("command").lifecycle.state, State::Executed);
    let refused = db.engine.advance(&demo, id, RequestConfirmation, MoveContext::default(), now()).await;
    assert!(refused.is_err());
    let fresh = drive(db, order_status("demo", "99", "m"), &[]).await;
    let refused = db.engine.advance(&demo, fresh, RequestConfirmation, MoveContext::default(), now()).await;
    assert!(matches!(refused, Err(EngineError::InvalidTransition { .. })), "a read has no confirmation step");
}

async fn a_lost_compare_and_swap_is_reported_never_overwritten(db: &TestDb) {
    let demo = tenant("demo");
    let id = drive(db, refund("demo", "cas", "1.00", "m"), path_to(State::ConfirmationRequired)).await;
    // Two deciders read the same version and race: one confirms, one cancels.
    let (a, b) = tokio::join!(
        db.engine.advance(&demo, id, Event::Confirm, MoveContext::default(), now()),
        db.engine.advance(&demo, id, Event::Cancel, MoveContext::default(), now()),
    );
    let outcomes = [a.is_ok(), b.is_ok()];
    let command = db.engine.command(&demo, id).await.expect("command");
    assert_eq!(command.version, 3, "exactly one of the two moves committed");
    match (a, b) {
        (Ok(won), Err(lost)) | (Err(lost), Ok(won)) => {
            assert_eq!(command.lifecycle.state, won.transition.to);
            assert!(
                matches!(
                    lost,
                    EngineError::Store(StoreError::StaleVersion { .. }) | EngineError::InvalidTransition { .. }
                ),
                "the loser is told, not overwritten: {lost:?}"
            );
        }
        _ => panic!("exactly one move wins: {outcomes:?}"),
    }

    // Deterministically: a write decided on an old version is refused and changes nothing.
    let stale = lifecycle::apply(
        chatgate::domain::lifecycle::Lifecycle { state: State::ConfirmationRequired, ..command.lifecycle },
        Event::Cancel,
    )
    .expect("allowed from confirmation_required");
    let write = chatgate::store::TransitionWrite {
        tenant_id: demo.clone(),
        command_id: id,
        expected_version: 2,
        transition: stale,
        reason_code: None,
        evidence: vec![],
        outbox: vec![],
        at: now(),
        trace_parent: None,
        may_hold_lock: true,
    };
    match db.store.commands().commit_transition(&write).await {
        Err(StoreError::StaleVersion { expected: 2, actual: 3, .. }) => {}
        other => panic!("expected StaleVersion, got {other:?}"),
    }
    let after = db.engine.command(&demo, id).await.expect("command");
    assert_eq!((after.lifecycle.state, after.version), (command.lifecycle.state, 3));
}

async fn admission_can_apply_the_first_moves_in_the_same_transaction(db: &TestDb) {
    let demo = tenant("demo");
    let (envelope, admitted) = db
        .engine
        .accept(refund("demo", "first", "2.00", "m"), &[Event::RequestConfirmation], now())
        .await
        .expect("accept");
    assert!(matches!(admitted, chatgate::store::Admitted::New { version: 2, .. }), "{admitted:?}");
    let command = db.engine.command(&demo, envelope.command_id).await.expect("command");
    assert_eq!(command.lifecycle.state, State::ConfirmationRequired);
    let artifacts = evidence(db, &demo, envelope.command_id).await;
    assert_eq!(kinds(&artifacts), ["command.accepted", "command.confirmation.requested"]);
    assert_eq!(artifacts[0].body["decision"]["dedupe"], "first_seen");
    // A plan the machine refuses is refused before anything is written.
    let bad = db.engine.accept(refund("demo", "bad", "2.00", "m"), &[Event::Start], now()).await;
    assert!(matches!(bad, Err(EngineError::InvalidPlan(_))));
    assert_eq!(db.count("SELECT COUNT(*) FROM commands WHERE intent_target = $1", "bad").await, 0);
}
