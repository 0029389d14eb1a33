//! API authentication: a bearer token verified against the issuer it names, read into the
//! [`Principal`] that calls. The HTTP layer (`http::auth`) asks this for every scoped route.

use crate::service::live::Live;
use std::collections::BTreeSet;

use serde::Deserialize;

use super::keys::{Issuer, TokenError, claimed_issuer};
use crate::domain::command::TenantId;

/// Who is calling: from a verified token.
#[derive(Debug, Clone, PartialEq)]
pub struct Principal {
    pub issuer: String,
    pub subject: String,
    pub tenant: TenantId,
    pub scopes: BTreeSet<String>,
    /// When the proof ends: the token's `exp` (a console session ends no later).
    pub expires_at: Option<time::OffsetDateTime>,
    /// The console session the caller came with (its id's hash), when not a bearer token: what
    /// the caller opens (an event stream) ends with it.
    pub session: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ApiClaims {
    sub: String,
    tenant: String,
    /// OAuth style: space-separated.
    #[serde(default)]
    scope: Option<String>,
    /// Azure/Okta style: an array.
    #[serde(default)]
    scp: Option<Vec<String>>,
    #[serde(default)]
    exp: Option<i64>,
}

#[derive(Debug, Clone)]
pub struct Authenticator {
    audience: String,
    leeway_secs: u64,
    max_lifetime_secs: u64,
    issuers: Vec<Issuer>,
    /// The tenants this gateway serves (the directory's): a token for any other is refused.
    tenants: Live<BTreeSet<TenantId>>,
}

impl Authenticator {
    pub fn new(
        audience: String,
        leeway_secs: u64,
        max_lifetime_secs: u64,
        issuers: Vec<Issuer>,
        tenants: BTreeSet<TenantId>,
    ) -> Self {
        Self { audience, leeway_secs, max_lifetime_secs, issuers, tenants: Live::new(tenants) }
    }

    /// Serves `tenants` from now on (a reload of the directory file).
    pub fn serve(&self, tenants: BTreeSet<TenantId>) {
        self.tenants.set(tenants);
    }

    /// Whether `tenant` is served here.
    pub fn serves(&self, tenant: &str) -> bool {
        TenantId::parse(tenant).is_ok_and(|t| self.tenants.get().contains(&t))
    }

    /// Verifies a bearer token against the issuer it names.
    pub fn authenticate(&self, token: &str) -> Result<Principal, TokenError> {
        let iss = claimed_issuer(token).ok_or(TokenError::Malformed)?;
        let issuer = self.issuers.iter().find(|i| i.iss == iss).ok_or(TokenError::Issuer)?;
        let claims: ApiClaims =
            issuer.verify(token, &self.audience, self.leeway_secs, &["exp", "iss", "aud", "sub"])?;
        let tenant = TenantId::parse(&claims.tenant).map_err(|_| TokenError::MissingClaim)?;
        if !self.tenants.get().contains(&tenant) {
            return Err(TokenError::UnknownTenant);
        }
        let mut scopes: BTreeSet<String> =
            claims.scope.iter().flat_map(|s| s.split_whitespace()).map(str::to_owned).collect();
        scopes.extend(claims.scp.into_iter().flatten());
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let longest = i64::try_from(self.max_lifetime_secs.saturating_add(self.leeway_secs)).unwrap_or(i64::MAX);
        if claims.exp.is_some_and(|exp| exp.saturating_sub(now) > longest) {
            return Err(TokenError::TooLong);
        }
        let expires_at = claims.exp.and_then(|exp| time::OffsetDateTime::from_unix_timestamp(exp).ok());
        Ok(Principal { issuer: iss, subject: claims.sub, tenant, scopes, expires_at, session: None })
    }

    pub fn issuers(&self) -> &[Issuer] {
        &self.issuers
    }

    pub fn audience(&self) -> &str {
        &self.audience
    }
}
