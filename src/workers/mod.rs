//! Workers: the background loops fed by the database — admission from the inbox, dispatch and its timers, the outbound
//! sender, confirmation expiry, identity lookups, clean-up, SQLite's checkpoints. Each stops when the token is
//! cancelled. Imports every
//! layer below it except `http` and `cli`: `domain`, `config`, `store`, `service`, `channels`
//! (the provider clients) and `executors`.

mod admission;
mod background;
mod checkpoint;
mod cleanup;
mod confirmations;
mod cores;
mod dispatch;
mod identity;
mod memory;
mod outbound;
pub mod sender;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use std::time::Duration;

use crate::executors::dispatcher::Dispatcher;
use crate::executors::responses::Answering;
use crate::service::Services;
use crate::workers::sender::Providers;
use crate::workers::sender::Sender;
pub use background::Background;
pub use cores::keep_threads_to;
pub use memory::limit_arenas;

/// The sender of prompts and replies, when some provider has credentials to send with.
fn outbound_sender(state: &Services) -> Result<Option<Sender>, reqwest::Error> {
    let config = &state.config;
    let timeout = Duration::from_millis(config.outbound.request_timeout_ms);
    let providers = Providers::from_config(config, timeout)?;
    if providers.is_empty() {
        return Ok(None);
    }
    Ok(Some(Sender::new(state.engine.clone(), state.templates.clone(), providers, &config.outbound)))
}

/// The running workers; `wait` returns when all have stopped.
pub struct Workers {
    tracker: TaskTracker,
}

impl Workers {
    pub async fn wait(self) {
        self.tracker.wait().await;
    }
}

/// Starts every worker on `on` (the runtime behind the acknowledgement, [`Background`]).
pub fn spawn(state: &Services, stopping: CancellationToken, on: &tokio::runtime::Handle) -> Workers {
    let tracker = Spawner { tracker: TaskTracker::new(), on: on.clone() };
    let config = &state.config;
    tracker.spawn(admission::run(state.clone(), stopping.clone()));
    let every = config.idempotency.cleanup_interval();
    let cleanup = cleanup::Cleanup {
        database: state.database.clone(),
        retention: config.retention.clone(),
        tenants: state.policy.tenants.clone(),
    };
    tracker.spawn(cleanup::run(cleanup, every, stopping.clone()));
    tracker.spawn(memory::run(Duration::from_secs(10), stopping.clone()));
    if state.database.backend() == crate::config::BackendKind::Sqlite {
        tracker.spawn(checkpoint::run(state.database.clone(), Duration::from_millis(250), stopping.clone()));
    }
    let sweep = Duration::from_millis(config.outbound.confirmation_sweep_ms);
    tracker.spawn(confirmations::run(state.engine.clone(), state.policy.clone(), sweep, stopping.clone()));
    let poll = Duration::from_millis(config.outbound.poll_interval_ms);
    match Dispatcher::new(state.ingress.clone(), config) {
        Ok(dispatcher) => {
            let answering = Answering { engine: state.engine.clone(), policy: state.policy.clone() };
            for (bus, agents) in dispatcher.bus_listeners() {
                let answering = answering.clone();
                tracker.spawn(crate::executors::bus::listen(bus, agents, answering, stopping.clone()));
            }
            for (stream, agents) in dispatcher.stream_listeners() {
                let (answering, stopping) = (answering.clone(), stopping.clone());
                tracker.spawn(crate::executors::jetstream::listener::listen(stream, agents, answering, stopping));
            }
            tracker.spawn(dispatch::cancel_notices(dispatcher.clone(), poll, stopping.clone()));
            tracker.spawn(dispatch::previews(dispatcher.clone(), poll, stopping.clone()));
            tracker.spawn(dispatch::run(dispatcher, poll, stopping.clone()));
        }
        Err(error) => tracing::error!(%error, "cannot build the executors: commands stay queued for dispatch"),
    }
    tracker.spawn(dispatch::timers(state.engine.clone(), sweep, stopping.clone()));
    tracker.spawn(dispatch::lock_turns(state.engine.clone(), state.policy.clone(), poll, stopping.clone()));
    tracker.spawn(identity::run(state.clone(), poll, stopping.clone()));
    match outbound_sender(state) {
        Ok(Some(sender)) => {
            tracker.spawn(outbound::run(sender, Duration::from_millis(config.outbound.poll_interval_ms), stopping));
        }
        Ok(None) => tracing::warn!(
            "no provider credentials (CHATGATE_WHATSAPP_ACCESS_TOKEN, CHATGATE_TWILIO_ACCOUNT_SID): prompts and \
             replies stay queued until they are set"
        ),
        Err(error) => tracing::error!(%error, "cannot build the provider clients: prompts and replies stay queued"),
    }
    tracker.tracker.close();
    Workers { tracker: tracker.tracker }
}

/// Spawns the workers on their runtime and keeps track of them.
struct Spawner {
    tracker: TaskTracker,
    on: tokio::runtime::Handle,
}

impl Spawner {
    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        self.tracker.spawn_on(task, &self.on);
    }
}

/// Runs `tick` every `every` (the first at once) until `stopping`; a tick that overruns delays
/// the next instead of bunching them up.
async fn periodically<F, Fut>(every: Duration, stopping: CancellationToken, tick: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    woken_or_periodically(every, stopping, vec![], tick).await;
}

/// Runs `tick` every `every`, and at once when one of `wakes` is notified (a commit wrote rows
/// this worker claims): work that arrives is picked up without waiting for the next poll, and the
/// poll still finds what another instance wrote.
async fn woken_or_periodically<F, Fut>(
    every: Duration,
    stopping: CancellationToken,
    wakes: Vec<std::sync::Arc<tokio::sync::Notify>>,
    mut tick: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let woken = async {
            if wakes.is_empty() {
                std::future::pending::<()>().await;
            }
            futures_util::future::select_all(wakes.iter().map(|wake| Box::pin(wake.notified()))).await;
        };
        tokio::select! {
            () = stopping.cancelled() => return,
            _ = ticks.tick() => {}
            () = woken => {}
        }
        tick().await;
    }
}
