//! The Commands page (newest first, filters, live rows) and a command's page (its timeline,
//! envelope, deliveries, evidence with its chain links, trace, and the recovery it allows).

use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use minijinja::context;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use uuid::Uuid;

use super::page::{PageError, render};
use super::session::{CommandsRead, Reading, Signed};
use super::{Row, form_key, frame};
use crate::domain::command::ShortRef;
use crate::domain::lifecycle::State as CommandState;
use crate::http::AppState;
use crate::http::routes::commands::{ListQuery, list as list_commands, status_document};
use crate::service::ooc::view::rfc3339;

/// The Commands page's filters, as its form sends them.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub(super) struct Filter {
    state: Option<String>,
    command: Option<String>,
    actor: Option<String>,
    #[serde(rename = "ref")]
    short_ref: Option<String>,
    /// `1h`, `24h`, `7d` or empty (any time).
    window: Option<String>,
    cursor: Option<String>,
}

const WINDOWS: [(&str, &str, i64); 4] = [
    ("", "any time", 0),
    ("1h", "the last hour", 3_600),
    ("24h", "the last day", 86_400),
    ("7d", "the last week", 604_800),
];

impl Filter {
    /// The API's list query for these filters.
    fn query(&self, now: OffsetDateTime) -> ListQuery {
        let window = WINDOWS.iter().find(|(v, _, _)| Some(*v) == self.window.as_deref()).map_or(0, |w| w.2);
        ListQuery {
            state: self.state.clone(),
            actor: self.actor.clone(),
            command: self.command.clone(),
            short_ref: self.short_ref.clone(),
            since: (window > 0).then(|| rfc3339(now - time::Duration::seconds(window))),
            cursor: self.cursor.clone(),
            limit: Some(50),
            ..ListQuery::default()
        }
    }

    /// The filters again as a query string (without the cursor), for links and live rows.
    fn as_query(&self) -> String {
        serde_urlencoded::to_string(Filter { cursor: None, ..self.clone() }).unwrap_or_default()
    }
}

/// The rows the API's list gives for `filter`, and the cursor of the next page.
async fn rows(state: &AppState, signed: &Signed, filter: &Filter) -> Result<(Vec<Row>, Option<String>), PageError> {
    let now = OffsetDateTime::now_utc();
    let query = Query(filter.query(now));
    let page = list_commands(signed.caller(state), query).await?.0;
    Ok((page.commands.iter().map(|c| Row::of(state, c, now)).collect(), page.next_cursor))
}

/// `GET /console/commands`.
pub(super) async fn list(
    Reading { state, signed, .. }: Reading<CommandsRead>,
    Query(filter): Query<Filter>,
) -> Result<Response, PageError> {
    let (commands, next) = rows(&state, &signed, &filter).await?;
    let states: Vec<&str> = CommandState::ALL.iter().map(|s| s.as_str()).collect();
    let registry = state.policy.registry.current();
    let command_names: Vec<&str> = registry.commands().iter().map(|c| c.name.as_str()).collect();
    let windows: Vec<_> = WINDOWS.iter().map(|(value, label, _)| context! { value, label }).collect();
    let vars = context! {
        title => "Commands", nav => "commands", live => "rows", session => frame(&signed),
        commands, next, states, command_names, windows, filter_query => filter.as_query(), filter,
    };
    Ok(render(StatusCode::OK, "commands.html", vars))
}

/// `GET /console/commands/{id}/row?{filters}`: the command's row, if the filters admit it (204
/// if not): what the live list puts on top or in place.
pub(super) async fn row(
    Reading { state, signed, .. }: Reading<CommandsRead>,
    Path(id): Path<String>,
    Query(filter): Query<Filter>,
) -> Result<Response, PageError> {
    let id: Uuid = id.parse().map_err(|_| PageError::NotFound)?;
    let command = state.engine.reads().command(&signed.principal().tenant, id).await?.ok_or(PageError::NotFound)?;
    // Listed from this command on (the cursor is exclusive): the filters decide on it alone.
    let after = Uuid::from_u128(command.envelope.command_id.as_u128().saturating_add(1));
    let one = Filter { cursor: Some(after.to_string()), ..filter };
    let (rows, _) = rows(&state, &signed, &one).await?;
    match rows.into_iter().next().filter(|r| r.command_id == id) {
        Some(c) => Ok(render(StatusCode::OK, "row.html", context! { c })),
        None => Ok(StatusCode::NO_CONTENT.into_response()),
    }
}

