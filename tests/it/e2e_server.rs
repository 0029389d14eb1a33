//! The server's own behaviour around requests: the timeout, graceful shutdown of in-flight
//! requests, and the background cleanup of expired dedupe records.

use std::time::Duration;

use axum::routing::get;
use chatgate::domain::lifecycle::State;
use reqwest::StatusCode;
use serde_json::Value;

use crate::conformance::{drive, path_to};
use crate::helpers::{TestDb, on_both_backends, refund, spawn_app_with, spawn_app_with_routes};

on_both_backends!(
    a_request_slower_than_the_timeout_is_a_503_problem,
    shutdown_lets_an_in_flight_request_finish,
    the_cleanup_worker_removes_expired_dedupe_records,
);

/// The real routes plus one that takes `delay` to answer.
fn with_slow_route(delay: Duration) -> axum::Router<chatgate::http::AppState> {
    chatgate::http::server::routes(&chatgate::config::Config::default()).route(
        "/test/slow",
        get(move || async move {
            tokio::time::sleep(delay).await;
            "done"
        }),
    )
}

async fn a_request_slower_than_the_timeout_is_a_503_problem(db: &TestDb) {
    let mut config = db.config.clone();
    config.server.request_timeout_ms = 100;
    let app = spawn_app_with_routes(db, config, with_slow_route(Duration::from_secs(2))).await;
    let response = app.client.get(app.url("/test/slow")).send().await.expect("send");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()["content-type"], "application/problem+json");
    assert!(response.headers().contains_key("retry-after"), "the caller is told to retry");
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["code"], "unavailable");
    app.stop().await.expect("clean stop");
}

async fn shutdown_lets_an_in_flight_request_finish(db: &TestDb) {
    let mut app = spawn_app_with_routes(db, db.config.clone(), with_slow_route(Duration::from_millis(800))).await;
    let url = app.url("/test/slow");
    let client = app.client.clone();
    let in_flight = tokio::spawn(async move { client.get(url).send().await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    app.begin_stop();
    let response = in_flight.await.expect("task").expect("the in-flight request is answered");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.text().await.expect("body"), "done");
    let healthz = app.url("/healthz");
    app.stop().await.expect("clean stop");
    assert!(reqwest::get(healthz).await.is_err(), "no new connections after the stop");
}

async fn the_cleanup_worker_removes_expired_dedupe_records(db: &TestDb) {
    let short = chatgate::domain::command::CommandRequest {
        dedupe_window: Duration::from_millis(1),
        ..refund("demo", "gc", "1.00", "m")
    };
    let id = drive(db, short, path_to(State::Executed)).await;
    let key = db.engine.command(&crate::helpers::tenant("demo"), id).await.expect("command").envelope.idempotency_key;
    assert_eq!(db.store.dedupe().count("demo", key.as_str()).await.expect("count"), 1);

    let mut config = db.config.clone();
    config.idempotency.cleanup_interval_secs = 1;
    let app = spawn_app_with(db, config).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while db.store.dedupe().count("demo", key.as_str()).await.expect("count") > 0 {
        assert!(tokio::time::Instant::now() < deadline, "the worker did not remove the expired record");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    app.stop().await.expect("clean stop");
}
