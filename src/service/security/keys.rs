//! Token issuers' keys, loaded once at start-up, and the one place a JWT's signature and
//! registered claims are checked. An issuer accepts only the algorithms configured for it, so a
//! token cannot pick its own (`alg: none`, or HS256 "signed" with an RSA public key).

use std::path::Path;

use base64::Engine as _;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::de::DeserializeOwned;

use crate::config::IssuerConfig;

/// Why a token was not accepted; the text is safe to show the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the token is malformed")]
    Malformed,
    #[error("the token's algorithm is not accepted")]
    Algorithm,
    #[error("the token's issuer is not trusted")]
    Issuer,
    #[error("the token's signature does not verify")]
    Signature,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token is for another audience")]
    Audience,
    #[error("the token lacks a required claim")]
    MissingClaim,
    #[error("the token names critical header parameters this gateway does not understand")]
    Critical,
    #[error("the token lives longer than this gateway accepts")]
    TooLong,
    /// Its `tenant` is not one this gateway serves: refused everywhere, never a tenant of its own.
    #[error("the token's tenant is not served here")]
    UnknownTenant,
    #[error("the token is not valid: {0}")]
    Invalid(String),
}

impl From<jsonwebtoken::errors::Error> for TokenError {
    fn from(error: jsonwebtoken::errors::Error) -> Self {
        use jsonwebtoken::errors::ErrorKind as K;
        match error.kind() {
            K::InvalidToken | K::Base64(_) | K::Json(_) | K::Utf8(_) => Self::Malformed,
            K::InvalidAlgorithm | K::InvalidAlgorithmName | K::InvalidKeyFormat => Self::Algorithm,
            K::InvalidSignature => Self::Signature,
            K::ExpiredSignature => Self::Expired,
            K::ImmatureSignature => Self::NotYetValid,
            K::InvalidAudience => Self::Audience,
            K::InvalidIssuer => Self::Issuer,
            K::MissingRequiredClaim(_) => Self::MissingClaim,
            other => Self::Invalid(format!("{other:?}")),
        }
    }
}

/// RFC 7515 §4.1.11: a recipient must refuse a token whose `crit` header lists an extension it
/// does not understand, and this gateway understands none; so any `crit` is refused (an empty
/// list is not allowed either).
fn names_critical_parameters(token: &str) -> bool {
    let Some(segment) = token.split('.').next() else { return false };
    let Ok(bytes) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(segment.trim_end_matches('=')) else {
        return false;
    };
    serde_json::from_slice::<serde_json::Value>(&bytes).is_ok_and(|header| header.get("crit").is_some())
}

/// One verification key with the algorithms it may be used with.
#[derive(Clone)]
struct VerifyKey {
    kid: Option<String>,
    key: DecodingKey,
    algorithms: Vec<Algorithm>,
}

/// An issuer's verification side (and, for development issuers, its signing side).
#[derive(Clone)]
pub struct Issuer {
    pub iss: String,
    algorithms: Vec<Algorithm>,
    keys: Vec<VerifyKey>,
    signer: Option<(EncodingKey, Algorithm)>,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer").field("iss", &self.iss).field("algorithms", &self.algorithms).finish_non_exhaustive()
    }
}

impl Issuer {
    /// Loads an issuer's keys; files are relative to `folder`. Every problem is one line.
    pub fn load(name: &str, config: &IssuerConfig, folder: &Path) -> Result<Self, String> {
        let problem = |what: String| format!("{name}: {what}");
        let algorithms: Vec<Algorithm> = config
            .algorithms
            .iter()
            .map(|a| a.parse().map_err(|_| problem(format!("unknown algorithm `{a}`"))))
            .collect::<Result<_, _>>()?;
        if algorithms.is_empty() {
            return Err(problem("no algorithms".into()));
        }
        let (hmac, public): (Vec<Algorithm>, Vec<Algorithm>) =
            algorithms.iter().partition(|a| matches!(a, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512));
        let read = |file: &Path| {
            let path = folder.join(file);
            std::fs::read(&path).map_err(|e| problem(format!("cannot read {}: {e}", path.display())))
        };
        let mut keys = vec![];
        let mut signer = None;
        if !hmac.is_empty() {
            let secret = config.secret.as_ref().ok_or_else(|| problem("HS* algorithms need `secret`".into()))?;
            if secret.expose().len() < 16 {
                return Err(problem("the secret must be at least 16 bytes".into()));
            }
            keys.push(VerifyKey {
                kid: None,
                key: DecodingKey::from_secret(secret.expose().as_bytes()),
                algorithms: hmac.clone(),
            });
            signer = Some((EncodingKey::from_secret(secret.expose().as_bytes()), hmac[0]));
        }
        if !public.is_empty() {
            if let Some(file) = &config.public_key_file {
                let pem = read(file)?;
                for family in families(&public) {
                    let key = decoding_pem(family, &pem).map_err(|e| problem(format!("public_key_file: {e}")))?;
                    let algorithms = public.iter().copied().filter(|a| family_of(*a) == family).collect();
                    keys.push(VerifyKey { kid: None, key, algorithms });
                }
            }
            if let Some(file) = &config.jwks_file {
                let set: JwkSet =
                    serde_json::from_slice(&read(file)?).map_err(|e| problem(format!("jwks_file: {e}")))?;
                for jwk in &set.keys {
                    let key = DecodingKey::from_jwk(jwk).map_err(|e| problem(format!("jwks_file: {e}")))?;
                    keys.push(VerifyKey { kid: jwk.common.key_id.clone(), key, algorithms: public.clone() });
                }
            }
            if config.public_key_file.is_none() && config.jwks_file.is_none() {
                return Err(problem("RS/ES/EdDSA algorithms need `public_key_file` or `jwks_file`".into()));
            }
            if let Some(file) = &config.signing_key_file {
                let pem = read(file)?;
                let algorithm = public[0];
                let key =
                    encoding_pem(family_of(algorithm), &pem).map_err(|e| problem(format!("signing_key_file: {e}")))?;
                signer = Some((key, algorithm));
            }
        }
        Ok(Self { iss: config.issuer.clone(), algorithms, keys, signer })
    }

