//! Background workers fed by the database. Each stops when the token is cancelled.

mod cleanup;
mod confirmations;
mod dispatch;
mod outbound;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use std::time::Duration;

use crate::app::AppState;
use crate::conversation::graph::GraphClient;
use crate::conversation::sender::Sender;
use crate::delivery::dispatcher::Dispatcher;

/// The sender of prompts and replies, when there is a token to send with.
fn outbound_sender(state: &AppState) -> Result<Option<Sender>, reqwest::Error> {
    let whatsapp = &state.config.whatsapp;
    let token = whatsapp.access_token.expose();
    if token.is_empty() {
        return Ok(None);
    }
    let outbound = &state.config.outbound;
    let timeout = Duration::from_millis(outbound.request_timeout_ms);
    let client = GraphClient::new(&whatsapp.api_base, &whatsapp.api_version, token, timeout)?;
    Ok(Some(Sender::new(state.engine.clone(), state.templates.clone(), client, outbound)))
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

pub fn spawn(state: &AppState, stopping: CancellationToken) -> Workers {
    let tracker = TaskTracker::new();
    let config = &state.config;
    tracker.spawn(cleanup::run(state.store.clone(), config.idempotency.cleanup_interval(), stopping.clone()));
    let sweep = Duration::from_millis(config.outbound.confirmation_sweep_ms);
    tracker.spawn(confirmations::run(state.engine.clone(), sweep, stopping.clone()));
    let poll = Duration::from_millis(config.outbound.poll_interval_ms);
    match Dispatcher::new(state.engine.clone(), state.policy.clone(), config) {
        Ok(dispatcher) => {
            for (bus, agents) in dispatcher.bus_listeners() {
                let engine = dispatcher.engine().clone();
                tracker.spawn(crate::delivery::amqp::listen(bus, agents, engine, stopping.clone()));
            }
            tracker.spawn(dispatch::run(dispatcher, poll, stopping.clone()));
        }
        Err(error) => tracing::error!(%error, "cannot build the executors: commands stay queued for dispatch"),
    }
    tracker.spawn(dispatch::timers(state.engine.clone(), sweep, stopping.clone()));
    match outbound_sender(state) {
        Ok(Some(sender)) => {
            tracker.spawn(outbound::run(sender, Duration::from_millis(config.outbound.poll_interval_ms), stopping));
        }
        Ok(None) => tracing::warn!(
            "no WhatsApp access token (CHATGATE_WHATSAPP_ACCESS_TOKEN): prompts and replies stay queued until one is set"
        ),
        Err(error) => tracing::error!(%error, "cannot build the WhatsApp client: prompts and replies stay queued"),
    }
    tracker.close();
    Workers { tracker }
}

/// Runs `tick` every `every` (the first at once) until `stopping`; a tick that overruns delays
/// the next instead of bunching them up.
async fn periodically<F, Fut>(every: Duration, stopping: CancellationToken, mut tick: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stopping.cancelled() => return,
            _ = ticks.tick() => {}
        }
        tick().await;
    }
}
