//! The application: shared state, the router with its tower layers, and the server's life from
//! binding to a graceful stop.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, FromRef};
use axum::http::{Request, StatusCode};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceBuilder;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::map_response_body::MapResponseBodyLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

use crate::config::Config;

use crate::channels::StoredMessageReader;
use crate::service::database::Database;
use crate::service::engine::Engine;
use crate::service::intake::Ingress;
use crate::service::{Services, Settings};
use crate::workers;

/// What handlers share: the service layer and the server's stop signal. Handlers take the part
/// they need through `State<T>` (`FromRef`).
#[derive(Clone)]
pub struct AppState {
    /// Shared, not copied: every request clones the state (each handler's extractors, each
    /// middleware), and the services hold dozens of handles.
    pub services: Arc<Services>,
    /// Cancelled when the server begins to stop: long-lived responses (event streams) end then.
    /// Behind an `Arc`: a token's own clone and drop take a lock, once per clone of the state.
    pub stopping: Arc<CancellationToken>,
    /// Where the workers run (`workers::Background` when serving; the server's own runtime in tests).
    pub background: tokio::runtime::Handle,
}

/// Handlers read the services as the state's own fields (`state.engine`, `state.config`).
impl std::ops::Deref for AppState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.services
    }
}

impl AppState {
    /// `database`: a `Database`, or the store tests open themselves.
    pub fn new(settings: Settings, database: impl Into<Database>) -> Self {
        // Before anything counts: counts made without a recorder are lost.
        crate::http::routes::metrics::install();
        let services = Services::new(settings, database.into(), Arc::new(StoredMessageReader));
        let tenants: Vec<String> = services.policy.tenants.get().tenants().map(|t| t.id.to_string()).collect();
        let (channels, executors) = (crate::channels::counted_names(), services.config.executors.keys());
        crate::service::telemetry::catalog::announce(channels, executors, tenants.iter());
        let background = tokio::runtime::Handle::current();
        Self { services: Arc::new(services), stopping: Arc::new(CancellationToken::new()), background }
    }

    /// A handle on the stop signal of its own, to keep past the request.
    pub fn stop_signal(&self) -> CancellationToken {
        CancellationToken::clone(&self.stopping)
    }

    /// The same, its workers on `background`.
    pub fn behind(self, background: tokio::runtime::Handle) -> Self {
        Self { background, ..self }
    }
}

impl FromRef<AppState> for Ingress {
    fn from_ref(state: &AppState) -> Self {
        state.ingress.clone()
    }
}

impl FromRef<AppState> for Database {
    fn from_ref(state: &AppState) -> Self {
        state.database.clone()
    }
}

impl FromRef<AppState> for Engine {
    fn from_ref(state: &AppState) -> Self {
        state.engine.clone()
    }
}

impl FromRef<AppState> for Arc<Config> {
    fn from_ref(state: &AppState) -> Self {
        state.config.clone()
    }
}

/// The span of one request: a `webhook …` span for the providers' and the hooks' calls, and
/// for a caller that sends a W3C `traceparent` (a hook caller, say), a child of the caller's span.
fn request_span<B>(request: &Request<B>) -> tracing::Span {
    let request_id = request.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or("-");
    let path = request.uri().path();
    let span = tracing::info_span!(
        "request",
        method = %request.method(),
        path,
        request_id,
        otel.name = tracing::field::Empty,
        otel.kind = "server",
    );
    // Named and joined to the caller's trace only when traces are exported: nothing more per
    // request otherwise.
    if crate::service::telemetry::enabled() {
        span.record("otel.name", span_name(request.method(), path));
        crate::service::telemetry::continue_trace(&span, request.headers());
    }
    span
}

/// While traces are not exported, a caller's `traceparent` is carried on as it came, with what
/// the request brings about (`telemetry::carrying`); nothing is done for a request without one.
async fn carry_trace(request: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    use crate::service::telemetry::{Carried, carrying, enabled};
    match (!enabled()).then(|| Carried::from_headers(request.headers())).flatten() {
        Some(carried) => carrying(Some(carried), next.run(request)).await,
        None => next.run(request).await,
    }
}

