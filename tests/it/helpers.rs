//! Test helpers: a fresh database per test on either backend, requests, and the real server on
//! a free port.

use std::net::SocketAddr;
use std::time::Duration;

use chatgate::http::AppState;

use chatgate::config::{Config, DatabaseUrl};
use chatgate::domain::command::CommandRequest;
use chatgate::domain::command::IdempotencyClass;
use chatgate::domain::command::Intent;
use chatgate::domain::command::Risk;
use chatgate::domain::command::TenantId;
use chatgate::domain::evidence::Pseudonymizer;
use chatgate::domain::lifecycle::CommandKind;
use chatgate::http::server::run_router;
use chatgate::service::engine::Engine;
use chatgate::store::Store;
use sqlx::{AnyConnection, AssertSqlSafe, Connection, Executor};
use tokio::sync::oneshot;

/// Makes a SQLite test and a PostgreSQL test of each `async fn(&TestDb)` scenario named; the
/// PostgreSQL one says it was skipped when `CHATGATE_TEST_POSTGRES_URL` is not set.
macro_rules! on_both_backends {
    ($($scenario:ident),+ $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $scenario() {
                    let db = crate::helpers::TestDb::new(crate::helpers::Backend::Sqlite).await.expect("sqlite");
                    super::$scenario(&db).await;
                }
            )+
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $scenario() {
                    let Some(db) = crate::helpers::TestDb::new(crate::helpers::Backend::Postgres).await else { return };
                    super::$scenario(&db).await;
                }
            )+
        }
    };
}
pub(crate) use on_both_backends;

pub const POSTGRES_ENV: &str = "CHATGATE_TEST_POSTGRES_URL";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A database of its own for one test: a SQLite file in a temporary folder, or a PostgreSQL
/// database created for it and dropped when the test ends.
pub struct TestDb {
    pub url: String,
    pub store: Store,
    pub engine: Engine,
    pub config: Config,
    cleanup: Cleanup,
}

enum Cleanup {
    Folder(#[allow(dead_code)] tempfile::TempDir),
    PostgresDatabase { admin_url: String, name: String },
}

impl TestDb {
    /// `None` (and a line saying the test was skipped) when PostgreSQL is not configured.
    pub async fn new(backend: Backend) -> Option<Self> {
        Self::new_with(backend, |_| {}).await
    }

