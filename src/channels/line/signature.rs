//! LINE's webhook signature (developers.line.biz, "Verify webhook signature"): the base64 of the
//! HMAC-SHA256 of the request body, keyed with the channel secret, in `x-line-signature`. LINE
//! signs the body as sent, so the bytes are checked before anything reads them.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

pub const SIGNATURE_HEADER: &str = "x-line-signature";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("x-line-signature is missing")]
    Missing,
    #[error("x-line-signature does not match the body")]
    Mismatch,
}

/// The signature LINE sends with `body` (the simulator's and the tests' signer).
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    STANDARD.encode(mac(secret, body).finalize().into_bytes())
}

fn mac(secret: &[u8], body: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length.
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap_or_else(|_| unreachable!("any key length"));
    mac.update(body);
    mac
}

/// Checks `signature` over `body`, in constant time (`verify_slice`).
pub fn verify(secret: &[u8], signature: Option<&str>, body: &[u8]) -> Result<(), SignatureError> {
    let signature = signature.ok_or(SignatureError::Missing)?;
    let given = STANDARD.decode(signature.trim()).map_err(|_| SignatureError::Mismatch)?;
    mac(secret, body).verify_slice(&given).map_err(|_| SignatureError::Mismatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector of LINE's own Python SDK (line/line-bot-sdk-python, `tests/test_signature.py`
    /// at 873e54969b4ec71130dcd347f82ebeaac3fa2483).
    #[test]
    fn the_sdks_vector_verifies_and_anything_else_does_not() {
        let (secret, body) = (b"channel_secret".as_slice(), b"bodybodybodybody".as_slice());
        let theirs = "/gg9a+LvFevTH1sd7XCQycD7tsWclCsInj7MhBHxN7k=";
        assert_eq!(sign(secret, body), theirs);
        assert_eq!(verify(secret, Some(theirs), body), Ok(()));
        assert_eq!(verify(secret, Some("invalid_signature"), body), Err(SignatureError::Mismatch));
        assert_eq!(verify(secret, Some(theirs), b"bodybodybodybodY"), Err(SignatureError::Mismatch));
        assert_eq!(verify(b"another secret", Some(theirs), body), Err(SignatureError::Mismatch));
        assert_eq!(verify(secret, None, body), Err(SignatureError::Missing));
    }
}
