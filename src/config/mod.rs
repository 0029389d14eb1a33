//! Configuration: one typed configuration, read from TOML with `${VAR}` interpolation and
//! environment overrides, checked once at start-up so that a bad value stops the process with a
//! clear line. Sections in `sections.rs`, executors in `executors.rs`, security and the hook
//! bridge in `security.rs`, the caps that keep callers apart in `protections.rs`, the check in
//! `validate.rs`. Imports `domain` only.

mod cores;
mod directory;
mod executors;
mod ingest;
mod interpolate;
mod protections;
mod retention;
mod secret;
mod sections;
mod security;
mod validate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use cores::CoreList;
pub use directory::DirectoryConfig;
pub use executors::{DEFAULT_EXCHANGE, DEFAULT_RESPONSE_QUEUE, ExecutorConfig, ExecutorTarget};
pub use ingest::{Acknowledge, IngestConfig};
pub use interpolate::{InterpolationError, interpolate};
pub use protections::{EventsConfig, MetricsConfig};
pub use retention::{RetentionConfig, in_days};
pub use secret::{BackendKind, DatabaseUrl, Secret};
pub use sections::{
    ConsoleConfig, EvidenceConfig, IdempotencyConfig, LineConfig, MetaMessagingConfig, OutboundConfig, RegistryFiles,
    ServerConfig, SlackConfig, StorageConfig, TelegramConfig, TwilioConfig, WhatsAppApp, WhatsAppConfig,
};
pub use security::{
    AcceptedStatus, AuthConfig, HookMapping, HooksConfig, IssuerConfig, Rate, RateLimitConfig, StandardMessage,
    StandardSource, StepUpConfig,
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
    #[serde(default)]
    pub telegram: TelegramConfig,
    #[serde(default)]
    pub slack: SlackConfig,
    #[serde(default)]
    pub messenger: MetaMessagingConfig,
    #[serde(default)]
    pub instagram: MetaMessagingConfig,
    #[serde(default)]
    pub line: LineConfig,
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
    #[serde(default)]
    pub console: ConsoleConfig,
    #[serde(default)]
    pub events: EventsConfig,
    #[serde(default)]
    pub metrics: MetricsConfig,
    #[serde(default)]
    pub directory: DirectoryConfig,
    #[serde(default)]
    pub ingest: IngestConfig,
    #[serde(default)]
    pub retention: RetentionConfig,
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
        check("telegram.secret_token".into(), &self.telegram.secret_token);
        check("slack.signing_secret".into(), &self.slack.signing_secret);
        check("line.channel_secret".into(), &self.line.channel_secret);
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
    T::deserialize(toml::Value::Table(table)).map_err(|e| {
        // The text as written says where (`line 12, column 1`); interpolation only fills in values,
        // so a field that does not belong fails there alike. A value that fails only once filled
        // in (`cpus = "${CHATGATE_CPUS}"`) fails otherwise there, or not at all: its own error.
        let located = toml::from_str::<T>(text).err().filter(|located| located.message() == e.message());
        parse_error(located.map_or_else(|| e.to_string(), |located| located.to_string()))
    })
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
