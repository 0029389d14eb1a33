//! The end of a wait: an approval past its time rejects its command (`approval_expired`, with
//! the requester told), whether or not anyone decides. Run periodically beside the
//! confirmations' sweep; several instances may run it at once (the settle is a compare-and-set).

use time::OffsetDateTime;

use crate::service::engine::{Engine, EngineError};
use crate::service::security::Policy;
use crate::store::ApprovalStatus;

use super::settle::{Settling, settle};

/// Expires the approvals past their wait at `now`, at most `limit`; returns how many it settled.
pub async fn expire_due(
    engine: &Engine,
    policy: &Policy,
    now: OffsetDateTime,
    limit: i64,
) -> Result<usize, EngineError> {
    let mut expired = 0;
    for approval in engine.store().approvals().due(now, limit).await? {
        let settling = Settling {
            approval: &approval,
            status: ApprovalStatus::Expired,
            by: None,
            evidence: vec![],
            consume: None,
        };
        if settle(engine, policy, settling, now).await? {
            expired += 1;
        }
    }
    Ok(expired)
}
