//! Standard Webhooks signatures on requests that reach us: a sender's deliveries
//! (`/webhooks/standard/{source}`) and an executor's ACKs signed with the secret its dispatches
//! carry. `webhook-signature` holds space-separated `v1,<base64>` entries over
//! `{webhook-id}.{webhook-timestamp}.{body}`; any of several secrets verifies (key rotation); the
//! timestamp must be within the tolerance of now (a replay window, not a clock check).

use axum::http::HeaderMap;
use subtle::ConstantTimeEq;
use time::OffsetDateTime;

use crate::executors::executor::sign;

use crate::executors::executor::standard_webhooks_key;

/// Why a signed request is refused; each is a 401 at the edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureRefusal {
    #[error("webhook-id, webhook-timestamp and webhook-signature are required")]
    Missing,
    #[error("webhook-timestamp is seconds since the epoch")]
    BadTimestamp,
    #[error("webhook-timestamp is too far from now (a replay?)")]
    Stale,
    #[error("no signature verifies with the secrets for this sender")]
    Mismatch,
}

impl SignatureRefusal {
    /// The problem document's `code`.
    pub fn code(self) -> &'static str {
        match self {
            Self::Stale => "stale_timestamp",
            Self::Missing | Self::BadTimestamp | Self::Mismatch => "invalid_signature",
        }
    }
}

/// The request's `webhook-id` when one of `secrets` signed `body` within `tolerance_secs` of `now`.
pub fn verify<'a>(
    secrets: impl IntoIterator<Item = &'a str>,
    tolerance_secs: u64,
    headers: &HeaderMap,
    body: &[u8],
    now: OffsetDateTime,
) -> Result<String, SignatureRefusal> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty());
    let (Some(id), Some(timestamp), Some(signatures)) =
        (header("webhook-id"), header("webhook-timestamp"), header("webhook-signature"))
    else {
        return Err(SignatureRefusal::Missing);
    };
    let timestamp = timestamp.parse::<i64>().map_err(|_| SignatureRefusal::BadTimestamp)?;
    let tolerance = i64::try_from(tolerance_secs).unwrap_or(300);
    if (now.unix_timestamp() - timestamp).abs() > tolerance {
        return Err(SignatureRefusal::Stale);
    }
    let given: Vec<&str> = signatures.split(' ').filter(|s| s.starts_with("v1,")).collect();
    let verified = secrets.into_iter().filter_map(|s| standard_webhooks_key(s).ok()).any(|key| {
        let expected = sign(&key, id, timestamp, body);
        given.iter().any(|g| bool::from(g.as_bytes().ct_eq(expected.as_bytes())))
    });
    if verified { Ok(id.to_owned()) } else { Err(SignatureRefusal::Mismatch) }
}
