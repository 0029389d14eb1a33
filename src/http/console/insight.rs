//! The Overview (commands per minute by how they stand, and latency percentiles, over the last
//! hour, drawn as inline SVG) and the Audit page (the evidence chain verified, the first broken
//! link shown).

use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::Response;
use minijinja::context;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::frame;
use super::page::{PageError, render};
use super::session::{AuditRead, CommandsRead, Reading};
use crate::http::routes::commands::tenant_chains;
use crate::service::overview::{Latency, Minute, Standing, overview as figures};

#[derive(Serialize)]
struct Bar {
    x: f64,
    y: f64,
    w: f64,
    h: f64,
    class: &'static str,
    label: String,
}

const WIDTH: f64 = 600.0;
const HEIGHT: f64 = 200.0;

/// A stacked bar per minute, scaled to the busiest minute.
fn bars(minutes: &[Minute]) -> (Vec<Bar>, i64) {
    let max = minutes.iter().map(Minute::total).max().unwrap_or(0).max(1);
    let slot = WIDTH / minutes.len().max(1) as f64;
    let mut bars = vec![];
    for (i, minute) in minutes.iter().enumerate() {
        let mut top = HEIGHT;
        let hhmm = format!("{:02}:{:02} UTC", minute.start.hour(), minute.start.minute());
        for (standing, count) in Standing::ALL.iter().zip(minute.counts) {
            if count == 0 {
                continue;
            }
            let h = HEIGHT * count as f64 / max as f64;
            top -= h;
            let class = css_class(*standing);
            let label = format!("{hhmm}: {count} {}", standing.as_str());
            bars.push(Bar { x: i as f64 * slot + 1.0, y: top, w: (slot - 2.0).max(1.0), h, class, label });
        }
    }
    (bars, max)
}

/// The class that colours a standing (`in progress` is two words).
fn css_class(standing: Standing) -> &'static str {
    match standing {
        Standing::InProgress => "in_progress",
        other => other.as_str(),
    }
}

fn millis(value: Option<i64>) -> String {
    match value {
        None => "–".to_owned(),
        Some(ms) if ms < 10_000 => format!("{ms} ms"),
        Some(ms) => format!("{:.1} s", ms as f64 / 1000.0),
    }
}

fn latency_row(label: &str, l: &Latency) -> minijinja::Value {
    context! {
        label, l, p50 => millis(l.p50_ms), p95 => millis(l.p95_ms), p99 => millis(l.p99_ms), max => millis(l.max_ms),
    }
}

/// `GET /console`.
pub(super) async fn overview(Reading { state, signed, .. }: Reading<CommandsRead>) -> Result<Response, PageError> {
    let now = OffsetDateTime::now_utc();
    let o = figures(&state.database, &signed.principal().tenant, now).await?;
    let (bars, max) = bars(&o.minutes);
    let legend: Vec<_> = Standing::ALL
        .iter()
        .zip(o.totals)
        .map(|(s, total)| {
            context! { class => css_class(*s), label => s.as_str(), total }
        })
        .collect();
    let latency = vec![latency_row("all", &o.latency), latency_row("reads (nobody asked)", &o.latency_reads)];
    let vars = context! {
        title => "Overview", nav => "overview", live => "refresh", session => frame(&signed),
        total => o.totals.iter().sum::<i64>(), legend, latency,
        intake => context! { backlog => o.intake.backlog, lag => millis(o.intake.lag_ms), parked => o.intake.parked },
        chart => context! { width => WIDTH, height => HEIGHT, bars, max },
    };
    Ok(render(StatusCode::OK, "overview.html", vars))
}

#[derive(Deserialize)]
pub(super) struct Verify {
    verify: Option<String>,
}

/// `GET /console/audit[?verify=1]`: the tenant's chain, verified when asked.
pub(super) async fn audit(
    Reading { state, signed, .. }: Reading<AuditRead>,
    Query(Verify { verify }): Query<Verify>,
) -> Result<Response, PageError> {
    let verdict = match verify {
        None => None,
        Some(_) => {
            let chains = tenant_chains(&state.engine, &signed.principal().tenant).await?;
            let broken = chains.iter().find_map(|c| c.broken_at.clone());
            Some(context! {
                intact => broken.is_none(),
                artifacts => chains.iter().map(|c| c.artifacts).sum::<u64>(),
                broken => broken.map(|b| context! {
                    artifact_id => b.artifact_id, seq => b.seq, problem => b.to_string(),
                }),
            })
        }
    };
    let vars = context! { title => "Audit", nav => "audit", session => frame(&signed), verdict };
    Ok(render(StatusCode::OK, "audit.html", vars))
}
