//! Meta's webhook signature: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(app secret, raw body)>`,
//! checked over the exact bytes received, in constant time, before anything is parsed.

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub const HEADER: &str = "x-hub-signature-256";

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the X-Hub-Signature-256 header is missing")]
    Missing,
    #[error("the X-Hub-Signature-256 header is not `sha256=` and 64 hex digits")]
    Malformed,
    #[error("the signature does not match the body")]
    Mismatch,
}

pub fn verify(app_secret: &[u8], header: Option<&[u8]>, body: &[u8]) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    let hex_digest = header.strip_prefix(b"sha256=").ok_or(SignatureError::Malformed)?;
    if hex_digest.len() != 64 {
        return Err(SignatureError::Malformed);
    }
    let expected = hex::decode(hex_digest).map_err(|_| SignatureError::Malformed)?;
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(app_secret).map_err(|_| SignatureError::Mismatch)?;
    mac.update(body);
    // `verify_slice` compares in constant time.
    mac.verify_slice(&expected).map_err(|_| SignatureError::Mismatch)
}

/// The header value for `body`, as Meta computes it (the simulator and tests sign with it).
pub fn sign(app_secret: &[u8], body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(app_secret).expect("HMAC accepts any key length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_correct_signature_verifies_and_any_change_does_not() {
        let body = br#"{"object":"whatsapp_business_account"}"#;
        let header = sign(b"secret", body);
        assert_eq!(verify(b"secret", Some(header.as_bytes()), body), Ok(()));
        assert_eq!(verify(b"other", Some(header.as_bytes()), body), Err(SignatureError::Mismatch));
        let mut changed = body.to_vec();
        changed[3] ^= 1;
        assert_eq!(verify(b"secret", Some(header.as_bytes()), &changed), Err(SignatureError::Mismatch));
        // A known vector: HMAC-SHA256("key", "The quick brown fox jumps over the lazy dog").
        let known = "sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8";
        assert_eq!(verify(b"key", Some(known.as_bytes()), b"The quick brown fox jumps over the lazy dog"), Ok(()));
    }

    #[test]
    fn missing_and_malformed_headers_are_told_apart() {
        assert_eq!(verify(b"s", None, b"{}"), Err(SignatureError::Missing));
        assert_eq!(verify(b"s", Some(b"sha1=abcd"), b"{}"), Err(SignatureError::Malformed));
        assert_eq!(verify(b"s", Some(b"sha256=xyz"), b"{}"), Err(SignatureError::Malformed));
        let not_hex = format!("sha256={}", "g".repeat(64));
        assert_eq!(verify(b"s", Some(not_hex.as_bytes()), b"{}"), Err(SignatureError::Malformed));
    }
}
