//! Admission behind the acknowledgement: claims the inbox's rows in large batches, oldest first,
//! and admits each through the ingress with the inbox's receipt time. Conversations are admitted
//! side by side (their admissions share the engine's group commits) and each conversation's
//! messages one after another, in the order they came. A message is marked admitted only after
//! its admission committed; one whose admission failed for a reason that passes waits for the
//! next pass, and so do the later messages of its conversation. A crash between the admission's
//! commit and the mark is harmless: the next pass finds the message recorded (a redelivery). A
//! message whose sender only the tenant's identity resolver can name is parked where it is
//! (`service::intake::identity`), and admitted once the resolver's answer lets it go.

use std::collections::HashMap;
use std::time::Duration;

use futures_util::StreamExt;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::domain::message::InboundMessage;
use crate::service::Services;
use crate::service::engine::EngineError;
use crate::service::intake::Handled;
use crate::store::{InboxEntry, StoreError};

/// How often the worker looks without being woken: another instance's rows whose lease ran out,
/// rows left by a failed pass, and the backlog as the database counts it.
const IDLE: Duration = Duration::from_secs(1);
/// How soon a pass that left messages waiting is followed by another.
const WAITING_POLL: Duration = Duration::from_millis(50);
/// Conversations admitted side by side.
const CONVERSATIONS_AT_ONCE: usize = 64;
/// After a pass the database failed, before the next.
const BACKOFF: Duration = Duration::from_millis(200);

pub(super) async fn run(services: Services, stopping: CancellationToken) {
    let inbox = services.ingress.inbox().clone();
    let mut counted = std::time::Instant::now().checked_sub(IDLE).unwrap_or_else(std::time::Instant::now);
    loop {
        if stopping.is_cancelled() {
            return;
        }
        if counted.elapsed() >= IDLE {
            refresh_backlog(&services).await;
            counted = std::time::Instant::now();
        }
        if !give_way(&inbox, &stopping).await {
            return;
        }
        match pass(&services).await {
            // A full batch: more may wait.
            Ok(claimed) if claimed as i64 >= inbox.config().admission_batch => continue,
            // Messages still wait (behind another instance's older message of their
            // conversation, which that instance admits without waking this one): look again soon.
            Ok(_) if inbox.backlog() > 0 => {
                tokio::select! {
                    () = stopping.cancelled() => return,
                    () = inbox.stored() => {}
                    () = tokio::time::sleep(WAITING_POLL) => {}
                }
                continue;
            }
            Ok(_) => inbox.drained(),
            Err(error) => {
                tracing::warn!(%error, "the inbox cannot be admitted now; trying again");
                tokio::time::sleep(BACKOFF).await;
                continue;
            }
        }
        tokio::select! {
            () = stopping.cancelled() => return,
            () = inbox.stored() => {}
            () = tokio::time::sleep(IDLE) => {}
        }
    }
}

/// Waits while a burst is still coming, so that it is answered first (bounded:
/// `ingest.admission_defer_ms`), and says how long in `chatgate_admission_deferred_seconds`;
/// false once stopping.
async fn give_way(inbox: &crate::service::intake::inbox::Inbox, stopping: &CancellationToken) -> bool {
    let started = std::time::Instant::now();
    let mut gave_way = false;
    while let Some(wait) = inbox.give_way() {
        gave_way = true;
        tokio::select! {
            () = stopping.cancelled() => return false,
            () = tokio::time::sleep(wait) => {}
        }
    }
    if gave_way {
        metrics::histogram!("chatgate_admission_deferred_seconds").record(started.elapsed().as_secs_f64());
    }
    true
}

