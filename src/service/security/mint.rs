//! The development issuer: tokens for the demo, the README and tests, signed with the configured
//! development keys (`chatgate token mint`, `chatgate stepup mint`). A production deployment
//! points the issuers at its identity provider's public keys and has nothing to mint with.

use std::time::Duration;

use serde_json::json;
use time::OffsetDateTime;

use crate::service::security::Authenticator;

/// An API token for `tenant` with `scopes`, from the issuer named `iss` (or the first that can
/// sign), valid for `ttl`.
pub fn api_token(
    authenticator: &Authenticator,
    iss: Option<&str>,
    tenant: &str,
    subject: &str,
    scopes: &str,
    ttl: Duration,
    now: OffsetDateTime,
) -> Result<String, String> {
    if !authenticator.serves(tenant) {
        return Err(format!("no tenant `{tenant}` in the directory: a token for it would be refused"));
    }
    let issuers = authenticator.issuers();
    let issuer = match iss {
        Some(iss) => issuers.iter().find(|i| i.iss == iss).ok_or_else(|| format!("no issuer `{iss}` is configured"))?,
        None => issuers.first().ok_or("no token issuer is configured (auth.issuers)")?,
    };
    let iat = now.unix_timestamp();
    let claims = json!({
        "iss": issuer.iss,
        "aud": authenticator.audience(),
        "sub": subject,
        "tenant": tenant,
        "scope": scopes.split_whitespace().collect::<Vec<_>>().join(" "),
        "iat": iat,
        "nbf": iat,
        "exp": iat + i64::try_from(ttl.as_secs()).unwrap_or(3600),
    });
    issuer.sign(&claims)
}
