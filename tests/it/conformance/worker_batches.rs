//! Group commit of the workers' steps (`Commands::commit_steps`): a batch of dispatch conclusions
//! writes everything each would write alone, in one transaction, and a batch in which one step
//! lost a race gets, step by step, the answers each would get alone.

use chatgate::domain::delivery::DeliveryEvent;
use chatgate::domain::lifecycle::{Event, State};
use chatgate::domain::replies::OutcomeDetail;
use chatgate::service::dispatch::DeliveryPlan;
use chatgate::service::engine::MoveContext;
use chatgate::store::{OutboxSettle, StepOutcome, StepWrite};
use serde_json::json;
use uuid::Uuid;

use super::{conformance, drive, evidence, kinds, now, path_to};
use crate::helpers::{TestDb, refund, tenant};

conformance!(
    a_batch_of_worker_steps_is_one_transaction_and_writes_everything_each_would,
    a_batch_with_a_step_that_lost_a_race_answers_each_as_alone,
);

/// A started refund's delivery to `orders`, created, routed, acknowledged and executed, with the
/// command's `succeed` move (and its reply) — what the dispatcher concludes for a builtin call.
async fn executed_step(db: &TestDb, id: Uuid) -> StepWrite {
    let command = db.engine.command(&tenant("demo"), id).await.expect("command");
    let mut plan = DeliveryPlan::create(&command, "orders");
    for event in [DeliveryEvent::ValidateOk, DeliveryEvent::RouteOk, DeliveryEvent::DeliveryAck] {
        plan.apply(event, None).expect("in order");
    }
    plan.apply(DeliveryEvent::ExecutionSucceeded, Some(json!({"refund": "ok"}))).expect("in order");
    let context =
        MoveContext { reply_detail: Some(OutcomeDetail::Result(json!({"refund": "ok"}))), ..MoveContext::default() };
    let moves = db.engine.plan_moves(&command, vec![(Event::Succeed, context)], now()).expect("moves");
    StepWrite { delivery: Some(plan.change), moves, ..StepWrite::new(tenant("demo"), Some(id), now()) }
}

async fn started(db: &TestDb, n: usize) -> Vec<Uuid> {
    let mut ids = vec![];
    for i in 0..n {
        let request = refund("demo", &format!("w{i}"), "1.00", &format!("wamid.W{i}"));
        ids.push(drive(db, request, path_to(State::Started)).await);
    }
    ids
}

async fn a_batch_of_worker_steps_is_one_transaction_and_writes_everything_each_would(db: &TestDb) {
    let ids = started(db, 5).await;
    // The control: the last one committed alone, through the one-at-a-time path.
    let alone = executed_step(db, ids[4]).await;
    assert!(matches!(db.store.commands().commit_step(&alone).await, Ok(StepOutcome::Committed { .. })));
    let mut steps = vec![];
    for &id in &ids[..4] {
        steps.push(executed_step(db, id).await);
    }
    let outcomes = db.store.commands().commit_steps(&steps.iter().collect::<Vec<_>>()).await;
    assert_eq!(db.store.step_batch_stats(), (1, 4), "one transaction carried all four");
    let control = db.engine.command(&tenant("demo"), ids[4]).await.expect("control");
    let control_kinds = kinds(&evidence(db, &tenant("demo"), ids[4]).await).join(",");
    for (outcome, &id) in outcomes.into_iter().zip(&ids) {
        let Ok(StepOutcome::Committed { moves, .. }) = outcome else { panic!("{id}: {outcome:?}") };
        let command = db.engine.command(&tenant("demo"), id).await.expect("command");
        assert_eq!((command.lifecycle.state, command.version), (State::Executed, control.version));
        assert_eq!(moves[0].version, command.version, "the committed version is the stored one");
        let artifacts = evidence(db, &tenant("demo"), id).await;
        assert_eq!(kinds(&artifacts).join(","), control_kinds, "the same evidence as alone");
        let last = artifacts.last().expect("evidence").artifact_id;
        assert_eq!(moves[0].evidence_ids.last(), Some(&last), "the move's artifact ids come back");
        let reservation = "SELECT COUNT(*) FROM dedupe_records WHERE outcome_ref = $1 AND status = 'executed'";
        assert_eq!(db.count(reservation, &last.to_string()).await, 1, "the reservation replays the outcome");
        let delivery = &db.store.deliveries().of_command(id).await.expect("deliveries")[0];
        assert_eq!(
            (delivery.state.as_str(), delivery.version, delivery.outcome.map(|o| o.as_str())),
            ("executed", 1, Some("succeeded"))
        );
        let log = db.store.deliveries().log(delivery.id).await.expect("log");
        assert_eq!(log.len(), 4, "every event of the delivery is in its log");
        let replies = "SELECT COUNT(*) FROM outbox WHERE command_id = $1 AND kind = 'message'";
        assert_eq!(db.count(replies, &id.to_string()).await, db.count(replies, &ids[4].to_string()).await);
    }
    let report = db.store.evidence().verify().await.expect("verify");
    assert!(report.first_break.is_none(), "the chain stays whole: {report:?}");
}

async fn a_batch_with_a_step_that_lost_a_race_answers_each_as_alone(db: &TestDb) {
    let ids = started(db, 3).await;
    let mut steps = vec![];
    for &id in &ids {
        steps.push(executed_step(db, id).await);
    }
    // Another worker concluded the second command first (its delivery and its move).
    let first = executed_step(db, ids[1]).await;
    assert!(matches!(db.store.commands().commit_step(&first).await, Ok(StepOutcome::Committed { .. })));
    // And a claimed row settled with the batch.
    let row = Uuid::now_v7();
    steps[0].outbox_row = Some(OutboxSettle::Done(row));
    let outcomes = db.store.commands().commit_steps(&steps.iter().collect::<Vec<_>>()).await;
    assert_eq!(db.store.step_batch_stats().0, 0, "the batch stepped aside");
    assert!(matches!(outcomes[0], Ok(StepOutcome::Committed { .. })), "{:?}", outcomes[0]);
    assert!(matches!(outcomes[1], Ok(StepOutcome::Stale)), "the loser is stale, as alone: {:?}", outcomes[1]);
    assert!(matches!(outcomes[2], Ok(StepOutcome::Committed { .. })), "{:?}", outcomes[2]);
    for &id in &ids {
        let command = db.engine.command(&tenant("demo"), id).await.expect("command");
        assert_eq!(command.lifecycle.state, State::Executed);
        let moves = "SELECT COUNT(*) FROM command_transitions WHERE command_id = $1 AND to_state = 'executed'";
        assert_eq!(db.count(moves, &id.to_string()).await, 1, "executed once");
    }
    let report = db.store.evidence().verify().await.expect("verify");
    assert!(report.first_break.is_none(), "{report:?}");
}
