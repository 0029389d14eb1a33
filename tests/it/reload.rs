//! Issue 28.5: changes without a restart. `POST /v1/reload` (and `SIGHUP`) read the registry, the
//! templates and the directory file again and swap them in; a broken file is refused naming its
//! line and the running configuration stays; a command keeps the registry entry it was admitted
//! under, recorded in its envelope and its evidence.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fake_graph::{FakeGraph, sending_through, text_of};
use crate::helpers::{CUSTOMER, Meta, TestApp, TestDb, api_token, on_both_backends, test_directory};

on_both_backends!(
    a_reload_swaps_the_files_and_a_broken_file_changes_nothing,
    a_command_keeps_the_registry_entry_it_was_admitted_under,
);

/// The registry, the test directory and the reply templates in a folder of their own.
struct Folder {
    dir: tempfile::TempDir,
}

impl Folder {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("folder");
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        std::fs::copy(repo.join("config/commands.toml"), dir.path().join("commands.toml")).expect("commands");
        std::fs::write(dir.path().join("directory.toml"), test_directory()).expect("directory");
        copy_dir(&repo.join("templates/whatsapp"), &dir.path().join("templates/whatsapp"));
        Self { dir }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn edit(&self, name: &str, change: impl FnOnce(String) -> String) {
        let text = std::fs::read_to_string(self.file(name)).expect("read");
        std::fs::write(self.file(name), change(text)).expect("write");
    }

