//! The evidence chain: append-only in the database, and `audit verify` names the first broken
//! link when someone with enough rights alters, removes or reorders artifacts anyway.

use chatgate::domain::evidence::LinkProblem;
use chatgate::domain::lifecycle::State;
use std::sync::atomic::{AtomicBool, Ordering};

use sqlx::Executor;

use super::{conformance, drive, path_to};
use crate::helpers::{TestDb, refund};

conformance!(
    the_database_refuses_to_update_or_delete_evidence,
    audit_verify_names_an_edited_a_deleted_a_swapped_and_a_truncated_artifact,
    a_chain_written_to_while_it_is_verified_is_intact_and_a_link_past_its_head_is_not,
);

async fn the_database_refuses_to_update_or_delete_evidence(db: &TestDb) {
    drive(db, refund("demo", "1", "1.00", "m"), path_to(State::Executed)).await;
    let mut conn = db.raw().await;
    let update = conn.execute("UPDATE evidence SET kind = 'forged' WHERE seq = 1").await;
    assert!(update.is_err_and(|e| e.to_string().contains("append-only")));
    let delete = conn.execute("DELETE FROM evidence WHERE seq = 1").await;
    assert!(delete.is_err_and(|e| e.to_string().contains("append-only")));
    let report = db.store.evidence().verify().await.expect("verify");
    assert!(report.first_break.is_none());
}

async fn audit_verify_names_an_edited_a_deleted_a_swapped_and_a_truncated_artifact(db: &TestDb) {
    for chain in ["edit", "gone", "swap", "tail", "good"] {
        drive(db, refund(chain, "1", "1.00", "m"), path_to(State::Executed)).await;
    }
    let report = db.store.evidence().verify().await.expect("verify");
    assert!(report.first_break.is_none(), "intact before tampering: {:?}", report.first_break);
    assert!(report.chains.iter().all(|c| c.intact && c.artifacts == 7), "{:?}", report.chains);

    let mut conn = db.raw().await;
    // Someone with DDL rights removes the guard first; the chain must still tell.
    let drop_guards: &[&'static str] = if db.is_postgres() {
        &["DROP TRIGGER evidence_no_update_or_delete ON evidence"]
    } else {
        &["DROP TRIGGER evidence_no_update", "DROP TRIGGER evidence_no_delete"]
    };
    for sql in drop_guards {
        conn.execute(*sql).await.expect("drop trigger");
    }
    for sql in [
        "UPDATE evidence SET body = REPLACE(body, 'confirmation_required', 'confirmed') WHERE chain_id = 'edit' AND seq = 2",
        "DELETE FROM evidence WHERE chain_id = 'gone' AND seq = 3",
        "UPDATE evidence SET seq = -1 WHERE chain_id = 'swap' AND seq = 4",
        "UPDATE evidence SET seq = 4 WHERE chain_id = 'swap' AND seq = 5",
        "UPDATE evidence SET seq = 5 WHERE chain_id = 'swap' AND seq = -1",
        "DELETE FROM evidence WHERE chain_id = 'tail' AND seq = 7",
    ] {
        conn.execute(sql).await.expect("tamper");
    }

    let report = db.store.evidence().verify().await.expect("verify");
    let broken = |chain: &str| {
        report.chains.iter().find(|c| c.chain_id == chain).and_then(|c| c.broken_at.clone()).map(|b| (b.seq, b.problem))
    };
    assert_eq!(broken("edit"), Some((2, LinkProblem::ContentAltered)));
    assert_eq!(broken("gone"), Some((4, LinkProblem::Gap { expected_seq: 3 })));
    assert_eq!(broken("swap"), Some((4, LinkProblem::PositionMismatch)));
    assert_eq!(broken("tail"), Some((6, LinkProblem::HeadMismatch { head_seq: 7 })));
    assert_eq!(broken("good"), None);
    let first = report.first_break.expect("a break is reported");
    assert_eq!(first.chain_id, "edit", "chains are checked in name order");
    assert!(first.to_string().contains("altered"), "{first}");
}

/// An operator verifies while the gateway works: links written meanwhile (with their head) are
/// no break; a link added past a head that did not move with it is one.
async fn a_chain_written_to_while_it_is_verified_is_intact_and_a_link_past_its_head_is_not(db: &TestDb) {
    let writing = AtomicBool::new(true);
    let writer = async {
        for n in 0..12 {
            drive(db, refund("live", &n.to_string(), "1.00", &format!("live-{n}")), path_to(State::Executed)).await;
        }
        writing.store(false, Ordering::Relaxed);
    };
    let auditor = async {
        let mut verified = 0;
        while writing.load(Ordering::Relaxed) || verified == 0 {
            let report = db.store.evidence().verify().await.expect("verify");
            assert!(report.first_break.is_none(), "verified while written to: {:?}", report.first_break);
            verified += 1;
            tokio::task::yield_now().await;
        }
        verified
    };
    let ((), verified) = tokio::join!(writer, auditor);
    assert!(verified > 1, "the chain was verified while it grew ({verified} times)");
    let report = db.store.evidence().verify().await.expect("verify");
    let live = report.chains.iter().find(|c| c.chain_id == "live").expect("the chain");
    assert!(live.intact && live.artifacts == 12 * 7, "{live:?}");

    // A copy of the last link, added behind the writer's back (inserting is what the database allows).
    let mut conn = db.raw().await;
    conn.execute(
        "INSERT INTO evidence (artifact_id, chain_id, seq, kind, command_id, stage, recorded_at, body, prev_hash, hash)
         SELECT 'forged', chain_id, seq + 1, kind, command_id, stage, recorded_at, body, hash, hash
         FROM evidence WHERE chain_id = 'live' AND seq = 84",
    )
    .await
    .expect("insert");
    let report = db.store.evidence().verify().await.expect("verify");
    let broken = report.first_break.expect("the added link is reported");
    assert_eq!((broken.chain_id.as_str(), broken.seq), ("live", 85), "{broken}");
}