/// `webhook whatsapp`, `webhook hooks/agent`, `GET /v1/commands`: what a request is, without
/// the ids in its path.
fn span_name(method: &axum::http::Method, path: &str) -> String {
    let mut segments = path.trim_start_matches('/').split('/');
    match (segments.next(), segments.next()) {
        (Some("webhooks"), Some(provider)) => format!("webhook {provider}"),
        (Some("hooks"), Some(hook)) => format!("webhook hooks/{hook}"),
        (Some(first), Some(second)) => format!("{method} /{first}/{second}"),
        _ => format!("{method} {path}"),
    }
}

/// The whole HTTP surface with its layers. Each group is one `ServiceBuilder` (read from the
/// outermost down): `Router::layer` boxes every route again for each layer it is given, and a
/// request paid for every box (docs/BENCHMARKS.md, 2026-11-27, third session). The problem-body
/// layer sits outside the timeout and the body limit, so that their bare errors become problem
/// documents too.
pub fn router(state: AppState) -> Router {
    with_layers(routes(&state.config), state)
}

/// Every route the gateway serves: the API and the webhooks, the console built on them, and the
/// OpenAPI document that describes them.
pub fn routes(config: &crate::config::Config) -> Router<AppState> {
    crate::http::routes::router(config)
        .merge(crate::http::console::router())
        .merge(crate::http::openapi::router(&config.hooks))
}

/// Serves `routes` behind the same fallback and layers as the real router; `router` uses it,
/// and tests use it to put a route of their own behind the real layers.
pub fn with_layers(routes: Router<AppState>, state: AppState) -> Router {
    let server = state.config.server.clone();
    let https = crate::http::headers::Https(server.public_base_url.starts_with("https://"));
    let security = state.policy.security.clone();
    let database = state.database.clone();
    let directory = state.config.directory.clone();
    // `Router::layer` wraps the routes there so far: the import, merged after, keeps limits of
    // its own (a large body, a long time) under the same outer layers.
    let import = crate::http::routes::directory::bulk::import_router().layer(
        ServiceBuilder::new()
            .layer(TimeoutLayer::with_status_code(StatusCode::SERVICE_UNAVAILABLE, directory.import_timeout()))
            .layer(MapResponseBodyLayer::new(Body::new))
            .layer(RequestBodyLimitLayer::new(directory.import_max_bytes))
            .layer(DefaultBodyLimit::max(directory.import_max_bytes)),
    );
    let limits = ServiceBuilder::new()
        // A request that outlives its budget is our failure, and a retry may succeed: 503.
        .layer(TimeoutLayer::with_status_code(StatusCode::SERVICE_UNAVAILABLE, server.request_timeout()))
        // The timeout answers with an empty body of the type below it: one it can make.
        .layer(MapResponseBodyLayer::new(Body::new))
        .layer(RequestBodyLimitLayer::new(server.body_limit_bytes))
        .layer(DefaultBodyLimit::max(server.body_limit_bytes));
    let outer = ServiceBuilder::new()
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .layer(TraceLayer::new_for_http().make_span_with(request_span))
        .layer(axum::middleware::from_fn(carry_trace))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(axum::middleware::from_fn_with_state(https, crate::http::headers::security_headers))
        .layer(axum::middleware::from_fn(crate::http::problem::problem_bodies))
        .layer(axum::middleware::from_fn(crate::http::guards::refuse_nul))
        // What the scope layers read console sessions from (a session reads `/v1/events`).
        .layer(axum::Extension(database))
        // What the scope layers of the routes need (`security::require`).
        .layer(axum::Extension(security));
    routes.layer(limits).merge(import).fallback(crate::http::problem::not_found).with_state(state).layer(outer)
}

