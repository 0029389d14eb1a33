//! `GET /metrics`: Prometheus text exposition of the counters the gateway keeps.
//!
//! Counters are recorded with the `metrics` facade wherever things happen; one process-wide
//! recorder (metrics-exporter-prometheus, without its own HTTP listener) renders them here. The
//! database's figures are read at most once a second (`service::figures`), through bounded
//! queries. `metrics.token` asks for a bearer token; `metrics.listen` serves it on an address of
//! its own instead of the main one.

use std::sync::OnceLock;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::domain::agent::AgentState;
use crate::domain::delivery::DeliveryState;
use crate::http::AppState;
use crate::http::Problem;
use crate::http::responses::{PROBLEM_JSON, ProblemDocument};

static RECORDER: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
static SCRAPE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Installs the process's recorder once; later calls return the same handle. `None` when
/// another recorder was installed first (by an embedding program).
pub fn install() -> Option<&'static PrometheusHandle> {
    RECORDER
        .get_or_init(|| {
            // Latencies as true histograms (buckets), not client-side quantiles.
            let buckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0];
            // Counts of deliveries per inbox commit, in powers of two.
            let sizes = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];
            let deliveries = metrics_exporter_prometheus::Matcher::Full("chatgate_inbox_commit_deliveries".into());
            let builder = PrometheusBuilder::new();
            let builder = builder
                .set_buckets(&buckets)
                .and_then(|builder| builder.set_buckets_for_metric(deliveries, &sizes))
                .unwrap_or_else(|_| PrometheusBuilder::new());
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok().map(|()| handle)
        })
        .as_ref()
}

/// `/metrics` on the main address, unless `metrics.listen` gives it one of its own.
pub fn router(config: &crate::config::Config) -> Router<AppState> {
    match config.metrics.listen.trim() {
        "" => only(),
        _ => Router::new(),
    }
}

/// A router with `/metrics` alone (its own address serves this).
pub fn only() -> Router<AppState> {
    Router::new().route("/metrics", get(render))
}

/// Figures read from the database (at most once a second), as gauges.
async fn record_snapshot(state: &AppState) {
    let snapshot = match state.figures.get(&state.database).await {
        Ok(snapshot) => snapshot,
        Err(error) => {
            tracing::warn!(%error, "metrics: the database figures are unavailable");
            metrics::gauge!("chatgate_store_up").set(0.0);
            return;
        }
    };
    metrics::gauge!("chatgate_store_up").set(1.0);
    for kind in ["message", "notice", "dispatch"] {
        let (depth, age) =
            snapshot.outbox.iter().find(|(k, _, _)| k == kind).map_or((0, 0.0), |(_, n, age)| (*n, *age));
        metrics::gauge!("chatgate_outbox_pending", "kind" => kind).set(depth as f64);
        metrics::gauge!("chatgate_outbox_oldest_age_seconds", "kind" => kind).set(age);
    }
    // Every configured agent, in its state (an agent that never moved is idle), as /v1/agents
    // lists them.
    let state_of = |name: &String| {
        snapshot.agents.iter().find(|(agent, _)| agent == name).map_or(AgentState::Idle.as_str(), |(_, s)| s.as_str())
    };
    for agent_state in AgentState::ALL {
        let n = state.policy.agents.iter().filter(|name| state_of(name) == agent_state.as_str()).count();
        metrics::gauge!("chatgate_agents", "state" => agent_state.as_str()).set(n as f64);
    }
    let mut total = 0;
    for state in DeliveryState::ALL {
        let n = snapshot.deliveries.iter().find(|(s, _)| s == state.as_str()).map_or(0, |(_, n)| *n);
        total += n;
        metrics::gauge!("chatgate_deliveries", "state" => state.as_str()).set(n as f64);
    }
    // Bloodbank command completeness (OBS-1): of the deliveries in flight or closed within the
    // last hour, how many were acknowledged, ended with a result, ended with an error; and the
    // commands nobody answers.
    let ratio = |n: i64| if total == 0 { 0.0 } else { n as f64 / total as f64 };
    metrics::gauge!("chatgate_completeness_ack_ratio").set(ratio(snapshot.acked));
    metrics::gauge!("chatgate_completeness_result_ratio").set(ratio(snapshot.results));
    metrics::gauge!("chatgate_completeness_error_ratio").set(ratio(snapshot.errors));
    metrics::gauge!("chatgate_orphaned_commands").set(snapshot.orphaned as f64);
    metrics::gauge!("chatgate_approvals_pending").set(snapshot.approvals_pending as f64);
}

#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    security((), ("metrics_token" = [])),
    responses(
        (status = 200, description = "Prometheus text exposition", content_type = "text/plain", body = String),
        (status = 401, description = "`metrics.token` is set and the request does not carry it",
            content_type = PROBLEM_JSON, body = ProblemDocument)
    )
)]
pub(crate) async fn render(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let token = state.config.metrics.token.expose();
    if !token.is_empty() && !bearer_is(&headers, token) {
        return Problem::new(StatusCode::UNAUTHORIZED, "unauthorized", "Unauthorized")
            .detail("The metrics need the bearer token configured as metrics.token.")
            .challenge("Bearer realm=\"chatgate-metrics\"".to_owned())
            .into_response();
    }
    // The database's gauges are the process's: set and rendered under one lock, so that a scrape
    // shows its own reading whole even where several gateways share a process (the tests).
    let _scrape = SCRAPE.lock().await;
    record_snapshot(&state).await;
    match install() {
        Some(handle) => {
            ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], handle.render()).into_response()
        }
        None => Problem::new(StatusCode::NOT_FOUND, "metrics_unavailable", "Metrics unavailable")
            .detail("another metrics recorder is installed in this process")
            .into_response(),
    }
}

/// Whether the request carries `Authorization: Bearer <token>` (compared in constant time).
fn bearer_is(headers: &HeaderMap, token: &str) -> bool {
    let offered = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .unwrap_or_default();
    bool::from(subtle::ConstantTimeEq::ct_eq(offered.trim().as_bytes(), token.as_bytes()))
}
