//! The gateway under test, as a process: its files in a folder of the scenario's own (the
//! shipped configuration with the scenario's keys set, the shipped registry with its changes, the
//! shipped templates), a database of its own (a SQLite file there, or a fresh PostgreSQL database
//! next to the one `--database-url` names, dropped afterwards), started, killed and started again
//! as the scenario says. It listens on a port it chooses and says which in its log.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use sqlx::{AssertSqlSafe, Connection, Executor};

use crate::config::{SHIPPED_COMMANDS, SHIPPED_CONFIG, SHIPPED_DIRECTORY};
use crate::service::replies::templates::Templates;

/// A scenario's files, database and environment.
pub struct Workspace {
    pub dir: tempfile::TempDir,
    pub env: Vec<(String, String)>,
    /// A PostgreSQL database to drop at the end: (the server's admin URL, its name).
    dropping: Option<(String, String)>,
}

impl Workspace {
    /// Writes the scenario's files and makes its database.
    pub async fn create(
        config: &BTreeMap<String, Value>,
        registry: &BTreeMap<String, Value>,
        database_url: Option<&str>,
        env: Vec<(String, String)>,
    ) -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("a folder: {e}"))?;
        let mut settings = parse(SHIPPED_CONFIG)?;
        set(&mut settings, "registry.templates", &Value::from("templates"))?;
        // The runner reads the API often while it waits, and scenarios repeat messages on
        // purpose: rate limits stay out of the way unless a scenario sets them.
        let generous = serde_json::json!({"per_minute": 100_000, "burst": 10_000});
        for limit in ["rate_limits.api_client", "rate_limits.actor"] {
            set(&mut settings, limit, &generous)?;
        }
        for (key, value) in config {
            set(&mut settings, key, value)?;
        }
        let mut commands = parse(SHIPPED_COMMANDS)?;
        for (key, value) in registry {
            set(&mut commands, key, value)?;
        }
        write(dir.path(), "chatgate.toml", &settings.to_string())?;
        write(dir.path(), "commands.toml", &commands.to_string())?;
        write(dir.path(), "directory.toml", SHIPPED_DIRECTORY)?;
        for (name, text) in Templates::shipped_sources() {
            write(&dir.path().join("templates"), &format!("{name}.txt"), text)?;
        }
        let (url, dropping) = match database_url {
            None => (format!("sqlite://{}/chatgate.db", dir.path().display()), None),
            Some(admin) => {
                let name = format!("conformance_{}", uuid::Uuid::now_v7().simple());
                let mut connection = sqlx::PgConnection::connect(admin).await.map_err(|e| format!("{admin}: {e}"))?;
                let create = format!("CREATE DATABASE {name}");
                connection.execute(AssertSqlSafe(create)).await.map_err(|e| format!("CREATE DATABASE: {e}"))?;
                let _ = connection.close().await;
                let mut url = url::Url::parse(admin).map_err(|e| format!("{admin}: {e}"))?;
                url.set_path(&name);
                (url.to_string(), Some((admin.to_owned(), name)))
            }
        };
        let mut env = env;
        env.push(("CHATGATE_DATABASE_URL".into(), url));
        Ok(Self { dir, env, dropping })
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("chatgate.toml")
    }

    /// The scenario's gateway, its log kept beside its configuration (`--keep` leaves it there).
    pub async fn start(&self, bin: &Path) -> Result<Gateway, String> {
        Gateway::start(bin, &self.config_path(), &self.env, Some(self.dir.path().join("gateway.log"))).await
    }

    pub fn env_var(&self, name: &str) -> Option<String> {
        self.env.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
    }

    /// Leaves the folder and the database for a look: says where they are.
    pub fn keep(self) -> String {
        let url = self.env_var("CHATGATE_DATABASE_URL").unwrap_or_default();
        format!("kept {} (gateway.log there), database {url}", self.dir.keep().display())
    }

    /// Drops the PostgreSQL database (the folder goes with `dir`).
    pub async fn remove(self) {
        if let Some((admin, name)) = &self.dropping
            && let Ok(mut connection) = sqlx::PgConnection::connect(admin).await
        {
            let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
            let _ = connection.execute(AssertSqlSafe(drop)).await;
            let _ = connection.close().await;
        }
    }
}

