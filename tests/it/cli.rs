//! The `chatgate` binary as a new user runs it: on a fresh folder, with bad input, under SIGTERM.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use chatgate::domain::lifecycle::State;
use sqlx::Executor;

use crate::conformance::{drive, path_to};
use crate::helpers::{TestDb, refund};

const BIN: &str = env!("CARGO_BIN_EXE_chatgate");

/// The binary with an environment that says nothing about chatgate, run in `dir`.
pub(crate) fn chatgate(dir: &Path) -> Command {
    let mut command = Command::new(BIN);
    command.current_dir(dir);
    for (name, _) in std::env::vars() {
        if name.starts_with("CHATGATE_") || name == "RUST_LOG" {
            command.env_remove(name);
        }
    }
    command
}

pub(crate) fn run(command: &mut Command) -> Output {
    command.stdin(Stdio::null()).output().expect("chatgate runs")
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A failure is one line on stderr and a non-zero exit, never a panic.
pub(crate) fn assert_one_line_failure(output: &Output, mentions: &str) {
    let err = stderr(output);
    assert!(!output.status.success(), "must fail: {err}");
    assert!(!err.contains("panicked"), "no panic: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line: {err}");
    assert!(lines[0].starts_with("chatgate: error: ") && lines[0].contains(mentions), "{err}");
}

/// `chatgate serve` in `dir` on a free port with `env`, healthy: the process and its base URL.
pub(crate) async fn serving(dir: &Path, env: &[(&str, String)]) -> (Child, String) {
    let port = free_port();
    let mut command = chatgate(dir);
    command.arg("serve").env("CHATGATE_LISTEN", format!("127.0.0.1:{port}"));
    for (name, value) in env {
        command.env(name, value);
    }
    let mut server = command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("spawn");
    let base = format!("http://127.0.0.1:{port}");
    wait_until_healthy(&mut server, &base).await;
    (server, base)
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

pub(crate) async fn wait_until_healthy(child: &mut Child, base: &str) {
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("chatgate exited early with {status}");
        }
        if client.get(format!("{base}/healthz")).send().await.is_ok_and(|r| r.status().is_success()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("chatgate did not become healthy in time");
}

pub(crate) fn terminate(child: &mut Child) -> std::process::ExitStatus {
    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill runs");
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        assert!(Instant::now() < deadline, "chatgate did not stop after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `serve` from a folder with nothing in it, on the given database URL (the default when None).
async fn serve_answers_and_stops_on_sigterm(dir: &Path, database_url: Option<&str>, backend: &str) {
    let port = free_port();
    let mut command = chatgate(dir);
    command.arg("serve").env("CHATGATE_LISTEN", format!("127.0.0.1:{port}"));
    if let Some(url) = database_url {
        command.env("CHATGATE_DATABASE_URL", url);
    }
    let mut child = command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("spawn");
    let base = format!("http://127.0.0.1:{port}");
    wait_until_healthy(&mut child, &base).await;
    let ready = reqwest::get(format!("{base}/readyz")).await.expect("readyz");
    assert_eq!(ready.status(), reqwest::StatusCode::OK);
    assert_eq!(ready.json::<serde_json::Value>().await.expect("json")["database"], backend);
    let status = terminate(&mut child);
    assert_eq!(status.code(), Some(0), "SIGTERM ends chatgate with exit 0");
}

#[tokio::test]
async fn serve_on_a_fresh_folder_creates_the_sqlite_file_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    serve_answers_and_stops_on_sigterm(dir.path(), None, "sqlite").await;
    assert!(dir.path().join("data/chatgate.db").is_file(), "the default database file was created");
}

#[tokio::test]
async fn serve_on_postgres_answers_and_stops_on_sigterm() {
    let Some(db) = TestDb::postgres().await else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    serve_answers_and_stops_on_sigterm(dir.path(), Some(&db.url), "postgres").await;
}

#[test]
fn an_unreachable_or_malformed_database_url_is_one_line_and_a_non_zero_exit() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (url, mentions) in [
        ("postgres://postgres@127.0.0.1:1/chatgate", "cannot open postgres://postgres@127.0.0.1:1/chatgate"),
        ("mysql://localhost/chatgate", "must start with sqlite:// or postgres://"),
        ("postgres://user:secret@[bad/db", "cannot open"),
        ("sqlite://", "names no database file"),
        ("not a url", "must start with"),
    ] {
        let output = run(chatgate(dir.path()).arg("serve").env("CHATGATE_DATABASE_URL", url));
        assert_one_line_failure(&output, mentions);
        assert!(!stderr(&output).contains("secret"), "no password in the message");
    }
}

#[test]
fn check_config_prints_the_effective_configuration_with_secrets_redacted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/chatgate.toml");
    let output = run(chatgate(dir.path())
        .args(["--config", shipped.to_str().expect("utf-8 path"), "check-config"])
        .env("CHATGATE_EVIDENCE_KEY", "a-very-secret-pseudonym-key")
        .env("CHATGATE_DATABASE_URL", "postgres://app:hunter2@db.internal/chatgate")
        .env("CHATGATE_LISTEN", "0.0.0.0:9090"));
    assert!(output.status.success(), "{}", stderr(&output));
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(!printed.contains("a-very-secret") && !printed.contains("hunter2"), "{printed}");
    assert!(printed.contains("pseudonym_key = \"<redacted>\""), "{printed}");
    assert!(printed.contains("postgres://app:redacted@db.internal/chatgate"), "{printed}");
    assert!(printed.contains("listen = \"0.0.0.0:9090\""), "environment overrides apply: {printed}");
}

#[test]
fn check_config_refuses_an_invalid_file_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.toml");
    for (text, mentions) in [
        ("[server]\nlisten_on = \"127.0.0.1:1\"\n", "unknown field `listen_on`"),
        ("[server]\nlisten = \"nowhere\"\n", "server.listen"),
        ("[evidence]\npseudonym_key = \"${CHATGATE_UNSET_KEY}\"\n", "CHATGATE_UNSET_KEY"),
        ("[server\n", "bad.toml"),
    ] {
        std::fs::write(&bad, text).expect("write");
        let output = run(chatgate(dir.path()).args(["--config", "bad.toml", "check-config"]));
        assert_one_line_failure(&output, mentions);
    }
    let missing = run(chatgate(dir.path()).args(["--config", "missing.toml", "check-config"]));
    assert_one_line_failure(&missing, "cannot read missing.toml");
    // CHATGATE_CONFIG names the file as --config does.
    let via_env = run(chatgate(dir.path()).arg("check-config").env("CHATGATE_CONFIG", "missing.toml"));
    assert_one_line_failure(&via_env, "missing.toml");
}

