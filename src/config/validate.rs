//! The configuration check: every value that would only fail later, refused at start-up with a
//! line that names it.

use super::{Config, ConfigError};

impl Config {
    /// Every check below, in order; the first failure is the answer.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_limits()?;
        self.validate_whatsapp()?;
        self.validate_executors_and_hooks()?;
        self.validate_standard_webhooks()?;
        self.validate_security()
    }

    fn validate_limits(&self) -> Result<(), ConfigError> {
        self.server.listen_addr()?;
        self.storage.database_url.backend().map_err(ConfigError::Invalid)?;
        let positive = [
            ("server.request_timeout_ms", self.server.request_timeout_ms),
            ("server.body_limit_bytes", self.server.body_limit_bytes as u64),
            ("storage.max_connections", u64::from(self.storage.max_connections.unwrap_or(1))),
            ("storage.acquire_timeout_ms", self.storage.acquire_timeout_ms),
            ("idempotency.default_window_secs", self.idempotency.default_window_secs),
            ("idempotency.cleanup_interval_secs", self.idempotency.cleanup_interval_secs),
            ("outbound.poll_interval_ms", self.outbound.poll_interval_ms),
            ("outbound.lease_ms", self.outbound.lease_ms),
            ("outbound.batch", self.outbound.batch.max(0) as u64),
            ("outbound.request_timeout_ms", self.outbound.request_timeout_ms),
            ("outbound.max_attempts", u64::from(self.outbound.max_attempts)),
            ("outbound.confirmation_sweep_ms", self.outbound.confirmation_sweep_ms),
            ("ingest.max_backlog", self.ingest.max_backlog),
            ("ingest.admission_batch", self.ingest.admission_batch.max(0) as u64),
            ("ingest.lease_secs", self.ingest.lease_secs),
            ("ingest.store_timeout_ms", self.ingest.store_timeout_ms),
            ("retention.batch", u64::from(self.retention.batch)),
            ("retention.transaction_ms", self.retention.transaction_ms),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(ConfigError::Invalid(format!("{name} must be greater than 0")));
        }
        if self.events.max_streams == 0 || self.events.max_streams_per_client == 0 {
            return Err(ConfigError::Invalid("events.max_streams and max_streams_per_client must be above 0".into()));
        }
        // Streams hold their connections: at least half of them stay for webhooks and the API.
        if self.events.max_streams > self.server.max_connections / 2 {
            return Err(ConfigError::Invalid(format!(
                "events.max_streams ({}) must be at most half of server.max_connections ({})",
                self.events.max_streams, self.server.max_connections
            )));
        }
        self.metrics.listen_addr()?;
        if self.ingest.admission_defer_ms > 60_000 {
            return Err(ConfigError::Invalid("ingest.admission_defer_ms must be at most 60000 (a minute)".into()));
        }
        if !(self.retention.share > 0.0 && self.retention.share <= 1.0) {
            return Err(ConfigError::Invalid("retention.share must be above 0 and at most 1".into()));
        }
        if !(0..=19).contains(&self.ingest.background_nice) {
            return Err(ConfigError::Invalid("ingest.background_nice must be from 0 to 19".into()));
        }
        if self.outbound.backoff_initial_ms > self.outbound.backoff_max_ms {
            return Err(ConfigError::Invalid("outbound.backoff_initial_ms is above outbound.backoff_max_ms".into()));
        }
        Ok(())
    }

    fn validate_whatsapp(&self) -> Result<(), ConfigError> {
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
        Ok(())
    }

    fn validate_executors_and_hooks(&self) -> Result<(), ConfigError> {
        for (name, executor) in &self.executors {
            executor.target(name).map_err(ConfigError::Invalid)?;
            if executor.max_attempts == Some(0) || executor.backoff_initial_ms > executor.backoff_max_ms {
                return Err(ConfigError::Invalid(format!(
                    "executors.{name}: max_attempts must be at least 1 and backoff_initial_ms at most backoff_max_ms"
                )));
            }
        }
        let hooks = &self.hooks;
        super::security::valid_base_path(&hooks.base_path)
            .map_err(|e| ConfigError::Invalid(format!("hooks.base_path `{}` {e}", hooks.base_path)))?;
        for agent in hooks.agents.iter().chain(hooks.mappings.values().map(|m| &m.agent)) {
            if !self.executors.contains_key(agent) {
                return Err(ConfigError::Invalid(format!("hooks: agent `{agent}` is not a configured executor")));
            }
        }
        if !hooks.token.expose().is_empty() && hooks.agents.is_empty() {
            return Err(ConfigError::Invalid("hooks.agents must name at least one executor".into()));
        }
        Ok(())
    }

    fn validate_standard_webhooks(&self) -> Result<(), ConfigError> {
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
                crate::domain::standard_webhooks::key(secret.expose())
                    .map_err(|e| ConfigError::Invalid(format!("standard_webhooks.{name}.secrets: {e}")))?;
            }
        }
        Ok(())
    }

    fn validate_security(&self) -> Result<(), ConfigError> {
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
}