    /// A fresh database whose configuration `tweak` adjusts before the store opens.
    pub async fn new_with(backend: Backend, tweak: impl FnOnce(&mut Config)) -> Option<Self> {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("temporary folder");
                let url = format!("sqlite://{}", dir.path().join("data/chatgate.db").display());
                Some(Self::open(url, Cleanup::Folder(dir), tweak).await)
            }
            Backend::Postgres => {
                let (url, cleanup) = Self::postgres_database().await?;
                Some(Self::open(url, cleanup, tweak).await)
            }
        }
    }

    pub async fn sqlite() -> Self {
        Self::new_with(Backend::Sqlite, |_| {}).await.expect("sqlite")
    }

    pub async fn postgres() -> Option<Self> {
        Self::new_with(Backend::Postgres, |_| {}).await
    }

    /// A fresh database on the PostgreSQL server `admin_url` reaches (one of the test's own).
    pub async fn postgres_on(admin_url: &str, tweak: impl FnOnce(&mut Config)) -> Self {
        let (url, cleanup) = Self::database_on(admin_url.to_owned()).await;
        Self::open(url, cleanup, tweak).await
    }

    async fn postgres_database() -> Option<(String, Cleanup)> {
        let Ok(admin_url) = std::env::var(POSTGRES_ENV) else {
            eprintln!("skipped: {POSTGRES_ENV} is not set, PostgreSQL test not run");
            return None;
        };
        Some(Self::database_on(admin_url).await)
    }

    async fn database_on(admin_url: String) -> (String, Cleanup) {
        sqlx::any::install_default_drivers();
        let name = format!("chatgate_test_{}", uuid::Uuid::now_v7().simple());
        let mut admin =
            AnyConnection::connect(&admin_url).await.expect("PostgreSQL reachable at CHATGATE_TEST_POSTGRES_URL");
        admin.execute(AssertSqlSafe(format!("CREATE DATABASE {name}"))).await.expect("create test database");
        admin.close().await.ok();
        let mut url = url::Url::parse(&admin_url).expect("CHATGATE_TEST_POSTGRES_URL is a URL");
        url.set_path(&name);
        (url.to_string(), Cleanup::PostgresDatabase { admin_url, name })
    }

    async fn open(url: String, cleanup: Cleanup, tweak: impl FnOnce(&mut Config)) -> Self {
        let mut config =
            Config::parse(std::path::Path::new("chatgate.toml"), chatgate::config::SHIPPED_CONFIG, &|_| None)
                .expect("the shipped configuration parses");
        config.storage.database_url = DatabaseUrl::new(url.clone());
        // SQLite runs with the shipped pool (2), so that the suite meets what users run;
        // PostgreSQL test databases get a few more connections than the default.
        if url.starts_with("postgres") {
            config.storage.max_connections = Some(10);
        }
        config.server.listen = "127.0.0.1:0".into();
        // The gateway's tests hand their commands to an executor that does exactly what it is
        // asked (`builtin:echo`); the demo's shop, the shipped default, has tests of its own.
        if let Some(orders) = config.executors.get_mut("orders") {
            orders.url = "builtin:echo".into();
        }
        // Tests send bursts from one actor; the rate-limit tests set their own limits.
        config.rate_limits.actor = chatgate::config::Rate { per_minute: 60_000, burst: 10_000 };
        // Most tests read what a webhook came to right after its answer: their gateways answer once
        // the delivery is admitted (the inbox's own tests, and the conformance runner, answer at
        // durability, as shipped).
        config.ingest.acknowledge = chatgate::config::Acknowledge::Admitted;
        config.ingest.admission_wait_ms = 10_000;
        // A suite of hundreds of gateways on two cores may take more than the shipped second to
        // store a delivery now and then; the outage tests (`faults`) keep the shipped bound.
        config.ingest.store_timeout_ms = 10_000;
        // Tests sign in to the console often, all from 127.0.0.1.
        config.rate_limits.sign_in = chatgate::config::Rate { per_minute: 60_000, burst: 10_000 };
        tweak(&mut config);
        let store = Store::connect(&config.storage).await.expect("test database opens");
        store.migrate().await.expect("migrations apply");
        let engine = Engine::new(store.clone(), Pseudonymizer::new(config.evidence.pseudonym_key.expose().as_bytes()));
        Self { url, store, engine, config, cleanup }
    }

    /// A separate connection for what the application never does (tampering, counting rows).
    pub async fn raw(&self) -> AnyConnection {
        AnyConnection::connect(&self.url).await.expect("raw connection")
    }

    /// A separate connection to the inbox's database: on SQLite a file of its own beside the
    /// main one, on PostgreSQL the same database.
    pub async fn raw_inbox(&self) -> AnyConnection {
        let url =
            if self.is_postgres() { self.url.clone() } else { chatgate::store::inbox_url(&self.url).expect("url") };
        AnyConnection::connect(&url).await.expect("raw inbox connection")
    }

    /// SQLite's plan for `sql` with `params` parameters (bound to 0): one line per step (`SCAN t`
    /// reads a whole table, `SEARCH t USING INDEX` a range of it).
    pub async fn plan(&self, sql: &str, params: usize) -> Vec<String> {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}")));
        for _ in 0..params {
            query = query.bind(0_i64);
        }
        let rows = query.fetch_all(&mut self.raw().await).await.expect("plan");
        rows.iter().map(|row| sqlx::Row::try_get::<String, _>(row, "detail").expect("detail")).collect()
    }

    pub async fn count(&self, sql: &'static str, bind: &str) -> i64 {
        count(&mut self.raw().await, sql, bind).await
    }

    /// Like [`TestDb::count`], in the inbox's database.
    pub async fn count_inbox(&self, sql: &'static str, bind: &str) -> i64 {
        count(&mut self.raw_inbox().await, sql, bind).await
    }

    /// The outbox rows, oldest first: (kind, payload).
    pub async fn outbox(&self) -> Vec<(String, serde_json::Value)> {
        let mut conn = self.raw().await;
        let rows = sqlx::query("SELECT kind, payload FROM outbox ORDER BY created_at, id")
            .fetch_all(&mut conn)
            .await
            .expect("outbox");
        rows.iter()
            .map(|row| {
                let kind: String = sqlx::Row::try_get(row, "kind").expect("kind");
                let payload: String = sqlx::Row::try_get(row, "payload").expect("payload");
                (kind, serde_json::from_str(&payload).expect("json payload"))
            })
            .collect()
    }

    /// The PostgreSQL database's name (for making it unavailable and back).
    pub fn postgres_name(&self) -> Option<(&str, &str)> {
        match &self.cleanup {
            Cleanup::PostgresDatabase { admin_url, name } => Some((admin_url, name)),
            Cleanup::Folder(_) => None,
        }
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self.cleanup, Cleanup::PostgresDatabase { .. })
    }

    /// Drops the test's PostgreSQL database (terminating its connections) right away.
    pub async fn drop_database(&self) {
        if let Cleanup::PostgresDatabase { admin_url, name } = &self.cleanup {
            drop_postgres_database(admin_url, name).await;
        }
    }
}

