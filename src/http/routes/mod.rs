//! The HTTP surface: one router per resource, merged in `app`.

pub mod acks;
pub mod agents;
pub mod bulk;
pub mod commands;
pub mod events;
pub mod health;
pub mod metrics;
pub mod recovery;
pub mod step_up_page;
pub mod webhooks;

use axum::Router;

use crate::config::Config;
use crate::http::AppState;

/// Every resource's routes.
pub fn router(config: &Config) -> Router<AppState> {
    Router::new()
        .merge(health::router())
        .merge(metrics::router())
        .merge(webhooks::whatsapp::router())
        .merge(webhooks::hooks::router(&config.hooks.base_path))
        .merge(webhooks::standard::router())
        .merge(webhooks::twilio::router())
        .merge(commands::router())
        .merge(recovery::router())
        .merge(bulk::router())
        .merge(acks::router())
        .merge(agents::router())
        .merge(events::router())
        .merge(crate::http::openapi::router(&config.hooks))
        .merge(step_up_page::router())
        .merge(crate::http::console::router())
}
