//! Approvals (issue #46): what a command waiting in `authz_pending` needs from other people, and
//! their decisions. Opened by the step that moves the command there; each person's decision a
//! row of its own, once (a second tap finds it); settled by a compare-and-set on `pending` in the
//! step that moves the command on, so it is settled once however many instances race.

use std::collections::BTreeSet;

use sqlx::AnyConnection;
use sqlx::any::AnyRow;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::{IdempotencyKey, TenantId};
use crate::domain::delivery::ApprovalWait;
use crate::domain::registry::approvals::{Need, Vote, next_escalation};
use crate::store::named::{self, row};
use crate::store::rows::{from_ms, int, json, opt_int, opt_text, parsed, text, to_ms, uuid};
use crate::store::tokens::{ConsumedToken, consume_token};
use crate::store::{Approvals, StoreError};

pub use crate::domain::registry::approvals::ApprovalStatus;

/// Who asked for an approval: the command's policy (its command waits in `authz_pending`), or
/// the executor of one of its deliveries (the delivery waits; workflow seed §6.10).
#[derive(Debug, Clone, PartialEq)]
pub enum AskedBy {
    Policy,
    Executor { target: String, wait: ApprovalWait },
}

/// An approval opened with the move that makes its command wait.
#[derive(Debug, Clone, PartialEq)]
pub struct NewApproval {
    pub id: Uuid,
    pub idempotency_key: IdempotencyKey,
    pub requester: String,
    /// The policy's rules that apply, by name, as they were when it was asked.
    pub needs: Vec<(String, Need)>,
    pub expires_at: OffsetDateTime,
    pub asked_by: AskedBy,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StoredApproval {
    pub id: Uuid,
    pub tenant_id: TenantId,
    pub command_id: Uuid,
    pub idempotency_key: IdempotencyKey,
    pub requester: String,
    pub needs: Vec<(String, Need)>,
    pub status: ApprovalStatus,
    pub requested_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
    pub settled_at: Option<OffsetDateTime>,
    pub settled_by: Option<String>,
    pub asked_by: AskedBy,
    /// When the next escalation is due (none: none is left to ask).
    pub escalates_at: Option<OffsetDateTime>,
}

/// One person's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalDecision {
    pub approver: String,
    /// The roles they held when they decided.
    pub roles: BTreeSet<String>,
    pub vote: Vote,
    /// Where they decided: `api`, or the channel they tapped on.
    pub via: String,
    pub reason: Option<String>,
    pub decided_at: OffsetDateTime,
    /// The approver's step-up proof, when a rule asks for one (used up with the decision).
    pub proof: Option<ConsumedToken>,
}

/// What a step does to an approval, in its transaction.
#[derive(Debug, Clone, PartialEq)]
pub enum ApprovalWrite {
    Open(NewApproval),
    /// The escalation due at `was` was asked: the next one is due at `next` (none: no more).
    /// Stale if it was asked meanwhile, or the approval settled.
    Escalated {
        id: Uuid,
        was: OffsetDateTime,
        next: Option<OffsetDateTime>,
    },
    /// From `pending` to `status`; the step is stale if it was settled meanwhile.
    Settle {
        id: Uuid,
        status: ApprovalStatus,
        by: Option<String>,
    },
}

/// The query `decode` reads, as a literal so that queries stay static SQL.
macro_rules! approval_select {
    () => {
        "SELECT id, tenant_id, command_id, idempotency_key, requester, needs, status, requested_at, expires_at, \
         settled_at, settled_by, origin, target, wait, escalates_at FROM approvals"
    };
}

/// Pending approvals past their wait (the index on `(status, expires_at)`).
pub(crate) const DUE: &str =
    concat!(approval_select!(), " WHERE status = 'pending' AND expires_at <= $1 ORDER BY expires_at, id LIMIT $2");
/// Pending approvals whose escalation is due (the partial index on `escalates_at`).
pub(crate) const ESCALATION_DUE: &str = concat!(
    approval_select!(),
    " WHERE escalates_at IS NOT NULL AND escalates_at <= $1 AND status = 'pending' ORDER BY escalates_at, id LIMIT $2"
);

fn decode(row: &AnyRow) -> Result<StoredApproval, StoreError> {
    Ok(StoredApproval {
        id: uuid(row, "id")?,
        tenant_id: TenantId::parse(&text(row, "tenant_id")?).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        command_id: uuid(row, "command_id")?,
        idempotency_key: IdempotencyKey::from_stored(text(row, "idempotency_key")?),
        requester: text(row, "requester")?,
        needs: json(row, "needs")?,
        status: parsed(row, "status")?,
        requested_at: from_ms(int(row, "requested_at")?)?,
        expires_at: from_ms(int(row, "expires_at")?)?,
        settled_at: opt_int(row, "settled_at")?.map(from_ms).transpose()?,
        settled_by: opt_text(row, "settled_by")?,
        asked_by: match (text(row, "origin")?.as_str(), opt_text(row, "target")?) {
            ("executor", Some(target)) => AskedBy::Executor { target, wait: json(row, "wait")? },
            _ => AskedBy::Policy,
        },
        escalates_at: opt_int(row, "escalates_at")?.map(from_ms).transpose()?,
    })
}

