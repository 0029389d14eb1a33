//! One typed configuration, read from TOML with `${VAR}` interpolation and environment
//! overrides, checked once at start-up so that a bad value stops the process with a clear line.

mod interpolate;
mod secret;
mod security;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use interpolate::{InterpolationError, interpolate};
pub use secret::{BackendKind, DatabaseUrl, Secret};
pub use security::{
    AuthConfig, HookMapping, HooksConfig, IssuerConfig, Rate, RateLimitConfig, StandardMessage, StandardSource,
    StepUpConfig,
};

/// The shipped configuration files, used when the default path has no file (so that the binary
/// runs the demo from any folder).
pub const SHIPPED_CONFIG: &str = include_str!("../../config/chatgate.toml");
pub const SHIPPED_COMMANDS: &str = include_str!("../../config/commands.toml");
pub const SHIPPED_DIRECTORY: &str = include_str!("../../config/directory.toml");

/// Where the configuration is read from when neither `--config` nor `CHATGATE_CONFIG` says.
pub const DEFAULT_CONFIG_PATH: &str = "config/chatgate.toml";

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub server: ServerConfig,
    #[serde(default)]
    pub storage: StorageConfig,
    #[serde(default)]
    pub idempotency: IdempotencyConfig,
    #[serde(default)]
    pub evidence: EvidenceConfig,
    #[serde(default)]
    pub registry: RegistryFiles,
    #[serde(default)]
    pub whatsapp: WhatsAppConfig,
    #[serde(default)]
    pub twilio: TwilioConfig,
    /// The systems that do the work, by name; the registry routes each command to one.
    #[serde(default)]
    pub executors: BTreeMap<String, ExecutorConfig>,
    #[serde(default)]
    pub outbound: OutboundConfig,
    #[serde(default)]
    pub auth: AuthConfig,
    #[serde(default)]
    pub stepup: StepUpConfig,
    #[serde(default)]
    pub rate_limits: RateLimitConfig,
    #[serde(default)]
    pub hooks: HooksConfig,
    /// Standard Webhooks senders, by source name.
    #[serde(default)]
    pub standard_webhooks: BTreeMap<String, StandardSource>,
}

/// Where the registry and the directory are, relative to the configuration file's folder.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RegistryFiles {
    pub commands: PathBuf,
    pub directory: PathBuf,
    /// The folder of reply templates (`{channel}/{locale}/{name}.txt`).
    pub templates: PathBuf,
}

impl Default for RegistryFiles {
    fn default() -> Self {
        Self { commands: "commands.toml".into(), directory: "directory.toml".into(), templates: "../templates".into() }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WhatsAppConfig {
    /// The app `POST /webhooks/whatsapp` (without `/{app}`) uses.
    pub default_app: String,
    pub apps: BTreeMap<String, WhatsAppApp>,
    /// Where prompts and replies are sent: Meta's Graph API (`CHATGATE_WHATSAPP_API_BASE`).
    pub api_base: String,
    pub api_version: String,
    /// The Cloud API access token (`CHATGATE_WHATSAPP_ACCESS_TOKEN`). Without one, messages stay
    /// queued in the outbox and are sent once a token is configured.
    pub access_token: Secret,
}

impl Default for WhatsAppConfig {
    fn default() -> Self {
        Self {
            default_app: "default".into(),
            apps: BTreeMap::new(),
            api_base: "https://graph.facebook.com".into(),
            api_version: "v21.0".into(),
            access_token: Secret::new(""),
        }
    }
}

/// Twilio Messaging (WhatsApp and SMS): `POST /webhooks/twilio` and the Messages API.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TwilioConfig {
    /// Checks `X-Twilio-Signature` and, with the account SID, authenticates sends
    /// (`CHATGATE_TWILIO_AUTH_TOKEN`). Empty turns the webhook off (404).
    pub auth_token: Secret,
    /// The account replies are sent from (`CHATGATE_TWILIO_ACCOUNT_SID`). Empty: replies that
    /// the webhook's TwiML answer does not carry wait in the outbox until it is set.
    pub account_sid: String,
    /// Where the Messages API is (`CHATGATE_TWILIO_API_BASE`; a stand-in in tests).
    pub api_base: String,
    /// How long replies queued while Twilio waits for the webhook's answer are held for that
    /// answer (TwiML) before the outbox sends them through the Messages API instead.
    pub inline_hold_ms: u64,
}

impl Default for TwilioConfig {
    fn default() -> Self {
        Self {
            auth_token: Secret::new(""),
            account_sid: String::new(),
            api_base: "https://api.twilio.com".into(),
            inline_hold_ms: 5_000,
        }
    }
}

/// How messages to people leave the outbox, and how long confirmations are watched.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutboundConfig {
    /// How often the sender looks for due messages.
    pub poll_interval_ms: u64,
    /// How long a claimed message is held before another worker may take it.
    pub lease_ms: u64,
    /// Messages claimed at once.
    pub batch: i64,
    /// One request to the provider, connection included.
    pub request_timeout_ms: u64,
    /// Attempts in all before a message is given up (and kept, with the error, as `dead`).
    pub max_attempts: u32,
    pub backoff_initial_ms: u64,
    pub backoff_max_ms: u64,
    /// How often confirmations that ran out are expired (their commands canceled).
    pub confirmation_sweep_ms: u64,
}

