//! `GET /metrics`: Prometheus text exposition of the counters the gateway keeps.
//!
//! Counters are recorded with the `metrics` facade wherever things happen; one process-wide
//! recorder (metrics-exporter-prometheus, without its own HTTP listener) renders them here.

use std::sync::OnceLock;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use super::Problem;
use crate::app::AppState;

static RECORDER: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the process's recorder once; later calls return the same handle. `None` when
/// another recorder was installed first (by an embedding program).
pub fn install() -> Option<&'static PrometheusHandle> {
    RECORDER
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok().map(|()| handle)
        })
        .as_ref()
}

pub fn router() -> Router<AppState> {
    Router::new().route("/metrics", get(render))
}

async fn render() -> Response {
    match install() {
        Some(handle) => {
            ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], handle.render()).into_response()
        }
        None => Problem::new(StatusCode::NOT_FOUND, "metrics_unavailable", "Metrics unavailable")
            .detail("another metrics recorder is installed in this process")
            .into_response(),
    }
}