impl Approvals<'_> {
    /// One approval of the tenant.
    pub async fn get(self, tenant: &TenantId, id: Uuid) -> Result<Option<StoredApproval>, StoreError> {
        let row = sqlx::query(concat!(approval_select!(), " WHERE tenant_id = $1 AND id = $2"))
            .bind(tenant.as_str())
            .bind(id.to_string())
            .fetch_optional(self.store.pool())
            .await?;
        row.as_ref().map(decode).transpose()
    }

    /// The approval a command waits for (or waited for) last: its policy's, or its executor's.
    pub async fn of_command(self, tenant: &TenantId, command_id: Uuid) -> Result<Option<StoredApproval>, StoreError> {
        let sql = concat!(
            approval_select!(),
            " WHERE tenant_id = $1 AND command_id = $2 ORDER BY requested_at DESC, id DESC LIMIT 1"
        );
        let row = sqlx::query(sql)
            .bind(tenant.as_str())
            .bind(command_id.to_string())
            .fetch_optional(self.store.pool())
            .await?;
        row.as_ref().map(decode).transpose()
    }

    /// The tenant's pending approvals, oldest first.
    pub async fn pending(self, tenant: &TenantId, limit: i64) -> Result<Vec<StoredApproval>, StoreError> {
        let sql = concat!(
            approval_select!(),
            " WHERE tenant_id = $1 AND status = 'pending' ORDER BY requested_at, id LIMIT $2"
        );
        let rows = sqlx::query(sql).bind(tenant.as_str()).bind(limit).fetch_all(self.store.pool()).await?;
        rows.iter().map(decode).collect()
    }

    /// Pending approvals whose escalation is due and not yet asked, of every tenant (the
    /// sweeper's).
    pub async fn escalation_due(self, now: OffsetDateTime, limit: i64) -> Result<Vec<StoredApproval>, StoreError> {
        let rows = sqlx::query(ESCALATION_DUE).bind(to_ms(now)).bind(limit).fetch_all(self.store.pool()).await?;
        rows.iter().map(decode).collect()
    }

    /// Pending approvals past their wait, of every tenant (the sweeper's).
    pub async fn due(self, now: OffsetDateTime, limit: i64) -> Result<Vec<StoredApproval>, StoreError> {
        let rows = sqlx::query(DUE).bind(to_ms(now)).bind(limit).fetch_all(self.store.pool()).await?;
        rows.iter().map(decode).collect()
    }

    /// The decisions on an approval, in the order they were made.
    pub async fn decisions(self, id: Uuid) -> Result<Vec<ApprovalDecision>, StoreError> {
        let mut conn = self.store.pool().acquire().await?;
        decisions_of(&mut conn, id).await
    }

    /// Records a person's decision on a pending approval, once, and reads every decision made so
    /// far in the same transaction: `None` when it is no longer pending. Recording first bumps
    /// the approval's count, so that two people deciding at once (on two instances) take turns
    /// and the second sees the first's decision. `fresh` is false when they had decided before
    /// (that one stands).
    pub async fn record(self, id: Uuid, decision: &ApprovalDecision) -> Result<Recording, StoreError> {
        let mut tx = self.store.begin().await?;
        let bumped = sqlx::query("UPDATE approvals SET decided = decided + 1 WHERE id = $1 AND status = 'pending'")
            .bind(id.to_string())
            .execute(&mut *tx)
            .await?;
        if bumped.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(Recording::NotPending);
        }
        // An approver's step-up proof is used once, with the decision it proves.
        if let Some(proof) = &decision.proof
            && !consume_token(&mut tx, proof, None, decision.decided_at).await?
        {
            tx.rollback().await?;
            return Ok(Recording::ProofUsed);
        }
        let roles = serde_json::to_string(&decision.roles).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let row = row![
            "approval_id" => id.to_string(),
            "approver" => decision.approver.as_str(),
            "roles" => roles,
            "decision" => decision.vote.as_str(),
            "via" => decision.via.as_str(),
            "reason" => decision.reason.clone(),
            "decided_at" => to_ms(decision.decided_at),
        ];
        let inserted =
            named::insert(&mut tx, "approval_decisions", vec![row], "ON CONFLICT DO NOTHING RETURNING approver")
                .await?;
        let decisions = decisions_of(&mut tx, id).await?;
        tx.commit().await?;
        Ok(Recording::Recorded(DecisionRecorded { fresh: !inserted.is_empty(), decisions }))
    }
}

/// What recording a decision came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Recording {
    /// The approval is no longer pending: nothing was recorded.
    NotPending,
    /// The step-up proof it carried was used before: nothing was recorded.
    ProofUsed,
    Recorded(DecisionRecorded),
}