    /// Verifies a token of this issuer for `audience`; `required` names the claims it must carry.
    pub fn verify<C: DeserializeOwned>(
        &self,
        token: &str,
        audience: &str,
        leeway_secs: u64,
        required: &[&str],
    ) -> Result<C, TokenError> {
        let header = jsonwebtoken::decode_header(token)?;
        if names_critical_parameters(token) {
            return Err(TokenError::Critical);
        }
        if !self.algorithms.contains(&header.alg) {
            return Err(TokenError::Algorithm);
        }
        let candidates = self
            .keys
            .iter()
            .filter(|k| k.algorithms.contains(&header.alg))
            .filter(|k| header.kid.is_none() || k.kid.is_none() || k.kid == header.kid);
        let mut last = TokenError::Algorithm;
        for key in candidates {
            let mut validation = Validation::new(header.alg);
            validation.algorithms = key.algorithms.clone();
            validation.set_issuer(&[&self.iss]);
            validation.set_audience(&[audience]);
            validation.leeway = leeway_secs;
            validation.validate_nbf = true;
            validation.set_required_spec_claims(required);
            match jsonwebtoken::decode::<C>(token, &key.key, &validation) {
                Ok(data) => return Ok(data.claims),
                // Another key of the set may have signed it.
                Err(e) if matches!(e.kind(), jsonwebtoken::errors::ErrorKind::InvalidSignature) => last = e.into(),
                Err(e) => return Err(e.into()),
            }
        }
        Err(last)
    }

    /// Signs `claims` (development issuers: `token mint`, `stepup mint`, tests).
    pub fn sign(&self, claims: &serde_json::Value) -> Result<String, String> {
        let (key, algorithm) = self.signer.as_ref().ok_or("this issuer has no signing key")?;
        jsonwebtoken::encode(&Header::new(*algorithm), claims, key).map_err(|e| e.to_string())
    }
}

/// The `iss` a token claims, read without verifying anything: only to pick which issuer verifies.
pub fn claimed_issuer(token: &str) -> Option<String> {
    unverified_claims(token)["iss"].as_str().map(str::to_owned)
}

/// A token's claims read without verifying anything: to pick an issuer, or to show a token.
/// Never to decide anything.
pub fn unverified_claims(token: &str) -> serde_json::Value {
    let payload = token.split('.').nth(1).unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Rsa,
    Ec,
    Ed,
    Hmac,
}

fn family_of(algorithm: Algorithm) -> Family {
    use Algorithm as A;
    match algorithm {
        A::RS256 | A::RS384 | A::RS512 | A::PS256 | A::PS384 | A::PS512 => Family::Rsa,
        A::ES256 | A::ES384 => Family::Ec,
        A::EdDSA => Family::Ed,
        _ => Family::Hmac,
    }
}

fn families(algorithms: &[Algorithm]) -> Vec<Family> {
    let mut families: Vec<Family> = algorithms.iter().map(|a| family_of(*a)).collect();
    families.dedup();
    families
}

fn decoding_pem(family: Family, pem: &[u8]) -> Result<DecodingKey, jsonwebtoken::errors::Error> {
    match family {
        Family::Rsa => DecodingKey::from_rsa_pem(pem),
        Family::Ec => DecodingKey::from_ec_pem(pem),
        Family::Ed => DecodingKey::from_ed_pem(pem),
        Family::Hmac => Ok(DecodingKey::from_secret(pem)),
    }
}

fn encoding_pem(family: Family, pem: &[u8]) -> Result<EncodingKey, jsonwebtoken::errors::Error> {
    match family {
        Family::Rsa => EncodingKey::from_rsa_pem(pem),
        Family::Ec => EncodingKey::from_ec_pem(pem),
        Family::Ed => EncodingKey::from_ed_pem(pem),
        Family::Hmac => Ok(EncodingKey::from_secret(pem)),
    }
}
