//! Slack's request signature (docs.slack.dev, "Verifying requests from Slack"): `v0=` and the
//! hex HMAC-SHA256, with the app's signing secret, of `v0:{X-Slack-Request-Timestamp}:{body}`;
//! a timestamp more than five minutes from now is refused (a replay).

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub const SIGNATURE_HEADER: &str = "x-slack-signature";
pub const TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";

/// How far a request's timestamp may be from now.
pub const TOLERANCE_SECS: i64 = 5 * 60;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("X-Slack-Signature or X-Slack-Request-Timestamp is missing")]
    Missing,
    #[error("X-Slack-Request-Timestamp is not a number of seconds")]
    BadTimestamp,
    #[error("X-Slack-Request-Timestamp is more than five minutes from now")]
    Stale,
    #[error("X-Slack-Signature does not match the body")]
    Mismatch,
}

/// `v0=<hex>` for `body` sent at `timestamp` (the simulator's and the tests' signer).
pub fn sign(secret: &[u8], timestamp: &str, body: &[u8]) -> String {
    format!("v0={}", hex::encode(mac(secret, timestamp, body).finalize().into_bytes()))
}

fn mac(secret: &[u8], timestamp: &str, body: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length.
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap_or_else(|_| unreachable!("any key length"));
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    mac
}

/// Checks `signature` over `body` sent at `timestamp`, at `now` (seconds), in constant time.
pub fn verify(
    secret: &[u8],
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<(), SignatureError> {
    let (Some(timestamp), Some(signature)) = (timestamp, signature) else { return Err(SignatureError::Missing) };
    let sent: i64 = timestamp.trim().parse().map_err(|_| SignatureError::BadTimestamp)?;
    if (now - sent).abs() > TOLERANCE_SECS {
        return Err(SignatureError::Stale);
    }
    let given =
        signature.trim().strip_prefix("v0=").and_then(|h| hex::decode(h).ok()).ok_or(SignatureError::Mismatch)?;
    mac(secret, timestamp.trim(), body).verify_slice(&given).map_err(|_| SignatureError::Mismatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    // slackapi/python-slack-sdk tests/slack_sdk/signature/test_signature_verifier.py (commit
    // 0756c47), itself from Slack's "Verifying requests from Slack".
    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const BODY: &str = concat!(
        "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V",
        "&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=",
        "&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN",
        "&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
    );
    const TIMESTAMP: &str = "1531420618";
    const SIGNATURE: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
    const NOW: i64 = 1531420618;

    #[test]
    fn slack_sdks_example_is_signed_and_verified_alike() {
        assert_eq!(sign(SECRET.as_bytes(), TIMESTAMP, BODY.as_bytes()), SIGNATURE);
        assert_eq!(verify(SECRET.as_bytes(), Some(TIMESTAMP), Some(SIGNATURE), BODY.as_bytes(), NOW), Ok(()));
    }

    #[test]
    fn a_changed_body_an_old_timestamp_or_a_missing_header_is_refused() {
        let check = |timestamp, signature, body: &str, now| {
            verify(SECRET.as_bytes(), timestamp, signature, body.as_bytes(), now)
        };
        let changed = format!("{BODY}------");
        assert_eq!(check(Some(TIMESTAMP), Some(SIGNATURE), &changed, NOW), Err(SignatureError::Mismatch));
        assert_eq!(check(Some(TIMESTAMP), Some(SIGNATURE), BODY, NOW + 301), Err(SignatureError::Stale));
        assert_eq!(check(Some(TIMESTAMP), Some(SIGNATURE), BODY, NOW - 301), Err(SignatureError::Stale));
        assert_eq!(check(None, Some(SIGNATURE), BODY, NOW), Err(SignatureError::Missing));
        assert_eq!(check(Some("soon"), Some(SIGNATURE), BODY, NOW), Err(SignatureError::BadTimestamp));
        assert_eq!(check(Some(TIMESTAMP), Some("v1=abc"), BODY, NOW), Err(SignatureError::Mismatch));
    }
}
