//! Dispatches authorized commands to their executors, and fires the deliveries' timers.

use std::time::Duration;

use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::domain::command::TenantId;
use crate::executors::acks;
use crate::executors::dispatcher::Dispatcher;
use crate::service::dispatch::handover::OutboxSettle;
use crate::service::dispatch::{CANCEL_NOTICE_KIND, DISPATCH_KIND, PREVIEW_KIND};
use crate::service::engine::Engine;
use crate::service::security::Policy;
use crate::service::waiting::{self, LOCK_WAIT_KIND};

const TIMERS_PER_SWEEP: i64 = 100;
/// How long a claimed lock wait is held: one step's time, with room.
const TURN_LEASE: Duration = Duration::from_secs(30);

pub(super) async fn run(dispatcher: Dispatcher, every: Duration, stopping: CancellationToken) {
    let draining = stopping.clone();
    let handoff = dispatcher.open_handoff();
    let wakes = vec![dispatcher.engine().database().handover().signal(DISPATCH_KIND)];
    crate::workers::woken_or_periodically(every, stopping, wakes, || async {
        loop {
            match dispatcher.dispatch_due(OffsetDateTime::now_utc()).await {
                Ok(claimed) if claimed < dispatcher.batch() || draining.is_cancelled() => break,
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, "dispatcher cannot reach the database");
                    break;
                }
            }
        }
    })
    .await;
    let kept = handoff.map(|handoff| handoff.close()).unwrap_or_default();
    if let Err(error) = dispatcher.engine().database().handover().release_handed(&kept).await {
        tracing::warn!(%error, "handed dispatches not let go; they are claimed when their lease ends");
    }
    // The calls under way finish (within the stop's grace period) and their outcomes are written.
    dispatcher.drain().await;
}

/// Cancel notices have their own loop: they are rare, and claiming them on every dispatch wake
/// would add a write transaction to each of the dispatcher's batches.
pub(super) async fn cancel_notices(dispatcher: Dispatcher, every: Duration, stopping: CancellationToken) {
    let wakes = vec![dispatcher.engine().database().handover().signal(CANCEL_NOTICE_KIND)];
    crate::workers::woken_or_periodically(every, stopping, wakes, || async {
        if let Err(error) = dispatcher.notify_due(OffsetDateTime::now_utc()).await {
            tracing::warn!(%error, "cancel notices cannot reach the database");
        }
    })
    .await;
}

/// Preview requests have their own loop too: a person waits for each prompt, and a slow
/// executor's preview must not hold the dispatches back.
pub(super) async fn previews(dispatcher: Dispatcher, every: Duration, stopping: CancellationToken) {
    let wakes = vec![dispatcher.engine().database().handover().signal(PREVIEW_KIND)];
    crate::workers::woken_or_periodically(every, stopping, wakes, || async {
        if let Err(error) = dispatcher.preview_due(OffsetDateTime::now_utc()).await {
            tracing::warn!(%error, "preview requests cannot reach the database");
        }
    })
    .await;
}

/// Commands waiting their turn for a lock (`lock = "wait"`): each due row (a release made it due,
/// or its own poll) gives its command the resource if it is free, oldest first.
pub(super) async fn lock_turns(engine: Engine, policy: Policy, every: Duration, stopping: CancellationToken) {
    let wakes = vec![engine.database().handover().signal(LOCK_WAIT_KIND)];
    crate::workers::woken_or_periodically(every, stopping, wakes, || async {
        let now = OffsetDateTime::now_utc();
        let handover = engine.database().handover();
        let claimed = match handover.claim(LOCK_WAIT_KIND, TIMERS_PER_SWEEP, TURN_LEASE, now).await {
            Ok(claimed) => claimed,
            Err(error) => return tracing::warn!(%error, "lock waits cannot reach the database"),
        };
        for row in claimed {
            let command = match (row.command_id, TenantId::parse(&row.tenant_id)) {
                (Some(id), Ok(tenant)) => engine.reads().command(&tenant, id).await,
                _ => Ok(None),
            };
            let turn = match command {
                Ok(Some(command)) => {
                    waiting::take_turn((&engine, &policy), &command, (row.id, &row.destination), now).await
                }
                Ok(None) => handover
                    .settle(&OutboxSettle::Done(row.id), now)
                    .await
                    .map(|()| waiting::Turn::Settled)
                    .map_err(Into::into),
                Err(error) => Err(error.into()),
            };
            match turn {
                Ok(turn) => tracing::debug!(id = %row.id, ?turn, "a lock wait"),
                Err(error) => tracing::warn!(%error, id = %row.id, "a lock wait not recorded; it comes back"),
            }
        }
    })
    .await;
}

pub(super) async fn timers(engine: Engine, every: Duration, stopping: CancellationToken) {
    crate::workers::periodically(every, stopping, || async {
        let now = OffsetDateTime::now_utc();
        match acks::fire_timers(&engine, now, TIMERS_PER_SWEEP).await {
            Ok(0) => {}
            Ok(fired) => tracing::info!(fired, "delivery timers fired"),
            Err(error) => tracing::warn!(%error, "delivery timer sweep failed"),
        }
        match acks::expire_undispatched(&engine, now, TIMERS_PER_SWEEP).await {
            Ok(0) => {}
            Ok(canceled) => tracing::info!(canceled, "commands expired before dispatch"),
            Err(error) => tracing::warn!(%error, "TTL sweep failed"),
        }
    })
    .await;
}