/// What `python3 -c script args...` prints, trimmed (a provider's own client library signing, say);
/// `None`, and the test says it was skipped, where `package` is not installed (`.ci/run` installs
/// the ones the tests use).
pub fn python_prints(package: &str, script: &str, args: &[&str]) -> Option<String> {
    let output = std::process::Command::new("python3").arg("-c").arg(script).args(args).output().ok()?;
    if !output.status.success() {
        eprintln!("skipped: the Python package {package}: {}", String::from_utf8_lossy(&output.stderr));
        return None;
    }
    Some(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// Every webhook message in `acknowledged` (answered 200) is admitted, once, within 60 s: the
/// state is polled, and the deadline only bounds a failure (an outage's backlog of a thousand
/// messages, admitted while the whole suite runs on two cores, once took longer than 15 s).
pub async fn each_admitted_once(db: &TestDb, acknowledged: &[impl AsRef<str>]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    // The database the configuration names (a faults test's is on a disk of its own).
    let url = db.config.storage.database_url.expose();
    let mut conn = AnyConnection::connect(url).await.expect("the database");
    let sql = "SELECT COUNT(*) FROM inbound_messages WHERE provider_message_id = $1";
    for id in acknowledged {
        let id = id.as_ref();
        while sqlx::query_scalar::<_, i64>(sql).bind(id).fetch_one(&mut conn).await.expect("count") != 1 {
            assert!(std::time::Instant::now() < deadline, "{id} was acknowledged and never admitted once");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn count(conn: &mut AnyConnection, sql: &'static str, bind: &str) -> i64 {
    let row = sqlx::query(sql).bind(bind).fetch_one(conn).await.expect("count query");
    sqlx::Row::try_get::<i64, _>(&row, 0).expect("a count")
}

async fn drop_postgres_database(admin_url: &str, name: &str) {
    if let Ok(mut admin) = AnyConnection::connect(admin_url).await {
        let _ = admin.execute(AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))).await;
        let _ = admin.close().await;
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Cleanup::PostgresDatabase { admin_url, name } = &self.cleanup {
            let (admin_url, name) = (admin_url.clone(), name.clone());
            // Drop cannot await: a short-lived runtime on its own thread removes the database.
            let _ = std::thread::spawn(move || {
                if let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    runtime.block_on(drop_postgres_database(&admin_url, &name));
                }
            })
            .join();
        }
    }
}

/// "refund {order} {amount}" from the demo customer, as canonicalization would produce it.
pub fn refund(tenant: &str, order: &str, amount: &str, message_id: &str) -> CommandRequest {
    chatgate::domain::command::demo::refund(tenant, order, amount, message_id).expect("demo refund")
}

/// "order status {order}": a read-only command (I0).
pub fn order_status(tenant: &str, order: &str, message_id: &str) -> CommandRequest {
    CommandRequest {
        intent: Intent::parse("order", "status", Some(order)).expect("intent"),
        args: serde_json::from_value(serde_json::json!({"order_id": order})).expect("object"),
        command_kind: CommandKind::Read,
        idempotency_class: IdempotencyClass::I0,
        risk: Risk::Low,
        ..refund(tenant, order, "0", message_id)
    }
}

pub fn tenant(name: &str) -> TenantId {
    TenantId::parse(name).expect("tenant")
}

/// The real application on a free port, stopped by `stop`.
pub struct TestApp {
    pub addr: SocketAddr,
    pub client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
    /// The database it ran on, whose figures must agree with its rows once it stopped.
    database_url: String,
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Sends the shutdown signal (as SIGTERM would) without waiting.
    pub fn begin_stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Sends the shutdown signal and waits for the server to finish.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.begin_stop();
        let stopped = (&mut self.task).await.expect("server task joins");
        if let Err(disagreeing) = crate::figures::agree(&self.database_url).await {
            panic!("the figures /metrics shows disagree with the rows they count: {disagreeing}");
        }
        stopped
    }
}

pub async fn spawn_app(db: &TestDb) -> TestApp {
    spawn_app_with(db, db.config.clone()).await
}

pub async fn spawn_app_with(db: &TestDb, config: Config) -> TestApp {
    let routes = chatgate::http::server::routes(&config);
    spawn_app_with_routes(db, config, routes).await
}

/// Another life of the gateway on the same database: its own store (a stopped gateway closes
/// the one it had), as a restarted process would open.
pub async fn respawn_app_with(config: Config) -> TestApp {
    let store = Store::connect(&config.storage).await.expect("the database opens again");
    let routes = chatgate::http::server::routes(&config);
    spawn_on(store, config, routes).await
}

/// The real layers, shutdown and workers around `routes` (the real ones plus a test's own).
pub async fn spawn_app_with_routes(db: &TestDb, config: Config, routes: axum::Router<AppState>) -> TestApp {
    spawn_on(db.store.clone(), config, routes).await
}

/// The real application with a registry of the test's own.
pub async fn spawn_app_with_registry(db: &TestDb, config: Config, commands: &str) -> TestApp {
    let settings = chatgate::service::Settings::with_files(config, commands, &test_directory()).expect("registry");
    let routes = chatgate::http::server::routes(&settings.config);
    spawn_settings(db.store.clone(), settings, routes).await
}

/// The real application with a registry and a directory file of the test's own.
pub async fn spawn_app_with_files(db: &TestDb, config: Config, commands: &str, directory: &str) -> TestApp {
    let settings = chatgate::service::Settings::with_files(config, commands, directory).expect("settings");
    let routes = chatgate::http::server::routes(&settings.config);
    spawn_settings(db.store.clone(), settings, routes).await
}

/// The real application with settings of the test's own (read from a folder, say).
pub async fn spawn_app_with_settings(db: &TestDb, settings: chatgate::service::Settings) -> TestApp {
    let routes = chatgate::http::server::routes(&settings.config);
    spawn_settings(db.store.clone(), settings, routes).await
}

/// `spawn_app_with_files` as a restarted process would run it: a store of its own.
pub async fn respawn_app_with_files(config: Config, commands: &str, directory: &str) -> TestApp {
    let store = Store::connect(&config.storage).await.expect("the database opens again");
    let settings = chatgate::service::Settings::with_files(config, commands, directory).expect("settings");
    let routes = chatgate::http::server::routes(&settings.config);
    spawn_settings(store, settings, routes).await
}

async fn spawn_on(store: Store, config: Config, routes: axum::Router<AppState>) -> TestApp {
    spawn_settings(store, test_settings(config), routes).await
}

/// The tests' second tenant: another shop on another number, with a customer and an operator of
/// its own, so that isolation is tested between two tenants the gateway serves.
pub const OTHER_TENANT: &str = r#"
[tenants.other]
display_name = "Other Shop"
phone_number_ids = ["100000000000009"]
locale = "en"

[tenants.other.roles]
customer = ["orders:read", "orders:refund"]
operator = ["commands:read", "recovery:write", "agents:read", "agents:write"]

[tenants.other.actors.15550000009]
name = "Other's operator"
roles = ["customer", "operator"]
"#;

/// The shipped directory and the tests' second tenant.
pub fn test_directory() -> String {
    format!("{}\n{OTHER_TENANT}", chatgate::config::SHIPPED_DIRECTORY)
}

/// The settings the test gateways run with: the shipped registry, the test directory.
pub fn test_settings(config: Config) -> chatgate::service::Settings {
    let commands = chatgate::config::SHIPPED_COMMANDS;
    chatgate::service::Settings::with_files(config, commands, &test_directory()).expect("test settings")
}

async fn spawn_settings(
    store: Store,
    settings: chatgate::service::Settings,
    routes: axum::Router<AppState>,
) -> TestApp {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("free port");
    let addr = listener.local_addr().expect("bound address");
    let (stop, stopped) = oneshot::channel::<()>();
    let database_url = settings.config.storage.database_url.expose().to_owned();
    let state = AppState::new(settings, store);
    state.services.prepare(time::OffsetDateTime::now_utc()).await.expect("the directory file is applied");
    let app = chatgate::http::server::with_layers(routes, state.clone());
    let task = tokio::spawn(run_router(listener, app, state, async move {
        let _ = stopped.await;
    }));
    let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().expect("client");
    TestApp { addr, client, stop: Some(stop), task, database_url }
}

/// Posts WhatsApp deliveries as Meta does: signed with the demo app's secret.
pub struct Meta<'a> {
    pub app: &'a TestApp,
    pub secret: String,
}