/// A decision recorded (or found made before) and every decision so far.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionRecorded {
    pub fresh: bool,
    pub decisions: Vec<ApprovalDecision>,
}

async fn decisions_of(conn: &mut AnyConnection, id: Uuid) -> Result<Vec<ApprovalDecision>, StoreError> {
    let rows = sqlx::query(
        "SELECT approver, roles, decision, via, reason, decided_at FROM approval_decisions \
         WHERE approval_id = $1 ORDER BY decided_at, approver",
    )
    .bind(id.to_string())
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(ApprovalDecision {
                approver: text(row, "approver")?,
                roles: json(row, "roles")?,
                vote: parsed(row, "decision")?,
                via: text(row, "via")?,
                reason: opt_text(row, "reason")?,
                decided_at: from_ms(int(row, "decided_at")?)?,
                proof: None,
            })
        })
        .collect()
}

/// Opens, escalates or settles an approval inside a step; `false` when a compare-and-set found
/// it moved already.
pub(crate) async fn write_approval(
    conn: &mut AnyConnection,
    (tenant, command_id): (&TenantId, Option<Uuid>),
    write: &ApprovalWrite,
    at: OffsetDateTime,
) -> Result<bool, StoreError> {
    match write {
        ApprovalWrite::Open(new) => {
            let command_id = command_id.ok_or_else(|| StoreError::Corrupt("an approval without its command".into()))?;
            open(conn, (tenant, command_id), new, at).await?;
            Ok(true)
        }
        ApprovalWrite::Escalated { id, was, next } => {
            let done = sqlx::query(
                "UPDATE approvals SET escalates_at = $2 WHERE id = $1 AND status = 'pending' AND escalates_at = $3",
            )
            .bind(id.to_string())
            .bind(next.map(to_ms))
            .bind(to_ms(*was))
            .execute(&mut *conn)
            .await?;
            Ok(done.rows_affected() == 1)
        }
        ApprovalWrite::Settle { id, status, by } => {
            let done = sqlx::query(
                "UPDATE approvals SET status = $2, settled_at = $3, settled_by = $4 \
                 WHERE id = $1 AND status = 'pending'",
            )
            .bind(id.to_string())
            .bind(status.as_str())
            .bind(to_ms(at))
            .bind(by.clone())
            .execute(&mut *conn)
            .await?;
            Ok(done.rows_affected() == 1)
        }
    }
}

/// Inserts a new approval of `command_id`; a policy's also says why its command waits.
async fn open(
    conn: &mut AnyConnection,
    (tenant, command_id): (&TenantId, Uuid),
    new: &NewApproval,
    at: OffsetDateTime,
) -> Result<(), StoreError> {
    let needs = serde_json::to_string(&new.needs).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let (origin, target, wait) = match &new.asked_by {
        AskedBy::Policy => ("policy", None, None),
        AskedBy::Executor { target, wait } => {
            let wait = serde_json::to_string(wait).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            ("executor", Some(target.clone()), Some(wait))
        }
    };
    let approval = row![
        "id" => new.id.to_string(),
        "tenant_id" => tenant.as_str(),
        "command_id" => command_id.to_string(),
        "idempotency_key" => new.idempotency_key.as_str(),
        "requester" => new.requester.as_str(),
        "needs" => needs,
        "status" => ApprovalStatus::Pending.as_str(),
        "requested_at" => to_ms(at),
        "expires_at" => to_ms(new.expires_at),
        "origin" => origin,
        "target" => target,
        "wait" => wait,
        "escalates_at" => escalates_at(new, at).map(to_ms),
    ];
    named::insert(conn, "approvals", vec![approval], "").await?;
    if new.asked_by == AskedBy::Policy {
        // What the command waits for now (after a step-up it was waiting for the proof).
        sqlx::query("UPDATE commands SET reason_code = 'approval_required' WHERE command_id = $1")
            .bind(command_id.to_string())
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// When the earliest escalation of `new`, requested at `at`, is due, if before its wait ends.
fn escalates_at(new: &NewApproval, at: OffsetDateTime) -> Option<OffsetDateTime> {
    let first = next_escalation(&new.needs, std::time::Duration::ZERO)?;
    Some(at + first).filter(|due| *due < new.expires_at)
}

/// Closes the pending approvals of commands whose wait ended another way than their approval's
/// settling (an operator's cancel, an executor that gave up, a TTL), in the transaction of it.
pub(crate) async fn close_approvals(
    conn: &mut AnyConnection,
    command_ids: &[(Uuid, OffsetDateTime)],
) -> Result<(), StoreError> {
    for (command_id, at) in command_ids {
        sqlx::query(
            "UPDATE approvals SET status = 'closed', settled_at = $2 WHERE command_id = $1 AND status = 'pending'",
        )
        .bind(command_id.to_string())
        .bind(to_ms(*at))
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}