#[derive(Serialize)]
struct DeliveryPanel {
    target: String,
    state: String,
    attempts: i64,
    outcome: Option<crate::domain::delivery::DeliveryOutcome>,
    failure_class: Option<String>,
    log: Vec<minijinja::Value>,
    detail: Option<String>,
}

/// `GET /console/commands/{id}`: another tenant's command is not found, as in the API.
pub(super) async fn one(
    Reading { state, signed, .. }: Reading<CommandsRead>,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let id: Uuid = id.parse().map_err(|_| PageError::NotFound)?;
    let tenant = &signed.principal().tenant;
    let command = state.engine.reads().command(tenant, id).await?.ok_or(PageError::NotFound)?;
    let status = status_document(&state, &command, true).await?;
    let deliveries = deliveries(&state, id).await?;
    let evidence: Vec<_> = state
        .engine
        .reads()
        .evidence_of(tenant, id)
        .await?
        .into_iter()
        .map(|a| context! { seq => a.seq, kind => a.kind, hash => a.hash, prev => a.body["prev_hash"].as_str() })
        .collect();
    let trace = trace(&state, signed.principal(), &command.envelope.correlation_id.to_string()).await?;
    let recoveries: Vec<_> = status
        .recovery_commands
        .iter()
        .flatten()
        .map(|r| context! { id => r.to_string(), ref => ShortRef::of(*r).to_string() })
        .collect();
    let mut watch = vec![id.to_string()];
    watch.extend(status.recovery_commands.iter().flatten().map(ToString::to_string));
    let can_recover = signed.principal().scopes.contains(crate::http::routes::recovery::WRITE);
    let actions: Vec<&str> =
        if can_recover { status.recovery_actions.iter().map(|a| a.as_str()).collect() } else { vec![] };
    let step_up = (command.lifecycle.state == CommandState::AuthzPending)
        .then_some("waiting for the person's step-up proof (the chat sent them a link)");
    let spec = state.policy.known_spec_of(&command);
    let name = spec.as_ref().map_or("command", |s| s.name.as_str());
    let vars = context! {
        title => format!("{} {name}", ShortRef::of(id)), name,
        nav => "commands", live => "watch", watch, session => frame(&signed),
        envelope => serde_json::to_string_pretty(&status.envelope).unwrap_or_default(),
        target_ref => status.target_command_id.map(|t| ShortRef::of(t).to_string()),
        s => status, deliveries, evidence, trace, recoveries, actions, step_up, key => form_key(),
    };
    Ok(render(StatusCode::OK, "command.html", vars))
}

async fn deliveries(state: &AppState, id: Uuid) -> Result<Vec<DeliveryPanel>, PageError> {
    let reads = state.engine.reads();
    let attempts = reads.dispatch_attempts(id).await?;
    let mut panels = vec![];
    for d in reads.deliveries_of(id).await? {
        let log = reads.delivery_log(d.id).await?;
        panels.push(DeliveryPanel {
            attempts: attempts.iter().find(|(target, _)| *target == d.target).map_or(0, |(_, n)| *n),
            state: d.state.as_str().to_owned(),
            outcome: d.outcome,
            failure_class: d.failure_class,
            log: log.into_iter().map(|(event, outcome)| context! { event, outcome }).collect(),
            detail: d.detail.map(|v| serde_json::to_string_pretty(&v).unwrap_or_default()),
            target: d.target,
        });
    }
    Ok(panels)
}

async fn trace(
    state: &AppState,
    principal: &crate::service::security::Principal,
    correlation_id: &str,
) -> Result<Vec<minijinja::Value>, PageError> {
    let nodes = state.engine.reads().trace(&principal.tenant, correlation_id).await?;
    Ok(nodes
        .into_iter()
        .map(|n| {
            let command = n.id.strip_prefix("command:").and_then(|id| id.parse::<Uuid>().ok());
            let link = command.map(|c| format!("/console/commands/{c}"));
            let mut label = command.map_or_else(|| n.id.clone(), |c| ShortRef::of(c).to_string());
            let detail = n.detail.to_string();
            if detail != "null" && detail != "{}" {
                label = format!("{label} {}", detail.chars().take(140).collect::<String>());
            }
            context! { at => rfc3339(n.at), kind => n.kind, link, label }
        })
        .collect())
}