pub const DEMO_NUMBER: &str = "100000000000001";
pub const CUSTOMER: &str = "15550000001";
pub const ADMIN: &str = "15550000002";

impl<'a> Meta<'a> {
    pub fn new(app: &'a TestApp, db: &TestDb) -> Self {
        let secret = db.config.whatsapp.apps["default"].app_secret.expose().to_owned();
        Self { app, secret }
    }

    pub async fn post_raw(&self, body: Vec<u8>, signature: Option<String>) -> reqwest::Response {
        let mut request =
            self.app.client.post(self.app.url("/webhooks/whatsapp")).header("content-type", "application/json");
        if let Some(signature) = signature {
            request = request.header("x-hub-signature-256", signature);
        }
        request.body(body).send().await.expect("webhook request")
    }

    pub async fn post(&self, body: &serde_json::Value) -> reqwest::Response {
        self.request(body).send().await.expect("webhook request")
    }

    /// A signed delivery, ready to send (from a task of its own, say).
    pub fn request(&self, body: &serde_json::Value) -> reqwest::RequestBuilder {
        let bytes = body.to_string().into_bytes();
        let signature = chatgate::channels::whatsapp::signature::sign(self.secret.as_bytes(), &bytes);
        self.app
            .client
            .post(self.app.url("/webhooks/whatsapp"))
            .header("content-type", "application/json")
            .header("x-hub-signature-256", signature)
            .body(bytes)
    }

