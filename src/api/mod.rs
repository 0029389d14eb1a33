//! The HTTP surface: one router per resource, merged in `app`.

pub mod acks;
pub mod agents;
pub mod commands;
pub mod error;
pub mod events;
pub mod health;
pub mod metrics;
pub mod openapi;
pub mod problem;
pub mod step_up_page;

use axum::Router;

use crate::app::AppState;
use crate::config::Config;

pub use error::ApiError;

/// Every resource's routes.
pub fn router(config: &Config) -> Router<AppState> {
    Router::new()
        .merge(health::router())
        .merge(metrics::router())
        .merge(crate::ingress::whatsapp::router())
        .merge(crate::ingress::hooks::router(&config.hooks.base_path))
        .merge(crate::ingress::standard::router())
        .merge(crate::ingress::twilio::router())
        .merge(commands::router())
        .merge(acks::router())
        .merge(agents::router())
        .merge(events::router())
        .merge(openapi::router(&config.hooks))
        .merge(step_up_page::router())
}
pub use problem::Problem;