fn parse(text: &str) -> Result<toml::Table, String> {
    text.parse::<toml::Table>().map_err(|e| format!("the shipped file: {e}"))
}

fn write(dir: &Path, name: &str, text: &str) -> Result<(), String> {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Sets a dotted key of a TOML table (tables made as needed) to a JSON value.
/// Sets `key` (dotted; a number indexes an array: `commands.refund.approvals.0.within`) to
/// `value`; `null` removes it.
fn set(table: &mut toml::Table, key: &str, value: &Value) -> Result<(), String> {
    let parts: Vec<&str> = key.split('.').collect();
    let Some((last, path)) = parts.split_last() else { return Err(format!("`{key}` is not a key")) };
    let mut at = table;
    let mut path = path.iter().peekable();
    while let Some(part) = path.next() {
        let entry = at.entry(part.to_owned()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        // `name.0`: the array's item.
        let index: Option<usize> = path.peek().and_then(|p| p.parse().ok());
        let entry = match (entry, index) {
            (toml::Value::Array(items), Some(index)) => {
                path.next();
                items.get_mut(index).ok_or_else(|| format!("`{key}`: no item {index}"))?
            }
            (entry, _) => entry,
        };
        at = entry.as_table_mut().ok_or_else(|| format!("`{key}`: `{part}` is not a table"))?;
    }
    if value.is_null() {
        at.remove(*last);
        return Ok(());
    }
    let value = toml::Value::try_from(value).map_err(|e| format!("`{key}`: {e}"))?;
    at.insert((*last).to_owned(), value);
    Ok(())
}

/// A running gateway (`chatgate serve` as a process: the runner's, and the tests' that need the
/// real binary); killed when dropped.
pub struct Gateway {
    child: Child,
    pub base: String,
}

impl Gateway {
    /// Starts `bin serve` with `config` and `env` on a port it chooses (read from its log, which
    /// is copied to `log` when given) and waits until `/readyz` answers 200.
    pub async fn start(
        bin: &Path,
        config: &Path,
        env: &[(String, String)],
        log: Option<PathBuf>,
    ) -> Result<Self, String> {
        let mut command = Command::new(bin);
        command.arg("--config").arg(config).arg("serve");
        command.env("CHATGATE_LISTEN", "127.0.0.1:0").env("NO_COLOR", "1").env("RUST_LOG", "warn,chatgate=info");
        command.envs(env.iter().map(|(n, v)| (n.as_str(), v.as_str())));
        command.stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = command.spawn().map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let stderr = std::io::BufReader::new(child.stderr.take().ok_or("no log")?);
        let (said, address) = std::sync::mpsc::channel();
        let mut kept = log.and_then(|path| std::fs::OpenOptions::new().create(true).append(true).open(path).ok());
        std::thread::spawn(move || {
            for line in std::io::BufRead::lines(stderr).map_while(Result::ok) {
                if let Some(file) = kept.as_mut() {
                    let _ = std::io::Write::write_all(file, format!("{line}\n").as_bytes());
                }
                if let Some(at) = line.split("chatgate listening addr=").nth(1) {
                    let _ = said.send(Ok(at.split_whitespace().next().unwrap_or_default().to_owned()));
                } else if line.starts_with("chatgate: error") {
                    let _ = said.send(Err(line));
                }
            }
        });
        let waited = tokio::task::spawn_blocking(move || address.recv_timeout(Duration::from_secs(30)));
        let address = match waited.await {
            Ok(Ok(Ok(address))) => address,
            Ok(Ok(Err(line))) => return Err(format!("the gateway did not start: {line}")),
            _ => return Err("the gateway did not say where it listens within 30 s".into()),
        };
        let gateway = Self { child, base: format!("http://{address}") };
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while !client.get(format!("{}/readyz", gateway.base)).send().await.is_ok_and(|r| r.status().is_success()) {
            if Instant::now() > deadline {
                return Err("the gateway did not become ready within 30 s".into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(gateway)
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The process's id (to send it a signal).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and reaped.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.kill();
    }
}