    /// One text message from `from` to the demo number.
    pub async fn text(&self, id: &str, from: &str, body: &str) -> reqwest::Response {
        use chatgate::channels::whatsapp::simulate;
        self.post(&simulate::notification(DEMO_NUMBER, vec![simulate::text(id, from, body)], vec![])).await
    }
}

/// The command a stored inbound message started, its idempotency key and its confirmation's code,
/// once admission made them (20 s at most: a gateway of its own admits after answering).
pub async fn confirmation_of(db: &TestDb, message_id: &str) -> (uuid::Uuid, String, String) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let row = loop {
        let mut conn = db.raw().await;
        let row = sqlx::query(
            "SELECT c.command_id, c.idempotency_key, f.code FROM commands c JOIN confirmations f ON f.command_id = c.command_id
             JOIN inbound_messages m ON m.command_id = c.command_id WHERE m.provider_message_id = $1",
        )
        .bind(message_id)
        .fetch_optional(&mut conn)
        .await
        .expect("the command and its confirmation");
        match row {
            Some(row) => break row,
            None if std::time::Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(20)).await,
            None => panic!("no command with a confirmation for {message_id}"),
        }
    };
    let id: String = sqlx::Row::try_get(&row, 0).expect("id");
    let key: String = sqlx::Row::try_get(&row, 1).expect("key");
    let code: String = sqlx::Row::try_get(&row, 2).expect("code");
    (id.parse().expect("uuid"), key, code)
}

/// The command a stored inbound message started.
pub async fn command_of_message(db: &TestDb, message_id: &str) -> uuid::Uuid {
    let mut conn = db.raw().await;
    let row = sqlx::query("SELECT command_id FROM inbound_messages WHERE provider_message_id = $1")
        .bind(message_id)
        .fetch_one(&mut conn)
        .await
        .expect("message row");
    let id: String = sqlx::Row::try_get(&row, 0).expect("command id");
    id.parse().expect("uuid")
}

/// Waits until the command reaches a terminal state (20 s at most), and returns it.
pub async fn settled(db: &TestDb, command_id: uuid::Uuid) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let command = db.store.commands().get(&tenant("demo"), command_id).await.expect("read").expect("command");
        if command.lifecycle.state.is_terminal() {
            return command.lifecycle.state.to_string();
        }
        assert!(std::time::Instant::now() < deadline, "still {}", command.lifecycle.state);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Waits until the first command received reaches `want` (20 s at most) and returns its state
