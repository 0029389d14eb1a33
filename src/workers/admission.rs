//! Admission behind the acknowledgement: claims the inbox's rows in large batches, oldest first,
//! and admits each through the ingress with the inbox's receipt time. Conversations are admitted
//! side by side (their admissions share the engine's group commits) and each conversation's
//! messages one after another, in the order they came. A message is marked admitted only after
//! its admission committed; one whose admission failed for a reason that passes waits for the
//! next pass, and so do the later messages of its conversation. A crash between the admission's
//! commit and the mark is harmless: the next pass finds the message recorded (a redelivery). A
//! message whose sender only the tenant's identity resolver can name is parked where it is
//! (`service::intake::identity`), and admitted once the resolver's answer lets it go.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::service::Services;

/// How often the worker looks without being woken: another instance's rows whose lease ran out,
/// rows left by a failed pass, and the backlog as the database counts it.
const IDLE: Duration = Duration::from_secs(1);
/// How soon a pass that left messages waiting is followed by another.
const WAITING_POLL: Duration = Duration::from_millis(50);
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
            services.ingress.refresh_backlog().await;
            counted = std::time::Instant::now();
        }
        if !give_way(&inbox, &stopping).await {
            return;
        }
        match services.ingress.admission_pass().await {
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