/// A copy of the shipped `config/` and `templates/` folders, to change in a test.
pub(crate) fn demo_layout() -> tempfile::TempDir {
    let root = tempfile::tempdir().expect("tempdir");
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = root.path().join("config");
    std::fs::create_dir_all(&config).expect("config folder");
    for file in ["chatgate.toml", "commands.toml", "directory.toml"] {
        std::fs::copy(shipped.join("config").join(file), config.join(file)).expect("copy");
    }
    for locale in ["en", "pt"] {
        let to = root.path().join("templates/whatsapp").join(locale);
        std::fs::create_dir_all(&to).expect("templates folder");
        for entry in std::fs::read_dir(shipped.join("templates/whatsapp").join(locale)).expect("shipped templates") {
            let entry = entry.expect("entry");
            std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
        }
    }
    root
}

#[test]
fn check_config_names_the_line_of_a_registry_mistake_and_warns_about_demo_secrets() {
    let root = demo_layout();
    let dir = root.path().join("config");
    let commands = std::fs::read_to_string(dir.join("commands.toml")).expect("read");
    let ok = run(chatgate(&dir).args(["--config", "chatgate.toml", "check-config"]));
    assert!(ok.status.success(), "{}", stderr(&ok));
    let err = stderr(&ok);
    assert!(err.contains("registry: 18 commands") && err.contains("templates: whatsapp/en, whatsapp/pt"), "{err}");
    assert!(err.contains("warning: whatsapp.apps.default.app_secret is a demo value"), "{err}");
    let own = run(chatgate(&dir)
        .args(["--config", "chatgate.toml", "check-config"])
        .env("CHATGATE_WHATSAPP_APP_SECRET", "a-real-app-secret"));
    assert!(!stderr(&own).contains("app_secret is a demo value"), "{}", stderr(&own));

    let broken = commands.replace(
        "scopes = [\"accounts:close\"]\nexecutor = \"orders\"",
        "scopes = [\"accounts:close\"]\nexecutor = \"payments\"",
    );
    assert_ne!(broken, commands);
    std::fs::write(dir.join("commands.toml"), &broken).expect("write");
    let refused = run(chatgate(&dir).args(["--config", "chatgate.toml", "check-config"]));
    let line = broken.lines().position(|l| l == "executor = \"payments\"").expect("the broken line") + 1;
    assert_one_line_failure(&refused, &format!("commands.toml:{line}: command `close_account`"));
    assert!(stderr(&refused).contains("executor `payments` is not configured"), "{}", stderr(&refused));
}