/// Connects to the database, applies migrations and serves until SIGTERM or SIGINT.
pub async fn serve(settings: Settings) -> anyhow::Result<()> {
    let cores = &settings.config.server.cpus;
    workers::keep_threads_to(cores)
        .map_err(|e| anyhow::anyhow!("server.cpus = \"{cores}\": cannot keep the gateway to these cores: {e}"))?;
    let ingest = &settings.config.ingest;
    let behind = &ingest.background_cpus;
    let background = workers::Background::start(ingest.background_nice, behind.clone()).map_err(|e| {
        anyhow::anyhow!("ingest.background_cpus = \"{behind}\": cannot start the work behind the inbox: {e}")
    })?;
    let database = Database::connect_on(&settings.config.storage, &background.handle()).await?;
    database.migrate().await?;
    let state = AppState::new(settings, database).behind(background.handle());
    // The directory file's people and roles are in the database before the first message.
    state.services.prepare(time::OffsetDateTime::now_utc()).await?;
    let addr = state.config.server.listen_addr()?;
    let listener = TcpListener::bind(addr).await.map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    for name in state.config.demo_secrets() {
        tracing::warn!(setting = %name, "a demo secret is in use; set your own before production");
    }
    run(listener, state, shutdown_signal()).await
}

/// Serves on `listener` until `shutdown` completes, then lets in-flight requests and workers
/// finish within the configured grace period and closes the database.
pub async fn run(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let app = router(state.clone());
    run_router(listener, app, state, shutdown).await
}

/// `run` with a router the caller built (see [`with_layers`]).
pub async fn run_router(
    listener: TcpListener,
    app: Router,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let addr: SocketAddr = listener.local_addr()?;
    let grace = state.config.server.shutdown_grace();
    let state_limits = (state.config.server.header_read_timeout(), state.config.server.max_connections);
    let descriptor_reserve = descriptors_besides_clients(&state.config, state.database.backend());
    let stopping = state.stop_signal();
    let workers = workers::spawn(&state.services, stopping.clone(), &state.background);
    let hangups = crate::http::routes::reload::reload_on_hangup(Services::clone(&state.services), stopping.clone());
    let database = state.database.clone();
    tracing::info!(%addr, backend = database.backend_name(), "chatgate listening");

    let metrics = serve_metrics_apart(&state).await?;
    let on_signal = stopping.clone();
    drop(state);
    let limits =
        crate::http::listen::ConnectionLimits { header_read_timeout: state_limits.0, max_connections: state_limits.1 }
            .within(crate::http::listen::raise_open_file_limit(), descriptor_reserve);
    let server = crate::http::listen::serve(listener, app, limits, async move {
        shutdown.await;
        tracing::info!("shutting down: finishing in-flight requests");
        on_signal.cancel();
    });
    let deadline = async {
        stopping.cancelled().await;
        tokio::time::sleep(grace).await;
    };
    tokio::select! {
        result = server => result?,
        () = deadline => tracing::warn!(?grace, "in-flight requests did not finish in time; stopping anyway"),
    }
    stopping.cancel();
    if tokio::time::timeout(grace, workers.wait()).await.is_err() {
        tracing::warn!("background workers did not stop in time");
    }
    if let Some(metrics) = metrics {
        metrics.abort();
    }
    hangups.abort();
    database.close().await;
    tracing::info!("stopped");
    Ok(())
}

/// `/metrics` on an address of its own (`metrics.listen`), when one is configured: a port the load
/// balancer does not expose.
async fn serve_metrics_apart(state: &AppState) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    let Some(addr) = state.config.metrics.listen_addr()? else { return Ok(None) };
    let listener = TcpListener::bind(addr).await.map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "metrics listening");
    let app = with_layers(crate::http::routes::metrics::only(), state.clone());
    Ok(Some(tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::warn!(%error, "the metrics listener stopped");
        }
    })))
}

/// The file descriptors the process needs besides its clients' connections: the database pool,
/// a connection per call to an executor and per reply sent at once, and a margin for the rest
/// (the listener, the log, the PostgreSQL listener, the bus, files).
fn descriptors_besides_clients(config: &crate::config::Config, backend: crate::config::BackendKind) -> usize {
    let executors: usize = config.executors.values().map(|e| e.max_in_flight).sum();
    let replies = usize::try_from(config.outbound.batch).unwrap_or(0);
    config.storage.pool_size(backend) as usize + executors + replies + 64
}

/// Completes on SIGTERM (how orchestrators stop a process) or SIGINT (Ctrl-C).
pub async fn shutdown_signal() {
    let interrupt = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}