    async fn spawn(&self, db: &TestDb, config: chatgate::config::Config) -> TestApp {
        let mut config = config;
        config.registry.templates = "templates".into();
        let env = |name: &str| std::env::var(name).ok();
        let files = chatgate::service::settings::Files::at(self.dir.path());
        let settings = chatgate::service::Settings::from_files(config, files, &env).expect("settings");
        crate::helpers::spawn_app_with_settings(db, settings).await
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("folder");
    for entry in std::fs::read_dir(from).expect("templates").flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

async fn reload(app: &TestApp, token: &str) -> (StatusCode, Value) {
    let response = app.client.post(app.url("/v1/reload")).bearer_auth(token).send().await.expect("reload");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn last_reply(graph: &FakeGraph, count: usize) -> String {
    let sent = graph.wait_for(count, Duration::from_secs(10)).await;
    sent.last().map(|r| text_of(&r.body)).unwrap_or_default()
}

async fn a_reload_swaps_the_files_and_a_broken_file_changes_nothing(db: &TestDb) {
    let (folder, graph) = (Folder::new(), FakeGraph::start().await);
    let app = folder.spawn(db, sending_through(&db.config, &graph)).await;
    let meta = Meta::new(&app, db);
    let token = api_token(db, "demo", "ops-1", "config:reload directory:read");
    meta.text("wamid.R1", CUSTOMER, "order status 41").await;
    assert!(last_reply(&graph, 1).await.starts_with("Done: "));

    // A template, a person and a command changed: in place at once, without a restart.
    folder.edit("templates/whatsapp/en/executed.txt", |t| t.replacen("Done: ", "All done: ", 1));
    folder.edit("directory.toml", |t| {
        format!("{t}\n[tenants.demo.actors.15553330003]\nname = \"Filed later\"\nroles = [\"customer\"]\n")
    });
    folder.edit("commands.toml", |t| t.replace("\"order status {order_id:id}\"", "\"where is {order_id:id}\""));
    let (status, done) = reload(&app, &token).await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(done["people_written"], 1, "{done}");
    meta.text("wamid.R2", "15553330003", "where is 41").await;
    assert!(last_reply(&graph, 2).await.starts_with("All done: "), "the new template, the new person, the new words");

    // Broken files are refused, each naming its line; what runs stays.
    let good = std::fs::read_to_string(folder.file("commands.toml")).expect("commands");
    folder.edit("commands.toml", |t| format!("{t}\n[commands.broken\n"));
    let broken_line = good.lines().count() + 2;
    let (status, problem) = reload(&app, &token).await;
    assert_eq!((status, problem["code"].clone()), (StatusCode::UNPROCESSABLE_ENTITY, json!("invalid_configuration")));
    assert!(problem["detail"].as_str().is_some_and(|d| d.contains(&format!(":{broken_line}"))), "{problem}");
    std::fs::write(folder.file("commands.toml"), &good).expect("restore");
    folder.edit("directory.toml", |t| t.replace("roles = [\"customer\"]\n", "roles = [\"ghost\"]\n"));
    let (status, problem) = reload(&app, &token).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let detail = problem["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("line ") && detail.contains("ghost"), "{problem}");
    meta.text("wamid.R3", "15553330003", "where is 41").await;
    assert!(last_reply(&graph, 3).await.starts_with("All done: "), "the running configuration stayed");
    // The deployment's scope, not a tenant's.
    let tenant_token = api_token(db, "demo", "ops-1", "directory:write commands:read");
    assert_eq!(reload(&app, &tenant_token).await.0, StatusCode::FORBIDDEN);
    app.stop().await.expect("stop");
}

async fn a_command_keeps_the_registry_entry_it_was_admitted_under(db: &TestDb) {
    let folder = Folder::new();
    let app = folder.spawn(db, db.config.clone()).await;
    let meta = Meta::new(&app, db);
    let token = api_token(db, "demo", "ops-1", "config:reload");
    meta.text("wamid.V1", CUSTOMER, "refund 77 5.00").await;
    let before = crate::helpers::command_of_message(db, "wamid.V1").await;
    let tenant = crate::helpers::tenant("demo");
    let first = db.store.commands().get(&tenant, before).await.expect("read").expect("command");
    let first_version = first.envelope.registry_version.clone().expect("a registry version");
    // Refunds now take a scope nobody holds.
    folder.edit("commands.toml", |t| t.replace("scopes = [\"orders:refund\"]", "scopes = [\"orders:refund_v2\"]"));
    let (status, done) = reload(&app, &token).await;
    assert_eq!(status, StatusCode::OK);
    assert_ne!(done["registry_version"], json!(first_version));
    // The refund asked before the reload is authorized under its own entry; a new one is refused.
    meta.text("wamid.V2", CUSTOMER, "yes").await;
    assert_eq!(crate::helpers::settled(db, before).await, "executed");
    meta.text("wamid.V3", CUSTOMER, "refund 78 5.00").await;
    let after = crate::helpers::command_of_message(db, "wamid.V3").await;
    assert_eq!(crate::helpers::settled(db, after).await, "rejected");
    let second = db.store.commands().get(&tenant, after).await.expect("read").expect("command");
    assert_eq!(
        second.envelope.registry_version.as_ref(),
        done["registry_version"].as_str().map(str::to_owned).as_ref()
    );
    let accepted = db.store.evidence().for_command("demo", before).await.expect("evidence");
    let recorded = accepted.iter().find(|a| a.kind == "command.accepted").expect("accepted");
    assert_eq!(recorded.body["decision"]["registry_version"], json!(first_version), "{}", recorded.body);
    app.stop().await.expect("stop");
}

/// The real process reloads on `SIGHUP`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sighup_reloads_the_running_process() {
    let db = TestDb::sqlite().await;
    let config = crate::process::ConfigDir::shipped(|c| c);
    let gateway = crate::process::start(&config.path(), &[("CHATGATE_DATABASE_URL", db.url.as_str())]).await;
    let directory = config.dir.path().join("directory.toml");
    let text = std::fs::read_to_string(&directory).expect("directory");
    let added = format!("{text}\n[tenants.demo.actors.15554440004]\nname = \"Hung up\"\nroles = [\"customer\"]\n");
    std::fs::write(&directory, added).expect("write");
    let listed = || db.count("SELECT COUNT(*) FROM directory_people WHERE actor_id = $1", "15554440004");
    assert_eq!(listed().await, 0);
    let hangup = std::process::Command::new("kill").arg("-HUP").arg(gateway.pid().to_string()).status();
    assert!(hangup.expect("kill").success());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while listed().await == 0 {
        assert!(std::time::Instant::now() < deadline, "SIGHUP did not reload the directory");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(reqwest::get(gateway.url("/readyz")).await.expect("ready").status().is_success(), "still serving");
}