#[test]
fn check_config_renders_every_template_and_refuses_a_broken_one() {
    let root = demo_layout();
    let check = || run(chatgate(root.path()).args(["--config", "config/chatgate.toml", "check-config"]));
    let ok = check();
    assert!(ok.status.success(), "{}", stderr(&ok));

    std::fs::write(root.path().join("templates/whatsapp/pt/executed.txt"), "Feito: {{ comando }}").expect("write");
    let broken = check();
    assert_one_line_failure(&broken, "whatsapp/pt/executed");
    std::fs::remove_file(root.path().join("templates/whatsapp/pt/executed.txt")).expect("remove");
    assert!(check().status.success(), "a locale may leave a template to the fallback");
    std::fs::remove_file(root.path().join("templates/whatsapp/en/help.txt")).expect("remove");
    assert_one_line_failure(&check(), "no template `help`");
}

#[tokio::test]
async fn the_simulator_posts_signed_deliveries_to_a_running_gateway() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut server, base) = serving(dir.path(), &[]).await;
    let simulate = |args: &[&str]| {
        let mut command = chatgate(dir.path());
        command.args(["simulate", "whatsapp", "--url", &base]).args(args);
        run(&mut command)
    };
    let sent = simulate(&["--text", "refund 1234 25.00", "--repeat", "2", "--id", "wamid.SIMTEST"]);
    assert!(sent.status.success(), "{}", stderr(&sent));
    let out = String::from_utf8_lossy(&sent.stdout).into_owned();
    assert!(out.contains("#1 200 OK") && out.contains("\"stored\":1"), "{out}");
    assert!(out.contains("#2 200 OK") && out.contains("\"redelivered\":1"), "{out}");
    let button = simulate(&["--button-reply", "order_status:9"]);
    assert!(String::from_utf8_lossy(&button.stdout).contains("\"stored\":1"));
    let status = simulate(&["--status", "wamid.OUT=read"]);
    assert!(String::from_utf8_lossy(&status.stdout).contains("\"statuses\":1"));
    // The other channels, each authenticated with the shipped demo secret.
    let other = |channel: &str, args: &[&str]| {
        let mut command = chatgate(dir.path());
        command.args(["simulate", channel, "--url", &base]).args(args);
        let output = run(&mut command);
        assert!(output.status.success(), "{channel}: {}", stderr(&output));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let text = other("telegram", &["--text", "refund 1234 25.00", "--id", "41", "--repeat", "2"]);
    assert!(text.contains("#1 200 OK {}") && text.contains("#2 200 OK {}"), "{text}");
    let tap = other("telegram", &["--button", "cg:no:0", "--id", "42"]);
    assert!(tap.contains("\"method\":\"answerCallbackQuery\""), "{tap}");
    assert!(other("slack", &["--text", "refund 1234 25.00", "--repeat", "2"]).contains("#2 200 OK {}"));
    assert!(other("slack", &["--button", "cg:no:0"]).contains("#1 200 OK"));
    let messenger = other("messenger", &["--text", "refund 1234 25.00", "--id", "m_SIMTEST", "--repeat", "2"]);
    assert!(messenger.contains("\"stored\":1") && messenger.contains("\"stored\":0"), "{messenger}");
    let instagram =
        other("instagram", &["--text", "hello", "--page", "17840000000000001", "--from", "17850000000000001"]);
    assert!(instagram.contains("\"stored\":1"), "{instagram}");
    // LINE answers a webhook with an empty 200; the same event again is a redelivery.
    let line = other("line", &["--text", "refund 1234 25.00", "--id", "01JSIMLINE", "--repeat", "2"]);
    assert!(line.contains("#1 200 OK") && line.contains("#2 200 OK"), "{line}");
    assert!(other("line", &["--button", "cg:no:0"]).contains("#1 200 OK"));
    assert_eq!(terminate(&mut server).code(), Some(0));
}

#[test]
fn migrate_creates_and_migrates_a_fresh_sqlite_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = run(chatgate(dir.path()).arg("migrate").env("CHATGATE_DATABASE_URL", "sqlite://state/gate.db"));
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("migrations applied (sqlite)"));
    assert!(dir.path().join("state/gate.db").is_file());
}

#[tokio::test]
async fn audit_verify_passes_an_intact_database_and_names_the_first_broken_link() {
    let db = TestDb::sqlite().await;
    drive(&db, refund("demo", "1234", "25.00", "m"), path_to(State::Executed)).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let verify = || run(chatgate(dir.path()).args(["audit", "verify"]).env("CHATGATE_DATABASE_URL", &db.url));

    let intact = verify();
    assert!(intact.status.success(), "{}", stderr(&intact));
    assert!(String::from_utf8_lossy(&intact.stdout).contains("chain demo: intact, 7 artifacts"));

    let mut conn = db.raw().await;
    conn.execute("DROP TRIGGER evidence_no_update").await.expect("drop guard");
    conn.execute("UPDATE evidence SET body = REPLACE(body, '\"executed\"', '\"failed\"') WHERE seq = 7")
        .await
        .expect("tamper");
    let broken = verify();
    assert_eq!(broken.status.code(), Some(1));
    let err = stderr(&broken);
    assert!(err.contains("chain `demo` breaks at #7") && err.contains("altered"), "{err}");
    assert!(String::from_utf8_lossy(&broken.stdout).contains("chain demo: BROKEN"));
}

