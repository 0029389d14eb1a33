//! The Directory page: find a person by name, number or id; see their roles and recent commands;
//! change their roles, deactivate or reactivate them, give them a code to link another channel,
//! erase them (with a step-up proof, as other high-risk actions). Every change goes through the
//! API's own code (`service::directory` with `routes::directory::changing`), under the same scopes
//! and tenant.

use std::collections::BTreeMap;

use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use minijinja::context;
use serde::Deserialize;
use time::OffsetDateTime;

use super::page::{PageError, render};
use super::session::{Changing, DirectoryRead, DirectoryWrite, Reading, Signed};
use super::{Row, frame};
use crate::domain::directory::PersonFields;
use crate::http::AppState;
use crate::http::routes::commands::{ListQuery, list as list_commands};
use crate::http::routes::directory::actors::run_erasure;
use crate::http::routes::directory::{ActorView, WRITE, changing, refusal};
use crate::service::directory::erasure_binding;
use crate::service::reads::Search;

#[derive(Debug, Default, Deserialize)]
pub(super) struct Find {
    q: Option<String>,
}

/// `GET /console/directory?q=`.
pub(super) async fn find(
    Reading { state, signed, .. }: Reading<DirectoryRead>,
    Query(find): Query<Find>,
) -> Result<Response, PageError> {
    let q = find.q.unwrap_or_default();
    let search = Search { text: Some(q.clone()).filter(|q| !q.trim().is_empty()), limit: 50, ..Search::default() };
    let people = state.policy.people.list(&signed.principal().tenant, &search).await?;
    let people: Vec<ActorView> = people.iter().map(ActorView::of).collect();
    let vars = context! { title => "Directory", nav => "directory", session => frame(&signed), people, q };
    Ok(render(StatusCode::OK, "directory.html", vars))
}

/// `GET /console/directory/{id}`.
pub(super) async fn person(
    Reading { state, signed, .. }: Reading<DirectoryRead>,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    person_page(&state, &signed, &id, StatusCode::OK, None).await
}

/// The person's page, with `notice` above it (a step-up asked for, say).
async fn person_page(
    state: &AppState,
    signed: &Signed,
    id: &str,
    status: StatusCode,
    notice: Option<String>,
) -> Result<Response, PageError> {
    let tenant = &signed.principal().tenant;
    let stored = state.policy.people.get(tenant, id).await?.ok_or(PageError::NotFound)?;
    let roles: Vec<String> = state.policy.people.roles(tenant).await?.0.into_keys().collect();
    let now = OffsetDateTime::now_utc();
    let recent = match signed.principal().scopes.contains(crate::http::routes::commands::READ) {
        true => {
            let query = ListQuery { actor: Some(id.to_owned()), limit: Some(10), ..ListQuery::default() };
            let page = list_commands(signed.caller(state), Query(query)).await?.0;
            page.commands.iter().map(|c| Row::of(state, c, now)).collect()
        }
        false => vec![],
    };
    let (command, key) = erasure_binding(tenant, id);
    let vars = context! {
        title => stored.person.name.clone(), nav => "directory", session => frame(signed),
        person => ActorView::of(&stored), roles, recent, notice,
        can_change => signed.principal().scopes.contains(WRITE),
        erasure => context! { command => command.to_string(), key },
    };
    Ok(render(status, "person.html", vars))
}

/// `POST /console/directory/{id}/roles`: each checked role is a field `role:<name>`.
pub(super) async fn roles(
    Path(id): Path<String>,
    Changing { state, signed, form, .. }: Changing<DirectoryWrite, BTreeMap<String, String>>,
) -> Result<Response, PageError> {
    let roles = form.keys().filter_map(|k| k.strip_prefix("role:")).map(str::to_owned).collect();
    let fields = PersonFields { roles: Some(roles), ..PersonFields::default() };
    change(&state, &signed, &id, &fields).await
}

/// `active=true|false` (text: a flattened form reads every field as text).
#[derive(Deserialize)]
pub(super) struct ActiveForm {
    active: String,
}

/// `POST /console/directory/{id}/active`: deactivate (`active=false`) or reactivate.
pub(super) async fn active(
    Path(id): Path<String>,
    Changing { state, signed, form, .. }: Changing<DirectoryWrite, ActiveForm>,
) -> Result<Response, PageError> {
    let active = match form.active.as_str() {
        "true" => true,
        "false" => false,
        _ => return Err(PageError::BadForm("`active` is true or false".into())),
    };
    let fields = PersonFields { active: Some(active), ..PersonFields::default() };
    change(&state, &signed, &id, &fields).await
}

async fn change(state: &AppState, signed: &Signed, id: &str, fields: &PersonFields) -> Result<Response, PageError> {
    let who = changing(signed.principal());
    state.policy.people.update(&who, id, fields, None).await.map_err(refusal)?;
    Ok(Redirect::to(&format!("/console/directory/{}", urlencoded(id))).into_response())
}

#[derive(Deserialize)]
pub(super) struct EraseForm {
    #[serde(default)]
    step_up: String,
}

/// `POST /console/directory/{id}/erase`, with the operator's step-up proof.
pub(super) async fn erase(
    Path(id): Path<String>,
    Changing { state, signed, form, .. }: Changing<DirectoryWrite, EraseForm>,
) -> Result<Response, PageError> {
    let token = Some(form.step_up.trim()).filter(|t| !t.is_empty());
    match run_erasure(&state, signed.principal(), &id, token).await {
        Ok(report) => {
            let vars = context! {
                title => "Erased", nav => "directory", session => frame(&signed),
                text => format!(
                    "Their addresses, name and messages' text are gone; their {} commands stay under {}.",
                    report.commands, report.erased_id
                ),
            };
            Ok(render(StatusCode::OK, "message.html", vars))
        }
        Err(error) if error.problem().code == "insufficient_user_authentication" => {
            let detail = error.problem().detail.unwrap_or_default();
            person_page(&state, &signed, &id, StatusCode::UNAUTHORIZED, Some(detail)).await
        }
        Err(error) => Err(error.into()),
    }
}

#[derive(Deserialize)]
pub(super) struct LinkCodeForm {}

/// `POST /console/directory/{id}/link-code`: a one-time code for the person to link another
/// channel, shown once on their page (the API's own code issues it).
pub(super) async fn link_code(
    Path(id): Path<String>,
    Changing { state, signed, form: LinkCodeForm {}, .. }: Changing<DirectoryWrite, LinkCodeForm>,
) -> Result<Response, PageError> {
    let tenant = &signed.principal().tenant;
    let issued = state.policy.people.issue_link_code(tenant, &id, OffsetDateTime::now_utc()).await.map_err(refusal)?;
    let view = crate::http::routes::directory::link_codes::LinkCodeView::of(&issued);
    let notice = format!(
        "Link code {}: ask them to send \"{}\" from the channel or number to link, before {}. It is shown once.",
        view.code, view.send, view.expires_at
    );
    person_page(&state, &signed, &id, StatusCode::OK, Some(notice)).await
}

fn urlencoded(id: &str) -> String {
    form_urlencoded::byte_serialize(id.as_bytes()).collect()
}
