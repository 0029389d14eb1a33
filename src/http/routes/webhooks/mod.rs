//! The providers' webhooks as HTTP routes: thin handlers that hand the request's parts to the
//! channel that reads them and turn what it answers into a response.

pub mod hooks;
pub mod line;
pub mod messenger;
pub mod slack;
pub mod standard;
pub mod telegram;
pub mod twilio;
pub mod whatsapp;

use axum::Router;

use crate::http::AppState;

/// A chat channel's webhook as the API serves it: its routes, and their part of the OpenAPI
/// document (its `Doc`, derived from the same handlers' annotations).
pub struct Webhook {
    pub routes: fn() -> Router<AppState>,
    pub document: fn() -> utoipa::openapi::OpenApi,
}

macro_rules! webhook {
    ($channel:ident) => {
        Webhook { routes: $channel::router, document: <$channel::Doc as utoipa::OpenApi>::openapi }
    };
}

/// Every chat channel's webhook: a channel added is its route file and one line here. (The hook
/// bridge, under its configured base path, is `hooks`.)
pub const WEBHOOKS: &[Webhook] = &[
    webhook!(whatsapp),
    webhook!(twilio),
    webhook!(standard),
    webhook!(telegram),
    webhook!(slack),
    webhook!(messenger),
    webhook!(line),
];
