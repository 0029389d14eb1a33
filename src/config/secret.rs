//! Values that must never be printed in clear: secrets and database URLs with passwords.

use serde::{Deserialize, Serialize, Serializer};

const REDACTED: &str = "<redacted>";

/// A secret read from configuration. Its `Debug` and `Serialize` forms are redacted, so neither
/// a log line nor `check-config` can print it.
#[derive(Clone, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The shipped demo values all say so, so that `serve` can warn while one is in use.
    pub fn is_demo(&self) -> bool {
        self.0.contains("demo")
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(REDACTED)
    }
}

/// Which store a database URL selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Sqlite,
    Postgres,
}

/// A database URL; printed with its password redacted.
#[derive(Clone, Deserialize)]
#[serde(transparent)]
pub struct DatabaseUrl(String);

impl DatabaseUrl {
    pub fn new(url: impl Into<String>) -> Self {
        Self(url.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn backend(&self) -> Result<BackendKind, String> {
        let scheme = self.0.split_once(':').map(|(scheme, _)| scheme).unwrap_or_default();
        match scheme {
            "sqlite" => Ok(BackendKind::Sqlite),
            "postgres" | "postgresql" => Ok(BackendKind::Postgres),
            _ => Err(format!("database URL `{}` must start with sqlite:// or postgres://", self.redacted())),
        }
    }

    /// The URL with any password replaced, for logs and `check-config`.
    pub fn redacted(&self) -> String {
        match url::Url::parse(&self.0) {
            Ok(mut url) if url.password().is_some() => {
                // Only fails for URLs that cannot have a password, which this one has.
                let _ = url.set_password(Some("redacted"));
                url.to_string()
            }
            Ok(_) => self.0.clone(),
            // Unparsable: it may still hold a secret, so show only its scheme.
            Err(_) => match self.0.split_once("://") {
                Some((scheme, _)) => format!("{scheme}://{REDACTED}"),
                None => REDACTED.to_owned(),
            },
        }
    }
}

impl std::fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl Serialize for DatabaseUrl {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.redacted())
    }
}
