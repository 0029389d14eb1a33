//! What keeps one caller from taking the gateway from the others: the event streams' caps and
//! the protection of `/metrics`.

use serde::{Deserialize, Serialize};

use super::{ConfigError, Secret};

/// `GET /v1/events`: each open stream holds a connection and a descriptor, so they are capped,
/// well below `server.max_connections`, leaving the rest to webhooks and the API.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EventsConfig {
    /// Streams open at once on this instance; one more is refused 429 with `Retry-After`.
    pub max_streams: usize,
    /// Streams one client (a token's issuer and subject, or its console session's) keeps open.
    pub max_streams_per_client: usize,
}

impl Default for EventsConfig {
    fn default() -> Self {
        Self { max_streams: 128, max_streams_per_client: 4 }
    }
}

/// `GET /metrics`: unauthenticated by default, on the main address, as Prometheus scrapes it.
/// Each scrape reads counts kept as things change (never the tables' sizes); `token` asks for a
/// bearer token, `listen` moves it to an address of its own (a port the load balancer does not
/// expose), where the main address answers 404.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// `Authorization: Bearer <token>` required when set (`CHATGATE_METRICS_TOKEN`).
    pub token: Secret,
    /// An address of its own (`127.0.0.1:9090`) when set.
    pub listen: String,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self { token: Secret::new(""), listen: String::new() }
    }
}

impl MetricsConfig {
    pub fn listen_addr(&self) -> Result<Option<std::net::SocketAddr>, ConfigError> {
        if self.listen.trim().is_empty() {
            return Ok(None);
        }
        let parsed = self.listen.trim().parse();
        parsed
            .map(Some)
            .map_err(|_| ConfigError::Invalid(format!("metrics.listen `{}` is not an address:port", self.listen)))
    }
}