#[test]
fn token_mint_and_stepup_mint_print_tokens_the_gateway_accepts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = run(chatgate(dir.path()).args([
        "token",
        "mint",
        "--tenant",
        "demo",
        "--scope",
        "commands:read recovery:write",
    ]));
    assert!(output.status.success(), "{}", stderr(&output));
    let token = String::from_utf8(output.stdout).expect("utf-8").trim().to_owned();
    let config =
        chatgate::config::Config::parse(Path::new("chatgate.toml"), chatgate::config::SHIPPED_CONFIG, &|_| None)
            .expect("shipped configuration");
    let settings = chatgate::service::Settings::with_shipped_registry(config).expect("settings");
    let principal = settings.security.authenticator.authenticate(&token).expect("the gateway accepts it");
    assert_eq!(principal.tenant.as_str(), "demo");
    assert_eq!(principal.scopes.iter().map(String::as_str).collect::<Vec<_>>(), ["commands:read", "recovery:write"]);

    let command = uuid::Uuid::now_v7().to_string();
    let output = run(chatgate(dir.path()).args([
        "stepup",
        "mint",
        "--actor",
        "15550000002",
        "--command",
        &command,
        "--idempotency-key",
        "k1",
    ]));
    assert!(output.status.success(), "{}", stderr(&output));
    let token = String::from_utf8(output.stdout).expect("utf-8").trim().to_owned();
    let claims = chatgate::service::security::keys::unverified_claims(&token);
    assert_eq!(
        (claims["sub"].as_str(), claims["command_id"].as_str(), claims["idempotency_key"].as_str()),
        (Some("15550000002"), Some(command.as_str()), Some("k1"))
    );
    assert!(claims["exp"].as_i64().unwrap_or(0) - claims["iat"].as_i64().unwrap_or(0) <= 600);

    // Without a key, the command is looked up, and an unknown one is a one-line error.
    let output = run(chatgate(dir.path()).args(["stepup", "mint", "--actor", "15550000002", "--command", &command]));
    assert_one_line_failure(&output, "no command");
}

/// Issue 44.2: the shipped production example protects `/metrics` by default — it does not start
/// without `CHATGATE_METRICS_TOKEN` — and holds no demo value once its variables are set.
#[test]
fn the_production_example_needs_a_metrics_token_and_has_no_demo_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, r#"{"keys": []}"#).expect("jwks");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/production.toml");
    let environment = [
        ("CHATGATE_PUBLIC_BASE_URL", "https://gateway.example"),
        ("CHATGATE_DATABASE_URL", "sqlite://data/chatgate.db"),
        ("CHATGATE_EVIDENCE_KEY", "a-key-of-at-least-sixteen-bytes"),
        ("CHATGATE_WHATSAPP_ACCESS_TOKEN", "EAAG-access"),
        ("CHATGATE_WHATSAPP_APP_SECRET", "an-app-secret"),
        ("CHATGATE_WHATSAPP_VERIFY_TOKEN", "a-verify-token"),
        ("CHATGATE_API_TOKEN_ISSUER", "https://idp.example"),
        ("CHATGATE_API_TOKEN_JWKS_FILE", jwks.to_str().expect("utf-8 path")),
        ("CHATGATE_STEPUP_ISSUER", "https://idp.example/step-up"),
        ("CHATGATE_STEPUP_SECRET", "a-step-up-secret-of-32-bytes-at-least"),
        ("CHATGATE_ORDERS_EXECUTOR_URL", "https://orders.example/commands"),
        ("CHATGATE_ORDERS_EXECUTOR_SECRET", "whsec_c2VjcmV0LW9mLW9yZGVycw=="),
    ];
    let check = |with_token: bool| {
        let mut command = chatgate(dir.path());
        command.args(["--config", example.to_str().expect("utf-8 path"), "check-config"]).envs(environment);
        if with_token {
            command.env("CHATGATE_METRICS_TOKEN", "a-scraper-token");
        }
        run(&mut command)
    };
    assert_one_line_failure(&check(false), "CHATGATE_METRICS_TOKEN");
    let output = check(true);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!stderr(&output).contains("demo value"), "{}", stderr(&output));
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(printed.contains("[metrics]\ntoken = \"<redacted>\""), "{printed}");
}
