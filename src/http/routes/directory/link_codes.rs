//! `/v1/directory/actors/{id}/link-codes`: a one-time code a listed person sends from another
//! channel or number ("link K7M2QX9P") to add it to their entry (issue #48).

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::Serialize;
use time::OffsetDateTime;
use utoipa::ToSchema;

use super::actors::PersonPath;
use super::{WRITE, refusal};
use crate::domain::instants::rfc3339;
use crate::http::auth::{Caller, require};
use crate::http::responses::{BearerErrors, NoSuchPerson};
use crate::http::{ApiError, AppState};
use crate::service::directory::IssuedCode;

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/directory/actors/{id}/link-codes", post(issue).route_layer(require(WRITE)))
}

/// A link code, shown once (it is kept only as a keyed hash).
#[derive(Debug, Serialize, ToSchema)]
pub struct LinkCodeView {
    /// Eight letters and digits from an alphabet without look-alikes.
    pub code: String,
    /// What the person sends from the channel to link.
    pub send: String,
    /// When it stops counting (RFC 3339).
    pub expires_at: String,
}

impl LinkCodeView {
    pub(crate) fn of(issued: &IssuedCode) -> Self {
        let code = issued.code.as_str().to_owned();
        Self { send: format!("link {code}"), code, expires_at: rfc3339(issued.expires_at) }
    }
}

#[utoipa::path(post, path = "/v1/directory/actors/{id}/link-codes", operation_id = "issue_link_code", tag = "directory",
    security(("bearer" = ["directory:write"])), params(PersonPath),
    responses((status = 201, description = "A new one-time code (a person's oldest pending one stops counting past \
            `ingest.link_codes_pending`)", body = LinkCodeView), NoSuchPerson, BearerErrors))]
pub(crate) async fn issue(
    Caller { state, principal }: Caller,
    Path(PersonPath(id)): Path<PersonPath>,
) -> Result<Response, ApiError> {
    let now = OffsetDateTime::now_utc();
    let issued = state.policy.people.issue_link_code(&principal.tenant, &id, now).await.map_err(refusal)?;
    let headers = [(header::CACHE_CONTROL, "no-store")];
    Ok((StatusCode::CREATED, headers, Json(LinkCodeView::of(&issued))).into_response())
}
