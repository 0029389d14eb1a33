//! Executors as configured: where each is reached (HTTP, the bus, a built-in), how long a call
//! and a delivery may take, and the retry policy. [`ExecutorConfig::target`] reads the URL once,
//! for the configuration check and for `executors::Executor`, which builds the clients.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Secret;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutorConfig {
    /// `https://...` (or `http://`), `builtin:shop` (the demo's shop: a handful of orders, their
    /// previews and refunds), `builtin:echo` (succeeds at once, echoing the args) or
    /// `builtin:fail[:CODE]` (fails at once); for demos and tests.
    pub url: String,
    /// The Standard Webhooks signing secret (`whsec_` + base64).
    pub secret: Option<Secret>,
    /// One HTTP attempt, connection included.
    #[serde(default = "defaults::executor_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// Attempts in all before the dispatch closes as `DELIVERY_TIMEOUT`; none (the default): it
    /// is retried until `delivery_timeout_ms`, whichever comes first when both are set.
    #[serde(default)]
    pub max_attempts: Option<u32>,
    #[serde(default = "defaults::executor_backoff_initial_ms")]
    pub backoff_initial_ms: u64,
    #[serde(default = "defaults::executor_backoff_max_ms")]
    pub backoff_max_ms: u64,
    /// Calls to this executor at once; more wait for a free one, and no other executor waits.
    #[serde(default = "defaults::executor_max_in_flight")]
    pub max_in_flight: usize,
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
    /// Where an HTTP executor is asked for a command's preview before the confirmation prompt
    /// (POST, signed like a dispatch; docs/EXECUTORS.md); none: it offers no previews.
    #[serde(default)]
    pub preview_url: Option<String>,
    /// How long a preview may take before the command goes on without one (or is refused, as the
    /// registry's `preview` says): a person is waiting for the prompt.
    #[serde(default = "defaults::executor_preview_timeout_ms")]
    pub preview_timeout_ms: u64,
    /// A RabbitMQ agent that understands `command.{agent}.{action}.cancel`.
    #[serde(default)]
    pub announce_cancel: bool,
    /// NATS executors: the first word of Bloodbank's subjects (default `bloodbank`:
    /// `bloodbank.cmd.v1.agent.invocation.start`), and the gateway's durable consumer of the
    /// agents' events (default `chatgate`; instances sharing it share the events).
    #[serde(default)]
    pub subject_prefix: Option<String>,
    #[serde(default)]
    pub consumer: Option<String>,
}

impl ExecutorConfig {
    pub fn retry_policy(&self) -> crate::domain::retry::RetryPolicy {
        crate::domain::retry::RetryPolicy {
            max_attempts: self.max_attempts.unwrap_or(u32::MAX),
            initial: Duration::from_millis(self.backoff_initial_ms),
            max: Duration::from_millis(self.backoff_max_ms),
        }
    }
}

mod defaults {
    pub fn executor_request_timeout_ms() -> u64 {
        10_000
    }
    pub fn executor_preview_timeout_ms() -> u64 {
        3_000
    }
    pub fn executor_max_in_flight() -> usize {
        64
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

/// The exchange RabbitMQ executors publish to unless configured otherwise.
pub const DEFAULT_EXCHANGE: &str = "bloodbank.events.v1";
pub const DEFAULT_RESPONSE_QUEUE: &str = "chatgate.responses";
/// Bloodbank's subjects on NATS, and the gateway's durable consumer, unless configured otherwise.
pub const DEFAULT_SUBJECT_PREFIX: &str = "bloodbank";
pub const DEFAULT_CONSUMER: &str = "chatgate";

/// Where an executor is reached, read from its configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutorTarget {
    Echo,
    Shop,
    Gateway,
    Fail {
        code: String,
    },
    Http {
        url: String,
        secret: Option<Vec<u8>>,
        cancel_url: Option<String>,
        preview_url: Option<String>,
    },
    Amqp {
        url: String,
        exchange: String,
        queue: String,
        agent: String,
    },
    /// Bloodbank on NATS JetStream: `agent` is the invocation's `target_agent_id`.
    Nats {
        url: String,
        subject_prefix: String,
        consumer: String,
        agent: String,
    },
}

impl ExecutorConfig {
    /// Whether the executor has a preview phase: an HTTP one with a `preview_url`, the buses
    /// (whose agents may or may not answer), the demo's shop.
    pub fn offers_previews(&self, name: &str) -> bool {
        match self.target(name) {
            Ok(ExecutorTarget::Http { preview_url, .. }) => preview_url.is_some(),
            Ok(ExecutorTarget::Amqp { .. } | ExecutorTarget::Nats { .. } | ExecutorTarget::Shop) => true,
            _ => false,
        }
    }