/// then: the caller compares, so a command stuck elsewhere is named in the failure.
pub async fn first_command_state(db: &TestDb, want: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let mut conn = db.raw().await;
        let state: String = sqlx::query_scalar("SELECT state FROM commands ORDER BY received_at LIMIT 1")
            .fetch_one(&mut conn)
            .await
            .expect("a command");
        if state == want || std::time::Instant::now() > deadline {
            return state;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Posts a provider's JSON `body` to `path`, with its authenticating header when there is one:
/// the status, the answer's content type and its JSON (null when it is none).
pub async fn post_json(
    app: &TestApp,
    path: &str,
    header: Option<(&str, &str)>,
    body: &[u8],
) -> (reqwest::StatusCode, String, serde_json::Value) {
    let mut request = app.client.post(app.url(path)).header("content-type", "application/json");
    if let Some((name, value)) = header {
        request = request.header(name, value);
    }
    let response = request.body(body.to_vec()).send().await.expect("request");
    let status = response.status();
    let kind = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    (status, kind, response.json().await.unwrap_or(serde_json::Value::Null))
}

/// A Standard Webhooks signature, `v1,<base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}"))>`,
/// written from the specification rather than with the code under test.
pub fn standard_signature(secret: &str, id: &str, timestamp: i64, body: &str) -> String {
    use base64::Engine as _;
    use hmac::{Hmac, Mac};
    let key =
        base64::engine::general_purpose::STANDARD.decode(secret.trim_start_matches("whsec_")).expect("base64 key");
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).expect("any key length");
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()))
}

/// An API token the test configuration's demo issuer signs: `subject` in `tenant`, with `scope`
/// (space-separated), valid for ten minutes.
pub fn api_token(db: &TestDb, tenant: &str, subject: &str, scope: &str) -> String {
    let settings = test_settings(db.config.clone());
    let ten_minutes = Duration::from_secs(600);
    let now = time::OffsetDateTime::now_utc();
    chatgate::service::security::mint::api_token(
        &settings.security.authenticator,
        None,
        tenant,
        subject,
        scope,
        ten_minutes,
        now,
    )
    .expect("token")
}

/// Signs in to the console as a browser does: the sign-in form first (its cookie and its field
/// bind the sign-in to this console's own page), then the token. The answer to the sign-in, with
/// redirects not followed; `extra` headers go with both requests.
pub async fn console_sign_in(app: &TestApp, token: &str, extra: &[(&str, &str)]) -> reqwest::Response {
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
    let mut form = client.get(app.url("/console/sign-in"));
    for (name, value) in extra {
        form = form.header(*name, *value);
    }
    let form = form.send().await.expect("the sign-in form");
    let set = form.headers().get("set-cookie").map(|v| v.to_str().expect("ascii").to_owned()).unwrap_or_default();
    let cookie = cookie::Cookie::parse(set).map(|c| format!("{}={}", c.name(), c.value())).unwrap_or_default();
    let html = form.text().await.expect("the form's page");
    let field = html.split("name=\"sign_in\" value=\"").nth(1).and_then(|rest| rest.split('"').next());
    let mut post = client.post(app.url("/console/sign-in")).header("cookie", cookie);
    for (name, value) in extra {
        post = post.header(*name, *value);
    }
    post.form(&[("token", token), ("sign_in", field.unwrap_or_default())]).send().await.expect("sign in")
}

/// A signed WhatsApp text from `from` to a gateway of its own at `base` (a process), answered 200.
pub async fn whatsapp_text_to(db: &TestDb, base: &str, (id, from, text): (&str, &str, &str)) {
    use chatgate::channels::whatsapp::simulate;
    let body = simulate::notification(DEMO_NUMBER, vec![simulate::text(id, from, text)], vec![]);
    let bytes = body.to_string().into_bytes();
    let secret = db.config.whatsapp.apps["default"].app_secret.expose().as_bytes().to_owned();
    let signature = chatgate::channels::whatsapp::signature::sign(&secret, &bytes);
    let sent = reqwest::Client::new()
        .post(format!("{base}/webhooks/whatsapp"))
        .header("content-type", "application/json")
        .header("x-hub-signature-256", signature)
        .body(bytes)
        .send()
        .await
        .expect("webhook");
    assert_eq!(sent.status(), reqwest::StatusCode::OK);
}
