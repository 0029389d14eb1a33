//! The routes of a Meta app's webhook, WhatsApp's and Messenger's alike: the subscription
//! handshake and the signed deliveries, for the default app and for a named one (`/{app}`). One
//! macro writes each channel's four handlers, since the OpenAPI document takes a function per
//! route; what differs is the path, the operation ids, the body and the channel that reads it.

use axum::http::header;
use axum::response::{IntoResponse, Response};

use crate::channels::whatsapp::webhook::{self, Handshake};
use crate::config::Config;
use crate::http::ApiError;

/// The header Meta signs a delivery with, as the document lists it (the channel reads it).
#[derive(utoipa::IntoParams)]
#[into_params(names("X-Hub-Signature-256"), parameter_in = Header)]
#[allow(dead_code)] // Read by the document only.
pub(crate) struct MetaSignature(String);

/// The handshake of the app `name` (the default app's without): the challenge, as plain text.
pub(super) fn handshake(config: &Config, name: Option<&str>, query: Handshake) -> Result<Response, ApiError> {
    let challenge = webhook::verify_handshake(config, name, query)?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], challenge).into_response())
}

/// `router()`, `Doc` and the four handlers of a Meta webhook at `$path`: `$receive(ingress,
/// config, app, posted)` reads a delivery of `$body` into a `$summary`.
macro_rules! meta_webhook {
    ($path:literal, ids: [$verify:literal, $verify_app:literal, $receive_op:literal, $receive_app:literal],
     body: $body:ty, described: $described:literal, summary: $summary:ty, receive: $receive:path) => {
        use axum::extract::{Path, Query, State};
        use axum::response::Response;
        use axum::{Json, Router, routing::get};

        use super::AppName;
        use super::meta::{MetaSignature, handshake};
        use crate::channels::whatsapp::webhook::Handshake;
        use crate::http::responses::{HandshakeAnswers, NoSuchApp, ProviderErrors};
        use crate::http::{ApiError, AppState};

        pub fn router() -> Router<AppState> {
            Router::new()
                .route($path, get(verify_default).post(receive_default))
                .route(concat!($path, "/{app}"), get(verify_app).post(receive_app))
        }

        /// Its part of the OpenAPI document (`webhooks::WEBHOOKS`).
        #[derive(utoipa::OpenApi)]
        #[openapi(paths(verify_default, verify_app, receive_default, receive_app))]
        pub struct Doc;

        #[utoipa::path(get, path = $path, operation_id = $verify, tag = "webhooks", params(Handshake),
            responses(HandshakeAnswers))]
        pub(crate) async fn verify_default(
            State(config): State<std::sync::Arc<crate::config::Config>>,
            Query(query): Query<Handshake>,
        ) -> Result<Response, ApiError> {
            handshake(&config, None, query)
        }

        #[utoipa::path(get, path = concat!($path, "/{app}"), operation_id = $verify_app, tag = "webhooks",
            params(AppName, Handshake), responses(HandshakeAnswers, NoSuchApp))]
        pub(crate) async fn verify_app(
            State(config): State<std::sync::Arc<crate::config::Config>>,
            Path(AppName(name)): Path<AppName>,
            Query(query): Query<Handshake>,
        ) -> Result<Response, ApiError> {
            handshake(&config, Some(&name), query)
        }

        #[utoipa::path(post, path = $path, operation_id = $receive_op, tag = "webhooks", params(MetaSignature),
            request_body(content = $body, content_type = "application/json", description = $described),
            responses((status = 200, description = "Its messages stored, its statuses recorded", body = $summary),
            ProviderErrors))]
        pub(crate) async fn receive_default(
            State(state): State<AppState>,
            post: super::ProviderPost,
        ) -> Result<Json<$summary>, ApiError> {
            Ok(Json($receive(&state.ingress, &state.config, None, post.posted()).await?))
        }

        #[utoipa::path(post, path = concat!($path, "/{app}"), operation_id = $receive_app, tag = "webhooks",
            params(AppName, MetaSignature),
            request_body(content = $body, content_type = "application/json", description = $described),
            responses((status = 200, description = "Its messages stored, its statuses recorded", body = $summary),
            ProviderErrors))]
        pub(crate) async fn receive_app(
            State(state): State<AppState>,
            Path(AppName(name)): Path<AppName>,
            post: super::ProviderPost,
        ) -> Result<Json<$summary>, ApiError> {
            Ok(Json($receive(&state.ingress, &state.config, Some(&name), post.posted()).await?))
        }
    };
}
pub(super) use meta_webhook;