    /// The executor `name` as configured, or the line that says what is wrong with it.
    pub fn target(&self, name: &str) -> Result<ExecutorTarget, String> {
        let url = self.url.trim();
        match url {
            "builtin:echo" => return Ok(ExecutorTarget::Echo),
            "builtin:shop" => return Ok(ExecutorTarget::Shop),
            "builtin:gateway" => return Ok(ExecutorTarget::Gateway),
            _ => {}
        }
        if let Some(rest) = url.strip_prefix("builtin:fail") {
            let code = rest.strip_prefix(':').filter(|c| !c.is_empty()).unwrap_or("builtin_failure");
            return Ok(ExecutorTarget::Fail { code: code.to_owned() });
        }
        let parsed = url::Url::parse(url).map_err(|e| format!("executors.{name}.url: {e}"))?;
        if parsed.scheme() == "amqp" {
            let agent = self.agent.clone().unwrap_or_else(|| name.to_owned());
            if agent.is_empty() || agent.contains(['.', '*', '#']) {
                return Err(format!("executors.{name}.agent `{agent}` cannot be a routing-key word"));
            }
            return Ok(ExecutorTarget::Amqp {
                url: url.to_owned(),
                exchange: self.exchange.clone().unwrap_or_else(|| DEFAULT_EXCHANGE.to_owned()),
                queue: self.queue.clone().unwrap_or_else(|| DEFAULT_RESPONSE_QUEUE.to_owned()),
                agent,
            });
        }
        if parsed.scheme() == "nats" {
            return self.nats_target(name, url);
        }
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!(
                "executors.{name}.url: `{url}` is not http(s)://, amqp://, nats:// or builtin:echo|fail|gateway"
            ));
        }
        let secret = self
            .secret
            .as_ref()
            .map(|s| crate::domain::standard_webhooks::key(s.expose()))
            .transpose()
            .map_err(|e| format!("executors.{name}.secret: {e}"))?;
        for (field, other) in [("cancel_url", &self.cancel_url), ("preview_url", &self.preview_url)] {
            if let Some(other) = other {
                url::Url::parse(other).map_err(|e| format!("executors.{name}.{field}: {e}"))?;
            }
        }
        let (cancel_url, preview_url) = (self.cancel_url.clone(), self.preview_url.clone());
        Ok(ExecutorTarget::Http { url: url.to_owned(), secret, cancel_url, preview_url })
    }

    fn nats_target(&self, name: &str, url: &str) -> Result<ExecutorTarget, String> {
        let agent = self.agent.clone().unwrap_or_else(|| name.to_owned());
        if agent.trim().is_empty() {
            return Err(format!("executors.{name}.agent cannot be empty"));
        }
        let subject_prefix = self.subject_prefix.clone().unwrap_or_else(|| DEFAULT_SUBJECT_PREFIX.to_owned());
        let token = |t: &str| !t.is_empty() && !t.contains(['*', '>', ' ']);
        if !subject_prefix.split('.').all(token) {
            return Err(format!("executors.{name}.subject_prefix `{subject_prefix}` is not a NATS subject's words"));
        }
        let consumer = self.consumer.clone().unwrap_or_else(|| DEFAULT_CONSUMER.to_owned());
        if !consumer.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_')) || consumer.is_empty() {
            return Err(format!("executors.{name}.consumer `{consumer}` is not a JetStream consumer name"));
        }
        Ok(ExecutorTarget::Nats { url: url.to_owned(), subject_prefix, consumer, agent })
    }
}
