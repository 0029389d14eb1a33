//! Console sessions: an operator proves who they are once with the same bearer token the API
//! takes, and the browser then holds a random session id in a cookie. The store keeps only the
//! id's SHA-256, the principal the token proved, the form token (CSRF) and when it ends: no
//! later than the token itself, so a session never outlives its proof.

use std::collections::BTreeSet;

use base64::Engine as _;
use rand::Rng;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use time::OffsetDateTime;

use super::{Authenticator, Principal, TokenError};
use crate::domain::command::TenantId;
use crate::service::database::Database;
use crate::store::{ConsoleSession, StoreError};

/// A session the console opened: the cookie value to hand the browser, and until when.
#[derive(Debug)]
pub struct Opened {
    pub cookie_value: String,
    pub expires_at: OffsetDateTime,
}

/// A signed-in operator: who they are (exactly as a bearer token would say) and the token their
/// forms must carry.
#[derive(Debug, Clone)]
pub struct SignedIn {
    pub principal: Principal,
    pub csrf_token: String,
    pub expires_at: OffsetDateTime,
}

impl SignedIn {
    /// Whether a form's token is this session's (compared in constant time).
    pub fn csrf_matches(&self, offered: &str) -> bool {
        !offered.is_empty() && bool::from(offered.as_bytes().ct_eq(self.csrf_token.as_bytes()))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    #[error("{0}")]
    Token(#[from] TokenError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// 32 random bytes, URL-safe: a session id or a form token.
pub fn random_token() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn id_hash(cookie_value: &str) -> String {
    hex::encode(Sha256::digest(cookie_value.as_bytes()))
}

/// Verifies `token` as the API would and opens a session that ends after `ttl`, or when the
/// token expires if that is sooner; the operator keeps at most `most` sessions.
pub async fn sign_in(
    database: &Database,
    authenticator: &Authenticator,
    token: &str,
    (ttl, most): (time::Duration, u32),
    now: OffsetDateTime,
) -> Result<Opened, SignInError> {
    let store = database.store();
    let principal = authenticator.authenticate(token.trim())?;
    let expires_at = principal.expires_at.map_or(now + ttl, |exp| exp.min(now + ttl));
    let scopes: Vec<&str> = principal.scopes.iter().map(String::as_str).collect();
    let session = ConsoleSession {
        tenant_id: principal.tenant.to_string(),
        issuer: principal.issuer.clone(),
        subject: principal.subject.clone(),
        scopes: scopes.join(" "),
        csrf_token: random_token(),
        expires_at,
    };
    let cookie_value = random_token();
    store.console().open(&id_hash(&cookie_value), &session, now).await?;
    // Signing in again and again opens no more than `most` sessions: the oldest end.
    store.console().keep_newest(&principal.issuer, &principal.subject, most.max(1)).await?;
    Ok(Opened { cookie_value, expires_at })
}

/// The operator a session cookie stands for, if the session is open.
pub async fn signed_in(
    database: &Database,
    cookie_value: &str,
    now: OffsetDateTime,
) -> Result<Option<SignedIn>, StoreError> {
    let store = database.store();
    let hash = id_hash(cookie_value);
    let Some(session) = store.console().find(&hash, now).await? else { return Ok(None) };
    let Ok(tenant) = TenantId::parse(&session.tenant_id) else {
        return Err(StoreError::Corrupt(format!("console session tenant `{}`", session.tenant_id)));
    };
    let scopes: BTreeSet<String> = session.scopes.split_whitespace().map(str::to_owned).collect();
    let principal = Principal {
        issuer: session.issuer,
        subject: session.subject,
        tenant,
        scopes,
        expires_at: Some(session.expires_at),
        session: Some(hash),
    };
    Ok(Some(SignedIn { principal, csrf_token: session.csrf_token, expires_at: session.expires_at }))
}

/// Ends the session server-side: the cookie opens nothing afterwards, wherever it was copied.
pub async fn sign_out(database: &Database, cookie_value: &str) -> Result<(), StoreError> {
    let store = database.store();
    store.console().end(&id_hash(cookie_value)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_token_matches_only_itself() {
        let principal = Principal {
            issuer: "i".into(),
            subject: "s".into(),
            tenant: TenantId::parse("demo").expect("tenant"),
            scopes: BTreeSet::new(),
            expires_at: None,
            session: None,
        };
        let session = SignedIn { principal, csrf_token: random_token(), expires_at: OffsetDateTime::now_utc() };
        assert!(session.csrf_matches(&session.csrf_token.clone()));
        assert!(!session.csrf_matches(""));
        assert!(!session.csrf_matches(&random_token()));
        assert_ne!(id_hash("a"), id_hash("b"));
    }
}