/// One batch claimed and admitted: how many rows were claimed.
async fn pass(services: &Services) -> Result<usize, StoreError> {
    let inbox = services.ingress.inbox();
    let now = OffsetDateTime::now_utc();
    let claimed = services.store.inbox().claim(inbox.lease(now), now, inbox.config().admission_batch).await?;
    let count = claimed.len();
    // Each message read back once; their writers looked up together.
    let read: Vec<(InboxEntry, Option<InboundMessage>)> = claimed
        .into_iter()
        .map(|entry| {
            let message = services.ingress.from_inbox(&entry);
            (entry, message)
        })
        .collect();
    let messages: Vec<&InboundMessage> = read.iter().filter_map(|(_, message)| message.as_ref()).collect();
    services.ingress.know_writers(&messages).await;
    let mut conversations: HashMap<String, Vec<(InboxEntry, Option<InboundMessage>)>> = HashMap::new();
    for (entry, message) in read {
        conversations.entry(entry.conversation_id.clone()).or_default().push((entry, message));
    }
    // Each conversation a task of its own: admission's work (reading, deciding, hashing evidence)
    // spreads over every core, and the admissions meet in the engine's group commits.
    // At most `CONVERSATIONS_AT_ONCE`: more would only queue their reads for the pool's few
    // connections ahead of the group commit's own.
    let tasks = conversations.into_values().map(|entries| tokio::spawn(admit_in_order(services.clone(), entries)));
    let mut running = futures_util::stream::iter(tasks).buffer_unordered(CONVERSATIONS_AT_ONCE);
    let mut admitted: Vec<(i64, Option<Handled>, OffsetDateTime)> = Vec::with_capacity(count);
    while let Some(task) = running.next().await {
        match task {
            Ok(done) => admitted.extend(done),
            // A panicked admission: its messages stay in the inbox for the next pass.
            Err(error) => tracing::error!(%error, "an admission task failed"),
        }
    }
    // A message parked for the identity resolver stays in the inbox, unadmitted, in its place.
    let parked = |handled: &Option<Handled>| matches!(handled, Some(Handled::AwaitingIdentity));
    let ids: Vec<i64> = admitted.iter().filter(|(_, handled, _)| !parked(handled)).map(|(id, ..)| *id).collect();
    services.store.inbox().admitted(&ids, OffsetDateTime::now_utc()).await?;
    for (id, handled, received_at) in admitted {
        inbox.admitted(id, handled, received_at);
    }
    Ok(count)
}

/// One conversation's messages, in order, up to the first that must wait.
async fn admit_in_order(
    services: Services,
    entries: Vec<(InboxEntry, Option<InboundMessage>)>,
) -> Vec<(i64, Option<Handled>, OffsetDateTime)> {
    let mut admitted = Vec::with_capacity(entries.len());
    for (entry, message) in &entries {
        match admit(&services, entry, message.as_ref()).await {
            Ok(handled) => admitted.push((entry.id, handled, entry.received_at)),
            Err(error) => {
                tracing::warn!(%error, id = entry.id, "a message waits in the inbox for the next pass");
                break;
            }
        }
    }
    admitted
}

/// Admits one message (`message`: `entry` as read back); `None` when it could not be, for good
/// (it is kept, and counted).
async fn admit(
    services: &Services,
    entry: &InboxEntry,
    message: Option<&InboundMessage>,
) -> Result<Option<Handled>, EngineError> {
    let ingress = &services.ingress;
    let Some(message) = message else {
        tracing::error!(id = entry.id, channel = %entry.channel, "a stored message cannot be read back");
        metrics::counter!("chatgate_inbox_unadmitted_total", "reason" => "unreadable").increment(1);
        return Ok(None);
    };
    use crate::service::telemetry::{Carried, admission_span, carrying};
    let span = admission_span(&entry.channel, entry.trace_parent.as_deref());
    let carried = Carried::from_traceparent(entry.trace_parent.as_deref());
    match carrying(carried, ingress.handle(message, entry.released, entry.received_at).instrument(span)).await {
        Ok(handled) => Ok(Some(handled)),
        Err(EngineError::Store(error)) if error.is_retryable() => Err(EngineError::Store(error)),
        Err(error) => {
            // Doing it again would fail the same way: kept in the inbox and the logs, not retried.
            tracing::error!(%error, id = entry.id, "a stored message cannot be admitted");
            metrics::counter!("chatgate_inbox_unadmitted_total", "reason" => "refused").increment(1);
            Ok(None)
        }
    }
}

/// The heartbeat of this instance's rows, and the backlog as the database counts it.
async fn refresh_backlog(services: &Services) {
    let inbox = services.store.inbox();
    let lease = services.ingress.inbox().lease(OffsetDateTime::now_utc());
    match inbox.renew(lease).await {
        Ok(()) => services.ingress.inbox().renewed(lease.until),
        Err(error) => tracing::warn!(%error, "cannot renew the hold on this instance's inbox rows"),
    }
    match inbox.backlog().await {
        Ok((pending, oldest)) => {
            services.ingress.inbox().set_backlog(pending);
            let age = oldest.map_or(0.0, |at| (OffsetDateTime::now_utc() - at).as_seconds_f64().max(0.0));
            metrics::gauge!("chatgate_inbox_oldest_pending_seconds").set(age);
        }
        Err(error) => tracing::debug!(%error, "cannot count the inbox's backlog"),
    }
    if let Ok(parked) = inbox.parked().await {
        metrics::gauge!("chatgate_inbox_parked").set(parked as f64);
    }
}