impl Default for OutboundConfig {
    fn default() -> Self {
        Self {
            poll_interval_ms: 250,
            lease_ms: 30_000,
            batch: 32,
            request_timeout_ms: 10_000,
            max_attempts: 10,
            backoff_initial_ms: 1_000,
            backoff_max_ms: 300_000,
            confirmation_sweep_ms: 1_000,
        }
    }
}

impl OutboundConfig {
    pub fn retry_policy(&self) -> crate::domain::retry::RetryPolicy {
        crate::domain::retry::RetryPolicy {
            max_attempts: self.max_attempts,
            initial: Duration::from_millis(self.backoff_initial_ms),
            max: Duration::from_millis(self.backoff_max_ms),
        }
    }
}

/// One Meta app: the secret that signs its webhooks and the token of its verification handshake.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WhatsAppApp {
    pub app_secret: Secret,
    pub verify_token: Secret,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutorConfig {
    /// `https://...` (or `http://`), `builtin:echo` (succeeds at once, echoing the args) or
    /// `builtin:fail[:CODE]` (fails at once); for demos and tests.
    pub url: String,
    /// The Standard Webhooks signing secret (`whsec_` + base64).
    pub secret: Option<Secret>,
    /// One HTTP attempt, connection included.
    #[serde(default = "defaults::executor_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// Attempts in all before the dispatch closes as `DELIVERY_TIMEOUT`.
    #[serde(default = "defaults::executor_max_attempts")]
    pub max_attempts: u32,
    #[serde(default = "defaults::executor_backoff_initial_ms")]
    pub backoff_initial_ms: u64,
    #[serde(default = "defaults::executor_backoff_max_ms")]
    pub backoff_max_ms: u64,
    /// How long a dispatch may stay undelivered, retries and restarts included, before it closes
    /// as `DELIVERY_TIMEOUT` (a durable timer).
    #[serde(default = "defaults::executor_delivery_timeout_ms")]
    pub delivery_timeout_ms: u64,
    /// RabbitMQ executors: the topic exchange (default `bloodbank.events.v1`), the agent name in
    /// routing keys (default: the executor's name) and the gateway's durable response queue
    /// (default `chatgate.responses`).
    #[serde(default)]
    pub exchange: Option<String>,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub queue: Option<String>,
    /// Where an HTTP executor is told that a command it has was canceled by an operator (POST,
    /// signed like a dispatch); none means it is not told.
    #[serde(default)]
    pub cancel_url: Option<String>,
    /// A RabbitMQ agent that understands `command.{agent}.{action}.cancel`.
    #[serde(default)]
    pub announce_cancel: bool,
}

impl ExecutorConfig {
    pub fn retry_policy(&self) -> crate::domain::retry::RetryPolicy {
        crate::domain::retry::RetryPolicy {
            max_attempts: self.max_attempts,
            initial: Duration::from_millis(self.backoff_initial_ms),
            max: Duration::from_millis(self.backoff_max_ms),
        }
    }
}

