//! `GET /metrics`: Prometheus text exposition of the counters the gateway keeps.
//!
//! Counters are recorded with the `metrics` facade wherever things happen; one process-wide
//! recorder (metrics-exporter-prometheus, without its own HTTP listener) renders them here.

use std::sync::OnceLock;

use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::domain::agent::AgentState;
use crate::domain::delivery::DeliveryState;
use crate::http::AppState;
use crate::http::Problem;
use crate::store::Store;
use time::OffsetDateTime;

static RECORDER: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the process's recorder once; later calls return the same handle. `None` when
/// another recorder was installed first (by an embedding program).
pub fn install() -> Option<&'static PrometheusHandle> {
    RECORDER
        .get_or_init(|| {
            // Latencies as true histograms (buckets), not client-side quantiles.
            let buckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0];
            let builder = PrometheusBuilder::new();
            let builder = builder.set_buckets(&buckets).unwrap_or_else(|_| PrometheusBuilder::new());
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok().map(|()| handle)
        })
        .as_ref()
}

pub fn router() -> Router<AppState> {
    Router::new().route("/metrics", get(render))
}

/// Figures read from the database at scrape time, as gauges.
async fn record_snapshot(store: &Store) {
    let snapshot = match store.snapshot(OffsetDateTime::now_utc(), Duration::from_secs(300)).await {
        Ok(snapshot) => snapshot,
        Err(error) => {
            tracing::warn!(%error, "metrics: the database figures are unavailable");
            metrics::gauge!("chatgate_store_up").set(0.0);
            return;
        }
    };
    metrics::gauge!("chatgate_store_up").set(1.0);
    for kind in ["message", "dispatch"] {
        let (depth, age) =
            snapshot.outbox.iter().find(|(k, _, _)| k == kind).map_or((0, 0.0), |(_, n, age)| (*n, *age));
        metrics::gauge!("chatgate_outbox_pending", "kind" => kind).set(depth as f64);
        metrics::gauge!("chatgate_outbox_oldest_age_seconds", "kind" => kind).set(age);
    }
    for state in AgentState::ALL {
        let n = snapshot.agents.iter().find(|(s, _)| s == state.as_str()).map_or(0, |(_, n)| *n);
        metrics::gauge!("chatgate_agents", "state" => state.as_str()).set(n as f64);
    }
    let mut total = 0;
    for state in DeliveryState::ALL {
        let n = snapshot.deliveries.iter().find(|(s, _)| s == state.as_str()).map_or(0, |(_, n)| *n);
        total += n;
        metrics::gauge!("chatgate_deliveries", "state" => state.as_str()).set(n as f64);
    }
    // Bloodbank command completeness (OBS-1): of the commands dispatched, how many were
    // acknowledged, ended with a result, ended with an error; and those nobody answers.
    let rate = |n: i64| if total == 0 { 0.0 } else { n as f64 / total as f64 };
    metrics::gauge!("chatgate_completeness_ack_rate").set(rate(snapshot.acked));
    metrics::gauge!("chatgate_completeness_result_rate").set(rate(snapshot.results));
    metrics::gauge!("chatgate_completeness_error_rate").set(rate(snapshot.errors));
    metrics::gauge!("chatgate_orphaned_commands").set(snapshot.orphaned as f64);
}

#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    responses((status = 200, description = "Prometheus text exposition", content_type = "text/plain", body = String))
)]
pub(crate) async fn render(State(store): State<Store>) -> Response {
    record_snapshot(&store).await;
    match install() {
        Some(handle) => {
            ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], handle.render()).into_response()
        }
        None => Problem::new(StatusCode::NOT_FOUND, "metrics_unavailable", "Metrics unavailable")
            .detail("another metrics recorder is installed in this process")
            .into_response(),
    }
}
