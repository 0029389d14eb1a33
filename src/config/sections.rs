//! The configuration's plain sections: server, storage, registry files, providers, outbound,
//! idempotency, evidence.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ConfigError, DatabaseUrl, Secret};

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

/// A Telegram bot: `POST /webhooks/telegram` and the Bot API.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelegramConfig {
    /// The bot's username (`chatgate_demo_bot`): the address tenants are found by
    /// (`telegram_bots` in the directory). Empty turns the webhook off (404).
    pub bot: String,
    /// What the bot's webhook was set with (`setWebhook`'s `secret_token`), which Telegram sends
    /// in `X-Telegram-Bot-Api-Secret-Token` (`CHATGATE_TELEGRAM_SECRET_TOKEN`).
    pub secret_token: Secret,
    /// The bot's token for `sendMessage` (`CHATGATE_TELEGRAM_BOT_TOKEN`). Empty: replies wait in
    /// the outbox until it is set.
    pub bot_token: Secret,
    /// Where the Bot API is (`CHATGATE_TELEGRAM_API_BASE`; a stand-in in tests).
    pub api_base: String,
}

impl Default for TelegramConfig {
    fn default() -> Self {
        Self {
            bot: String::new(),
            secret_token: Secret::new(""),
            bot_token: Secret::new(""),
            api_base: "https://api.telegram.org".into(),
        }
    }
}

/// A LINE Official Account's Messaging API channel: `POST /webhooks/line` and the push API.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LineConfig {
    /// The channel secret (Basic settings), the key of `x-line-signature`'s HMAC-SHA256
    /// (`CHATGATE_LINE_CHANNEL_SECRET`). Empty turns the webhook off (404).
    pub channel_secret: Secret,
    /// A channel access token for the push API (`CHATGATE_LINE_CHANNEL_ACCESS_TOKEN`). Empty:
    /// replies wait in the outbox until it is set.
    pub channel_access_token: Secret,
    /// Where the Messaging API is (`CHATGATE_LINE_API_BASE`; a stand-in in tests).
    pub api_base: String,
}

impl Default for LineConfig {
    fn default() -> Self {
        Self {
            channel_secret: Secret::new(""),
            channel_access_token: Secret::new(""),
            api_base: "https://api.line.me".into(),
        }
    }
}

/// A Slack app: `POST /webhooks/slack/{events,commands,interactivity}` and the Web API.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SlackConfig {
    /// The app's signing secret, which signs every request Slack sends
    /// (`CHATGATE_SLACK_SIGNING_SECRET`). Empty turns the endpoints off (404).
    pub signing_secret: Secret,
    /// The bot token (`xoxb-…`) for `chat.postMessage` (`CHATGATE_SLACK_BOT_TOKEN`). Empty:
    /// replies wait in the outbox until it is set.
    pub bot_token: Secret,
    /// Where the Web API is (`CHATGATE_SLACK_API_BASE`; a stand-in in tests).
    pub api_base: String,
}

impl Default for SlackConfig {
    fn default() -> Self {
        Self { signing_secret: Secret::new(""), bot_token: Secret::new(""), api_base: "https://slack.com/api".into() }
    }
}

/// Messenger or Instagram messaging through the Send API: the webhook is the Meta app's
/// (`whatsapp.apps`), the Graph API's address and version are `whatsapp`'s.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetaMessagingConfig {
    /// The page's (or the Instagram account's) access token for sending. Empty: replies wait in
    /// the outbox until it is set.
    pub access_token: Secret,
}

impl Default for MetaMessagingConfig {
    fn default() -> Self {
        Self { access_token: Secret::new("") }
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
    /// A client must have sent its request's headers within this, or its connection is closed.
    pub header_read_timeout_ms: u64,
    /// Connections served at once; one more is answered 503 and closed.
    pub max_connections: usize,
    /// The URL callers see (`CHATGATE_PUBLIC_BASE_URL`): behind a proxy it differs from the
    /// listening address, and Twilio signs the URL it called.
    pub public_base_url: String,
    /// The cores the gateway's threads run on (`cpus = "1"`); empty: every core it is given.
    pub cpus: super::CoreList,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            request_timeout_ms: 15_000,
            body_limit_bytes: 1024 * 1024,
            shutdown_grace_ms: 20_000,
            header_read_timeout_ms: 10_000,
            max_connections: 1_024,
            public_base_url: "http://127.0.0.1:8080".into(),
            cpus: super::CoreList::default(),
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

    pub fn header_read_timeout(&self) -> Duration {
        Duration::from_millis(self.header_read_timeout_ms)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageConfig {
    /// `sqlite://path` (created when missing) or `postgres://...`; `CHATGATE_DATABASE_URL`
    /// overrides it.
    pub database_url: DatabaseUrl,
    /// The pool's size; left out, the backend's own default ([`StorageConfig::pool_size`]).
    pub max_connections: Option<u32>,
    /// How long a request waits for a free connection before the store reports itself down.
    pub acquire_timeout_ms: u64,
    /// How long SQLite waits on a locked database before giving up.
    pub sqlite_busy_timeout_ms: u64,
    /// The memory SQLite may keep for the whole process, MiB (its soft heap limit): past it the
    /// page caches of all its connections recycle pages instead of growing. 0: no limit (each
    /// connection's cache up to its own size: 16 MB on the main file).
    pub sqlite_memory_mib: u64,
    /// Admissions that may wait for the database at once; one more is answered 503 at once
    /// (memory stays bounded while the database is slow or down).
    pub max_waiting_admissions: usize,
}

impl StorageConfig {
    /// The pool's size: as configured, else 2 connections for SQLite and 8 for PostgreSQL. SQLite
    /// writes one transaction at a time whatever the pool, and each connection keeps its own
    /// page cache (within `sqlite_memory_mib` for all) and worker thread: 2 gave the same
    /// throughput as 8 with 24 MB less peak memory (docs/BENCHMARKS.md).
    pub fn pool_size(&self, backend: crate::config::BackendKind) -> u32 {
        self.max_connections.unwrap_or(match backend {
            crate::config::BackendKind::Sqlite => 2,
            crate::config::BackendKind::Postgres => 8,
        })
    }
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            database_url: DatabaseUrl::new("sqlite://data/chatgate.db"),
            max_connections: None,
            acquire_timeout_ms: 5_000,
            sqlite_busy_timeout_ms: 5_000,
            sqlite_memory_mib: 8,
            max_waiting_admissions: 1_024,
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

/// The operator console (`/console`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConsoleConfig {
    /// A session ends after this long, or when the token it was opened with expires if sooner.
    pub session_minutes: u64,
    /// Sessions one operator (a token's issuer and subject) keeps open; signing in once more
    /// ends the oldest.
    pub max_sessions_per_operator: u32,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        Self { session_minutes: 8 * 60, max_sessions_per_operator: 10 }
    }
}