mod defaults {
    pub fn executor_request_timeout_ms() -> u64 {
        10_000
    }
    pub fn executor_max_attempts() -> u32 {
        8
    }
    pub fn executor_backoff_initial_ms() -> u64 {
        500
    }
    pub fn executor_backoff_max_ms() -> u64 {
        60_000
    }
    pub fn executor_delivery_timeout_ms() -> u64 {
        600_000
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// `CHATGATE_LISTEN` overrides it.
    pub listen: String,
    /// A request still running after this is answered 503 (the caller should retry).
    pub request_timeout_ms: u64,
    /// Larger request bodies are refused with 413 before they are read.
    pub body_limit_bytes: usize,
    /// How long in-flight requests and workers get to finish after SIGTERM.
    pub shutdown_grace_ms: u64,
    /// The URL callers see (`CHATGATE_PUBLIC_BASE_URL`): behind a proxy it differs from the
    /// listening address, and Twilio signs the URL it called.
    pub public_base_url: String,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            request_timeout_ms: 15_000,
            body_limit_bytes: 1024 * 1024,
            shutdown_grace_ms: 20_000,
            public_base_url: "http://127.0.0.1:8080".into(),
        }
    }
}

impl ServerConfig {
    pub fn listen_addr(&self) -> Result<SocketAddr, ConfigError> {
        self.listen
            .parse()
            .map_err(|_| ConfigError::Invalid(format!("server.listen `{}` is not an address:port", self.listen)))
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }

    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_millis(self.shutdown_grace_ms)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageConfig {
    /// `sqlite://path` (created when missing) or `postgres://...`; `CHATGATE_DATABASE_URL`
    /// overrides it.
    pub database_url: DatabaseUrl,
    pub max_connections: u32,
    /// How long a request waits for a free connection before the store reports itself down.
    pub acquire_timeout_ms: u64,
    /// How long SQLite waits on a locked database before giving up.
    pub sqlite_busy_timeout_ms: u64,
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            database_url: DatabaseUrl::new("sqlite://data/chatgate.db"),
            max_connections: 8,
            acquire_timeout_ms: 5_000,
            sqlite_busy_timeout_ms: 5_000,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IdempotencyConfig {
    /// The dedupe window of a command whose registry entry declares none (IDS §VIII.C: at least
    /// 24 hours for anything financial).
    pub default_window_secs: u64,
    /// How often expired dedupe records are removed.
    pub cleanup_interval_secs: u64,
}

impl IdempotencyConfig {
    pub fn cleanup_interval(&self) -> Duration {
        Duration::from_secs(self.cleanup_interval_secs)
    }

    pub fn default_window(&self) -> Duration {
        Duration::from_secs(self.default_window_secs)
    }
}

impl Default for IdempotencyConfig {
    fn default() -> Self {
        Self { default_window_secs: 86_400, cleanup_interval_secs: 60 }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvidenceConfig {
    /// The key of the keyed hashes that stand for phone numbers and conversation ids in evidence.
    pub pseudonym_key: Secret,
}

impl Default for EvidenceConfig {
    fn default() -> Self {
        Self { pseudonym_key: Secret::new("chatgate-demo-pseudonym-key-change-me") }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {error}")]
    Read { path: PathBuf, error: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: {key}: {error}")]
    Interpolation { path: PathBuf, key: String, error: InterpolationError },
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

/// Which file to read and whether it must exist.
#[derive(Debug, Clone)]
pub enum ConfigSource {
    /// Named by the operator: a missing file is an error.
    Explicit(PathBuf),
    /// The default path: when it is missing the built-in defaults apply.
    Default,
}

impl Config {
    /// Reads, interpolates, overrides from the environment and validates.
    pub fn load(source: &ConfigSource, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let (path, required) = match source {
            ConfigSource::Explicit(path) => (path.clone(), true),
            ConfigSource::Default => (PathBuf::from(DEFAULT_CONFIG_PATH), false),
        };
        let mut config = match std::fs::read_to_string(&path) {
            Ok(text) => Self::parse(&path, &text, env)?,
            Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => Self::parse(&path, SHIPPED_CONFIG, env)?,
            Err(error) => return Err(ConfigError::Read { path, error }),
        };
        config.apply_env_overrides(env);
        config.validate()?;
        Ok(config)
    }

    /// Parses a file's text, expanding `${VAR}` in every string value.
    pub fn parse(path: &Path, text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        parse_toml(path, text, env)
    }

    /// The contract's environment names win over the file (DESIGN §8).
    fn apply_env_overrides(&mut self, env: &dyn Fn(&str) -> Option<String>) {
        let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        if let Some(listen) = set("CHATGATE_LISTEN") {
            self.server.listen = listen;
        }
        if let Some(url) = set("CHATGATE_DATABASE_URL") {
            self.storage.database_url = DatabaseUrl::new(url);
        }
        if let Some(base) = set("CHATGATE_WHATSAPP_API_BASE") {
            self.whatsapp.api_base = base;
        }
        if let Some(token) = set("CHATGATE_WHATSAPP_ACCESS_TOKEN") {
            self.whatsapp.access_token = Secret::new(token);
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        self.server.listen_addr()?;
        self.storage.database_url.backend().map_err(ConfigError::Invalid)?;
        let positive = [
            ("server.request_timeout_ms", self.server.request_timeout_ms),
            ("server.body_limit_bytes", self.server.body_limit_bytes as u64),
            ("storage.max_connections", u64::from(self.storage.max_connections)),
            ("storage.acquire_timeout_ms", self.storage.acquire_timeout_ms),
            ("idempotency.default_window_secs", self.idempotency.default_window_secs),
            ("idempotency.cleanup_interval_secs", self.idempotency.cleanup_interval_secs),
            ("outbound.poll_interval_ms", self.outbound.poll_interval_ms),
            ("outbound.lease_ms", self.outbound.lease_ms),
            ("outbound.batch", self.outbound.batch.max(0) as u64),
            ("outbound.request_timeout_ms", self.outbound.request_timeout_ms),
            ("outbound.max_attempts", u64::from(self.outbound.max_attempts)),
            ("outbound.confirmation_sweep_ms", self.outbound.confirmation_sweep_ms),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(ConfigError::Invalid(format!("{name} must be greater than 0")));
        }
        if !self.whatsapp.apps.is_empty() && !self.whatsapp.apps.contains_key(&self.whatsapp.default_app) {
            return Err(ConfigError::Invalid(format!(
                "whatsapp.default_app `{}` is not one of whatsapp.apps",
                self.whatsapp.default_app
            )));
        }
        if let Some((name, _)) = self.whatsapp.apps.iter().find(|(_, app)| app.app_secret.expose().is_empty()) {
            return Err(ConfigError::Invalid(format!("whatsapp.apps.{name}.app_secret is empty")));
        }
        let base = &self.whatsapp.api_base;
        if url::Url::parse(base).map_or(true, |u| !matches!(u.scheme(), "http" | "https")) {
            return Err(ConfigError::Invalid(format!("whatsapp.api_base `{base}` is not an http(s) URL")));
        }
        for (name, executor) in &self.executors {
            crate::executors::executor::Executor::from_config(name, executor).map_err(ConfigError::Invalid)?;
            if executor.max_attempts == 0 || executor.backoff_initial_ms > executor.backoff_max_ms {
                return Err(ConfigError::Invalid(format!(
                    "executors.{name}: max_attempts must be at least 1 and backoff_initial_ms at most backoff_max_ms"
                )));
            }
        }
        let hooks = &self.hooks;
        crate::channels::hooks::valid_base_path(&hooks.base_path)
            .map_err(|e| ConfigError::Invalid(format!("hooks.base_path `{}` {e}", hooks.base_path)))?;
        for agent in hooks.agents.iter().chain(hooks.mappings.values().map(|m| &m.agent)) {
            if !self.executors.contains_key(agent) {
                return Err(ConfigError::Invalid(format!("hooks: agent `{agent}` is not a configured executor")));
            }
        }
        for (name, source) in &self.standard_webhooks {
            match &source.message {
                Some(message) => {
                    let url = message.reply_url.as_deref().unwrap_or("http://unset");
                    if url::Url::parse(url).map_or(true, |u| !matches!(u.scheme(), "http" | "https")) {
                        return Err(ConfigError::Invalid(format!(
                            "standard_webhooks.{name}.message.reply_url is not an http(s) URL"
                        )));
                    }
                }
                None if !self.executors.contains_key(&source.agent) => {
                    return Err(ConfigError::Invalid(format!(
                        "standard_webhooks.{name}.agent is not a configured executor (or set `message`)"
                    )));
                }
                None => {}
            }
            if source.secrets.is_empty() {
                return Err(ConfigError::Invalid(format!("standard_webhooks.{name}.secrets is empty")));
            }
            for secret in &source.secrets {
                crate::executors::executor::standard_webhooks_key(secret.expose())
                    .map_err(|e| ConfigError::Invalid(format!("standard_webhooks.{name}.secrets: {e}")))?;
            }
        }
        if !hooks.token.expose().is_empty() && hooks.agents.is_empty() {
            return Err(ConfigError::Invalid("hooks.agents must name at least one executor".into()));
        }
        if self.outbound.backoff_initial_ms > self.outbound.backoff_max_ms {
            return Err(ConfigError::Invalid("outbound.backoff_initial_ms is above outbound.backoff_max_ms".into()));
        }
        if self.stepup.max_lifetime_secs == 0 || self.stepup.max_lifetime_secs > 600 {
            return Err(ConfigError::Invalid("stepup.max_lifetime_secs must be between 1 and 600".into()));
        }
        if self.stepup.acr_values.is_empty() {
            return Err(ConfigError::Invalid("stepup.acr_values must name at least one level".into()));
        }
        let rates = [
            ("rate_limits.actor", self.rate_limits.actor),
            ("rate_limits.tenant", self.rate_limits.tenant),
            ("rate_limits.api_client", self.rate_limits.api_client),
        ];
        if let Some((name, _)) = rates.iter().find(|(_, r)| r.per_minute == 0 || r.burst == 0) {
            return Err(ConfigError::Invalid(format!("{name}: per_minute and burst must be greater than 0")));
        }
        if self.evidence.pseudonym_key.expose().len() < 16 {
            return Err(ConfigError::Invalid("evidence.pseudonym_key must be at least 16 bytes".into()));
        }
        Ok(())
    }

    /// Secrets still set to the shipped demo values (`serve` warns about each).
    pub fn demo_secrets(&self) -> Vec<String> {
        let mut found = vec![];
        let mut check = |name: String, secret: &Secret| {
            if secret.is_demo() {
                found.push(name);
            }
        };
        check("evidence.pseudonym_key".into(), &self.evidence.pseudonym_key);
        for (name, issuer) in &self.auth.issuers {
            if let Some(secret) = &issuer.secret {
                check(format!("auth.issuers.{name}.secret"), secret);
            }
        }
        if let Some(secret) = &self.stepup.issuer.secret {
            check("stepup.secret".into(), secret);
        }
        check("hooks.token".into(), &self.hooks.token);
        check("twilio.auth_token".into(), &self.twilio.auth_token);
        for (name, source) in &self.standard_webhooks {
            for secret in &source.secrets {
                check(format!("standard_webhooks.{name}.secrets"), secret);
            }
        }
        for (app, config) in &self.whatsapp.apps {
            check(format!("whatsapp.apps.{app}.app_secret"), &config.app_secret);
            check(format!("whatsapp.apps.{app}.verify_token"), &config.verify_token);
        }
        for (name, executor) in &self.executors {
            if let Some(secret) = &executor.secret {
                check(format!("executors.{name}.secret"), secret);
            }
        }
        found
    }

    /// The effective configuration as TOML, every secret redacted (`chatgate check-config`).
    pub fn to_redacted_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_else(|e| format!("# cannot render configuration: {e}\n"))
    }
}

/// Parses TOML into `T`, expanding `${VAR}` in every string value first.
pub fn parse_toml<T: serde::de::DeserializeOwned>(
    path: &Path,
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<T, ConfigError> {
    let parse_error = |message: String| ConfigError::Parse { path: path.to_owned(), message };
    let mut table: toml::Table = text.parse().map_err(|e: toml::de::Error| parse_error(e.to_string()))?;
    interpolate_table(&mut table, "", env).map_err(|(key, error)| ConfigError::Interpolation {
        path: path.to_owned(),
        key,
        error,
    })?;
    T::deserialize(toml::Value::Table(table)).map_err(|e| parse_error(e.to_string()))
}

fn interpolate_table(
    table: &mut toml::Table,
    prefix: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), (String, InterpolationError)> {
    for (key, value) in table.iter_mut() {
        let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
        interpolate_value(value, &path, env)?;
    }
    Ok(())
}

fn interpolate_value(
    value: &mut toml::Value,
    path: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), (String, InterpolationError)> {
    match value {
        toml::Value::String(s) => *s = interpolate(s, env).map_err(|e| (path.to_owned(), e))?,
        toml::Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                interpolate_value(item, &format!("{path}[{i}]"), env)?;
            }
        }
        toml::Value::Table(inner) => interpolate_table(inner, path, env)?,
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests;
