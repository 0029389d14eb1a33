//! Issue 49: `server.cpus` keeps every thread of the gateway on the cores it names — those
//! started before `serve` read it (the server's runtime) and those started after (the runtime
//! behind the inbox, SQLite's connection threads) — and a list of cores the process may not use
//! stops the start with an error that names the setting. `ingest.background_cpus` keeps the
//! runtime behind the inbox and SQLite's connection threads to its cores, the server's free.

use crate::process::{ConfigDir, Gateway};

/// Each thread of `pid`: its name and the cores it may run on, as Linux writes them.
fn threads_cores(pid: u32) -> Vec<(String, String)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the gateway's threads");
    let mut threads = vec![];
    for task in tasks.map(|task| task.expect("a thread").path()) {
        let Ok(status) = std::fs::read_to_string(task.join("status")) else { continue };
        let field = |name: &str| status.lines().find_map(|line| line.strip_prefix(name)).map(|v| v.trim().to_owned());
        threads.push((field("Name:").unwrap_or_default(), field("Cpus_allowed_list:").unwrap_or_default()));
    }
    threads
}

async fn started(cpus: &str) -> (ConfigDir, Result<Gateway, String>) {
    started_with(&[("CHATGATE_CPUS", cpus)]).await
}

async fn started_with(settings: &[(&str, &str)]) -> (ConfigDir, Result<Gateway, String>) {
    let config = ConfigDir::shipped(|c| c);
    let database = format!("sqlite://{}/chatgate.db", config.dir.path().display());
    let mut env = vec![("CHATGATE_DATABASE_URL".to_owned(), database)];
    env.extend(settings.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())));
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_chatgate"));
    let gateway = Gateway::start(bin, &config.path(), &env, None).await;
    (config, gateway)
}

/// The cores this test may run on, as Linux writes them (core 0 is not in every machine's set).
fn allowed_cores() -> String {
    let status = std::fs::read_to_string("/proc/self/status").expect("this process's status");
    let allowed = status.lines().find_map(|line| line.strip_prefix("Cpus_allowed_list:")).expect("its cores");
    allowed.trim().to_owned()
}

fn first_allowed_core() -> String {
    allowed_cores().split([',', '-']).next().expect("a core").to_owned()
}

fn last_allowed_core() -> String {
    allowed_cores().rsplit([',', '-']).next().expect("a core").to_owned()
}

#[tokio::test]
async fn every_thread_of_the_gateway_runs_on_the_cores_named() {
    let core = first_allowed_core();
    let (_config, gateway) = started(&core).await;
    let mut gateway = gateway.expect("the gateway on one core");
    // Ready: the runtime behind the inbox and the main file's connections (opened there) run.
    let said = reqwest::Client::new().get(gateway.url("/readyz")).send().await.expect("ready");
    assert!(said.status().is_success());
    let threads = threads_cores(gateway.pid());
    let names: Vec<&str> = threads.iter().map(|(name, _)| name.as_str()).collect();
    assert!(names.iter().any(|n| n.starts_with("chatgate-behind")), "the runtime behind the inbox: {names:?}");
    assert!(names.iter().any(|n| n.starts_with("sqlx-sqlite")), "SQLite's connection threads: {names:?}");
    let elsewhere: Vec<_> = threads.iter().filter(|(_, cores)| *cores != core).collect();
    assert!(elsewhere.is_empty(), "threads not kept to core {core}: {elsewhere:?}");
    gateway.kill();
}

#[tokio::test]
async fn cores_the_process_may_not_use_stop_the_start_with_the_setting_named() {
    let (_config, gateway) = started("1023").await;
    let error = gateway.err().expect("no start on a core the machine does not have");
    assert!(error.contains("server.cpus = \"1023\""), "{error}");
    let (_config, gateway) = started("0-1,zero").await;
    let error = gateway.err().expect("no start with a list that is not one");
    assert!(error.contains("`zero` is not a core number"), "{error}");
}

#[tokio::test]
async fn the_work_behind_the_inbox_runs_on_its_own_cores_and_the_server_on_all() {
    let (all, core) = (allowed_cores(), last_allowed_core());
    let (_config, gateway) = started_with(&[("CHATGATE_BACKGROUND_CPUS", &core)]).await;
    let mut gateway = gateway.expect("the gateway with its background on one core");
    let said = reqwest::Client::new().get(gateway.url("/readyz")).send().await.expect("ready");
    assert!(said.status().is_success());
    let threads = threads_cores(gateway.pid());
    let on = |prefix: &str| -> Vec<&str> {
        threads.iter().filter(|(name, _)| name.starts_with(prefix)).map(|(_, cores)| cores.as_str()).collect()
    };
    // Its threads, and the main file's connections, opened from it, with them.
    let behind = on("chatgate-behind");
    assert!(!behind.is_empty() && behind.iter().all(|cores| *cores == core), "{threads:?}");
    let sqlite = on("sqlx-sqlite");
    assert!(sqlite.contains(&core.as_str()), "no SQLite connection on core {core}: {threads:?}");
    // The server's threads keep every core the gateway has: the inbox's connections, opened by it.
    assert!(sqlite.iter().all(|cores| *cores == core || *cores == all), "{threads:?}");
    let server = on("tokio-rt");
    assert!(!server.is_empty() && server.iter().all(|cores| *cores == all), "server kept from {all}: {threads:?}");
    gateway.kill();
}

#[tokio::test]
async fn background_cores_the_gateway_does_not_run_on_stop_the_start_with_the_setting_named() {
    let first = first_allowed_core();
    let other = if first == "0" { "1" } else { "0" };
    let (_config, gateway) = started_with(&[("CHATGATE_CPUS", &first), ("CHATGATE_BACKGROUND_CPUS", other)]).await;
    let error = gateway.err().expect("no background on a core the gateway is kept from");
    assert!(error.contains(&format!("ingest.background_cpus = \"{other}\"")), "{error}");
    assert!(error.contains(&format!("core {other} is not among those the gateway runs on")), "{error}");
}
