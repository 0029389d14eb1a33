//! Standard Webhooks signatures (standardwebhooks.com), both ways: what the gateway signs (its
//! dispatches to HTTP executors, the replies of a message source) and what it verifies (a
//! sender's deliveries, an executor's signed ACKs). `webhook-signature` holds space-separated
//! `v1,<base64>` entries over `{webhook-id}.{webhook-timestamp}.{body}`; any of several secrets
//! verifies (key rotation); the timestamp must be within the tolerance of now (a replay window,
//! not a clock check). Pure: the callers read and write the headers.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// Base64 with or without its `=` padding, as the reference libraries read a secret: the Python
/// library decodes `secret + "=="` (standard-webhooks `libraries/python/standardwebhooks/
/// webhooks.py` at 52d6249), which also ignores the bits of an unpadded last character that no
/// byte takes — a secret typed by hand (`whsec_dGVzdB`) has them set, and is the key `test`.
const SECRET_BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// A Standard Webhooks secret: the base64 key, with or without the `whsec_` prefix and with or
/// without padding — as the reference libraries accept it (their tests verify with
/// `MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw` and `whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw` alike;
/// standard-webhooks/standard-webhooks `libraries/python/tests/test_webhooks.py`,
/// `libraries/javascript/src/webhook.test.ts`).
pub fn key(secret: &str) -> Result<Vec<u8>, String> {
    let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
    if encoded.is_empty() {
        return Err("a Standard Webhooks secret is not empty".into());
    }
    let key = SECRET_BASE64.decode(encoded).map_err(|e| format!("not base64: {e}"))?;
    if key.is_empty() {
        return Err("a Standard Webhooks secret is not empty".into());
    }
    Ok(key)
}

/// `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`.
pub fn sign(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        return String::new();
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()))
}

/// The headers of a signed request: `webhook-id`, `webhook-timestamp`, and `webhook-signature`
/// when there is a key.
pub fn headers(key: Option<&[u8]>, id: &str, timestamp: i64, body: &[u8]) -> Vec<(&'static str, String)> {
    let mut headers = vec![("webhook-id", id.to_owned()), ("webhook-timestamp", timestamp.to_string())];
    if let Some(key) = key {
        headers.push(("webhook-signature", sign(key, id, timestamp, body)));
    }
    headers
}

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

/// A request's three signature headers, as received (`None` when absent).
#[derive(Debug, Clone, Copy, Default)]
pub struct Signed<'a> {
    pub id: Option<&'a str>,
    pub timestamp: Option<&'a str>,
    pub signature: Option<&'a str>,
}

/// The request's `webhook-id` when one of `secrets` signed `body` within `tolerance_secs` of
/// `now` (seconds since the epoch).
pub fn verify<'a>(
    secrets: impl IntoIterator<Item = &'a str>,
    tolerance_secs: u64,
    signed: Signed<'_>,
    body: &[u8],
    now: i64,
) -> Result<String, SignatureRefusal> {
    let (Some(id), Some(timestamp), Some(signatures)) =
        (present(signed.id), present(signed.timestamp), present(signed.signature))
    else {
        return Err(SignatureRefusal::Missing);
    };
    let timestamp = timestamp.parse::<i64>().map_err(|_| SignatureRefusal::BadTimestamp)?;
    let tolerance = i64::try_from(tolerance_secs).unwrap_or(300);
    if (now - timestamp).abs() > tolerance {
        return Err(SignatureRefusal::Stale);
    }
    let given: Vec<&str> = signatures.split(' ').filter(|s| s.starts_with("v1,")).collect();
    let verified = secrets.into_iter().filter_map(|s| key(s).ok()).any(|key| {
        let expected = sign(&key, id, timestamp, body);
        given.iter().any(|g| bool::from(g.as_bytes().ct_eq(expected.as_bytes())))
    });
    if verified { Ok(id.to_owned()) } else { Err(SignatureRefusal::Mismatch) }
}

fn present(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_standard_webhooks() {
        // The Standard Webhooks specification's own example.
        let key = key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("key");
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
        assert!(super::key("not base64!").is_err());
        assert!(super::key("whsec_").is_err() && super::key("").is_err(), "an empty secret");
    }

    #[test]
    fn a_secret_is_read_with_or_without_its_prefix_and_padding() {
        // As the reference libraries' tests: the same key with and without `whsec_`.
        let branded = key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("branded");
        assert_eq!(key("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), Ok(branded));
        assert_eq!(key("whsec_YWI="), Ok(b"ab".to_vec()));
        assert_eq!(key("whsec_YWI"), Ok(b"ab".to_vec()), "without padding");
        assert_eq!(key("YWI"), Ok(b"ab".to_vec()));
        // The Python library's `b64decode(secret + "==")` takes an unpadded last character's
        // spare bits as they are: `dGVzdB` is `test` there, and here.
        assert_eq!(key("whsec_dGVzdB"), Ok(b"test".to_vec()));
        assert_eq!(key("aGFuZC10eXBlZC1zZWNyZXQ"), Ok(b"hand-typed-secret".to_vec()));
        assert!(key("whsec_dGVzd").is_err(), "a length no base64 has");
    }
}
