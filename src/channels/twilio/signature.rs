//! `X-Twilio-Signature`: base64 of HMAC-SHA1, keyed with the account's auth token, over the full
//! URL Twilio called followed by every POST parameter sorted by name, each name immediately
//! followed by its value. The URL is the public one (gateways sit behind proxies that change
//! scheme, host and port), so it comes from configuration, not from the request.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha1::Sha1;
use subtle::ConstantTimeEq;

pub const HEADER: &str = "x-twilio-signature";

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the X-Twilio-Signature header is missing")]
    Missing,
    #[error("X-Twilio-Signature does not match the URL and parameters")]
    Mismatch,
}

/// The signature Twilio sends for a POST of `params` to `url`. Parameters with the same name
/// are ordered by value, as Twilio's own validators do.
pub fn expected(auth_token: &[u8], url: &str, params: &[(String, String)]) -> String {
    let mut sorted: Vec<&(String, String)> = params.iter().collect();
    sorted.sort();
    let mut mac = Hmac::<Sha1>::new_from_slice(auth_token).expect("HMAC takes a key of any length");
    mac.update(url.as_bytes());
    for (name, value) in sorted {
        mac.update(name.as_bytes());
        mac.update(value.as_bytes());
    }
    STANDARD.encode(mac.finalize().into_bytes())
}

/// Checks `given` in constant time.
pub fn verify(
    auth_token: &[u8],
    url: &str,
    params: &[(String, String)],
    given: Option<&[u8]>,
) -> Result<(), SignatureError> {
    let given = given.filter(|g| !g.is_empty()).ok_or(SignatureError::Missing)?;
    let expected = expected(auth_token, url, params);
    if bool::from(expected.as_bytes().ct_eq(given)) { Ok(()) } else { Err(SignatureError::Mismatch) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(raw: &[(&str, &str)]) -> Vec<(String, String)> {
        raw.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    /// Twilio's published example (docs "Webhooks security": auth token `12345`).
    const EXAMPLE_URL: &str = "https://mycompany.com/myapp.php?foo=1&bar=2";
    const EXAMPLE_SIGNATURE: &str = "0/KCTR6DLpKmkAf8muzZqo1nDgQ=";
    fn example_params() -> Vec<(String, String)> {
        pairs(&[
            ("CallSid", "CA1234567890ABCDE"),
            ("Caller", "+12349013030"),
            ("Digits", "1234"),
            ("From", "+12349013030"),
            ("To", "+18005551212"),
        ])
    }

    #[test]
    fn twilios_published_example_verifies() {
        assert_eq!(expected(b"12345", EXAMPLE_URL, &example_params()), EXAMPLE_SIGNATURE);
        assert_eq!(verify(b"12345", EXAMPLE_URL, &example_params(), Some(EXAMPLE_SIGNATURE.as_bytes())), Ok(()));
    }

    #[test]
    fn the_order_of_the_parameters_as_sent_does_not_matter() {
        let mut reversed = example_params();
        reversed.reverse();
        assert_eq!(expected(b"12345", EXAMPLE_URL, &reversed), EXAMPLE_SIGNATURE);
    }

    #[test]
    fn tampered_parameters_another_url_or_token_and_a_missing_header_are_refused() {
        let sig = Some(EXAMPLE_SIGNATURE.as_bytes());
        let mut tampered = example_params();
        tampered[2].1 = "9999".into();
        assert_eq!(verify(b"12345", EXAMPLE_URL, &tampered, sig), Err(SignatureError::Mismatch));
        let mut added = example_params();
        added.push(("Extra".into(), "1".into()));
        assert_eq!(verify(b"12345", EXAMPLE_URL, &added, sig), Err(SignatureError::Mismatch));
        let other_url = "http://mycompany.com/myapp.php?foo=1&bar=2";
        assert_eq!(verify(b"12345", other_url, &example_params(), sig), Err(SignatureError::Mismatch));
        assert_eq!(verify(b"54321", EXAMPLE_URL, &example_params(), sig), Err(SignatureError::Mismatch));
        assert_eq!(verify(b"12345", EXAMPLE_URL, &example_params(), None), Err(SignatureError::Missing));
        assert_eq!(verify(b"12345", EXAMPLE_URL, &example_params(), Some(b"")), Err(SignatureError::Missing));
    }
}
