//! The providers' webhooks as HTTP routes: thin handlers that hand the request's parts to the
//! channel that reads them and turn what it answers into a response.

pub mod hooks;
pub mod line;
pub mod messenger;
mod meta;
pub mod slack;
pub mod standard;
pub mod telegram;
pub mod twilio;
pub mod whatsapp;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderMap, Uri};
use serde::Deserialize;

use crate::channels::Posted;
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

/// A provider's post as a webhook route takes it, owned: the channel reads it as [`Posted`]
/// (its own signature header among the headers).
pub(crate) struct ProviderPost {
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
}

impl ProviderPost {
    pub(crate) fn posted(&self) -> Posted<'_> {
        Posted { uri: &self.uri, headers: &self.headers, body: &self.body }
    }
}

impl<S: Send + Sync> FromRequest<S> for ProviderPost {
    type Rejection = BytesRejection;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let (uri, headers) = (request.uri().clone(), request.headers().clone());
        Ok(Self { uri, headers, body: Bytes::from_request(request, state).await? })
    }
}

/// The configured app a provider's webhook is served for, where there are several (`/{app}`).
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(names("app"), parameter_in = Path)]
pub(crate) struct AppName(pub String);
