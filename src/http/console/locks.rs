//! The Locks page: what the tenant's mutations under way hold (issue #47) — the resource, the
//! request holding it, where that request stands, since when — and, for an operator whose token
//! may release locks, Release with a reason, as `POST /v1/locks/{resource}/release` does.

use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::context;
use serde::Deserialize;
use time::OffsetDateTime;

use super::frame;
use super::page::{PageError, render};
use super::session::{Changing, LocksRead, LocksRelease, Reading};
use crate::domain::locks::Resource;
use crate::http::routes::locks::RELEASE;
use crate::service::locks::{self, Released};

/// How many locks the page shows, oldest first.
const SHOWN: i64 = 200;

#[derive(Deserialize)]
pub(super) struct Shown {
    /// What the operator's last release came to (`released`, `not_held`, `reason_too_short`).
    #[serde(default)]
    released: Option<String>,
}

/// `GET /console/locks`.
pub(super) async fn list(
    Reading { state, signed, .. }: Reading<LocksRead>,
    Query(shown): Query<Shown>,
) -> Result<Response, PageError> {
    let locks = locks::held(&state.engine, &signed.principal().tenant, SHOWN).await?;
    let can_release = signed.principal().scopes.contains(RELEASE);
    let released = shown.released.filter(|r| matches!(r.as_str(), "released" | "not_held" | "reason_too_short"));
    let vars = context! { title => "Locks", nav => "locks", session => frame(&signed), locks, can_release, released };
    Ok(render(StatusCode::OK, "locks.html", vars))
}

#[derive(Deserialize)]
pub(super) struct ReleaseForm {
    resource: String,
    reason: String,
}

/// `POST /console/locks/release`: the operator's release, with their reason, as evidence.
pub(super) async fn release(
    Changing { state, signed, form, .. }: Changing<LocksRelease, ReleaseForm>,
) -> Result<Response, PageError> {
    let principal = signed.principal();
    let outcome = match Resource::parse(&form.resource) {
        None => Released::NotHeld,
        Some(resource) => {
            let asked = (&resource, principal.subject.as_str(), form.reason.as_str());
            locks::release(&state.engine, &principal.tenant, asked, OffsetDateTime::now_utc()).await?
        }
    };
    let said = match outcome {
        Released::Done { .. } => "released",
        Released::NotHeld => "not_held",
        Released::ReasonTooShort => "reason_too_short",
    };
    Ok(Redirect::to(&format!("/console/locks?released={said}")).into_response())
}
