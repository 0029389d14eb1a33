//! Expires confirmations nobody answered in time (their commands are canceled) and approvals
//! nobody completed in time (their commands are rejected), the person told either way, without
//! waiting for anyone to write again.

use std::time::Duration;

use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::service::approvals;
use crate::service::confirmations::answers;
use crate::service::engine::Engine;
use crate::service::security::Policy;

const PER_SWEEP: i64 = 100;

pub(super) async fn run(engine: Engine, policy: Policy, every: Duration, stopping: CancellationToken) {
    crate::workers::periodically(every, stopping, || async {
        match answers::expire_due(&engine, OffsetDateTime::now_utc(), PER_SWEEP).await {
            Ok(0) => {}
            Ok(expired) => tracing::info!(expired, "confirmations expired"),
            Err(error) => tracing::warn!(%error, "confirmation sweep failed"),
        }
        match approvals::expire::expire_due(&engine, &policy, OffsetDateTime::now_utc(), PER_SWEEP).await {
            Ok(0) => {}
            Ok(expired) => tracing::info!(expired, "approvals expired"),
            Err(error) => tracing::warn!(%error, "approval sweep failed"),
        }
        match approvals::escalate::escalate_due(&engine, &policy, OffsetDateTime::now_utc(), PER_SWEEP).await {
            Ok(0) => {}
            Ok(escalated) => tracing::info!(escalated, "approvals escalated"),
            Err(error) => tracing::warn!(%error, "escalation sweep failed"),
        }
    })
    .await;
}
