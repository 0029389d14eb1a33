//! `[directory]`: the people's directory as data — how large an import may be and how long it
//! may take, and how long a lookup is remembered.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DirectoryConfig {
    /// `POST /v1/directory/import`'s largest body (the other routes keep `server.body_limit_bytes`).
    pub import_max_bytes: usize,
    /// How long an import may take (the other routes keep `server.request_timeout_ms`).
    pub import_timeout_ms: u64,
}

impl Default for DirectoryConfig {
    fn default() -> Self {
        Self { import_max_bytes: 256 * 1024 * 1024, import_timeout_ms: 600_000 }
    }
}

impl DirectoryConfig {
    pub fn import_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.import_timeout_ms)
    }
}
