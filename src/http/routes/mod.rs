//! The API and the webhooks: one router per resource, merged here. The server adds the console
//! and the OpenAPI document beside them (`server::routes`): both are built on these.

pub mod acks;
pub mod agents;
pub mod approvals;
pub mod bulk;
pub mod commands;
pub mod directory;
pub mod events;
pub mod health;
pub mod locks;
pub mod metrics;
pub mod recovery;
pub mod reload;
pub mod step_up_page;
pub mod webhooks;

use axum::Router;

use crate::config::Config;
use crate::http::AppState;

/// Every resource's routes (the console's and the document's are `server::routes`').
pub fn router(config: &Config) -> Router<AppState> {
    let chat = webhooks::WEBHOOKS.iter().fold(Router::new(), |routes, webhook| routes.merge((webhook.routes)()));
    Router::new()
        .merge(health::router())
        .merge(metrics::router(config))
        .merge(chat)
        .merge(webhooks::hooks::router(&config.hooks.base_path))
        .merge(commands::router())
        .merge(recovery::router())
        .merge(bulk::router())
        .merge(acks::router())
        .merge(agents::router())
        .merge(approvals::router())
        .merge(locks::router())
        .merge(directory::router())
        .merge(reload::router())
        .merge(events::router())
        .merge(step_up_page::router())
}
