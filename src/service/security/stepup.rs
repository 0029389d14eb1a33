//! Step-up proofs: a short-lived JWT from the step-up issuer that binds a fresh authentication
//! of the actor to one command and its idempotency key. Checking it is pure; using it once (its
//! `jti` consumed atomically with the command's move) is the store's part of the step.

use serde::Deserialize;
use serde_json::json;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::service::security::keys::Issuer;

use crate::config::StepUpConfig;
use crate::domain::evidence::decision::ProofRecord;
use crate::service::security::keys::TokenError;
use crate::store::{ConsumedToken, StoredCommand};

#[derive(Debug, Clone, Deserialize)]
pub struct StepUpClaims {
    pub sub: String,
    pub command_id: Uuid,
    pub idempotency_key: String,
    pub acr: String,
    pub jti: String,
    pub iat: i64,
    pub exp: i64,
    pub auth_time: i64,
}

/// A valid proof for one command, not yet used.
#[derive(Debug, Clone, PartialEq)]
pub struct StepUpProof {
    pub issuer: String,
    pub jti: String,
    pub acr: String,
    pub auth_time: i64,
    pub expires_at: OffsetDateTime,
}

impl StepUpProof {
    /// The proof as a single-use token to use up with what it proves.
    pub fn consumed(&self) -> ConsumedToken {
        ConsumedToken { issuer: self.issuer.clone(), jti: self.jti.clone(), expires_at: self.expires_at }
    }

    /// What `authz.decided` and an override record of it.
    pub fn evidence(&self) -> ProofRecord {
        ProofRecord {
            issuer: self.issuer.clone(),
            jti: self.jti.clone(),
            acr: Some(self.acr.clone()),
            auth_time: Some(self.auth_time),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepUpError {
    #[error("{0}")]
    Token(#[from] TokenError),
    /// The token is about another actor, command or idempotency key.
    #[error("the step-up token is for another {0}")]
    Mismatch(&'static str),
    /// Valid, but not strong or fresh enough (RFC 9470).
    #[error("{0}")]
    Insufficient(&'static str),
}

#[derive(Debug, Clone)]
pub struct StepUpVerifier {
    issuer: Issuer,
    config: StepUpConfig,
    leeway_secs: u64,
}

impl StepUpVerifier {
    pub fn new(issuer: Issuer, config: StepUpConfig, leeway_secs: u64) -> Self {
        Self { issuer, config, leeway_secs }
    }

    /// Checks a step-up token for `command` at `now`: signature and registered claims, then its
    /// binding (actor, command, key), its strength (`acr`) and freshness (`auth_time`), and a
    /// lifetime of at most the configured maximum.
    pub fn verify(
        &self,
        token: &str,
        command: &StoredCommand,
        now: OffsetDateTime,
    ) -> Result<StepUpProof, StepUpError> {
        self.verify_for(token, command.envelope.actor_id.as_str(), command, now)
    }

    /// `verify` for a proof of `subject` (an operator acting on the command, say) rather than of
    /// the command's actor.
    pub fn verify_for(
        &self,
        token: &str,
        subject: &str,
        command: &StoredCommand,
        now: OffsetDateTime,
    ) -> Result<StepUpProof, StepUpError> {
        let e = &command.envelope;
        self.verify_binding(token, subject, (e.command_id, e.idempotency_key.as_str()), now)
    }

    /// A proof of `subject` bound to `(id, key)`: a command and its idempotency key, or another
    /// risky action named so (an erasure: `service::directory::erasure_binding`).
    pub fn verify_binding(
        &self,
        token: &str,
        subject: &str,
        (id, key): (Uuid, &str),
        now: OffsetDateTime,
    ) -> Result<StepUpProof, StepUpError> {
        let claims: StepUpClaims =
            self.issuer.verify(token, &self.config.audience, self.leeway_secs, &["exp", "iss", "aud", "sub"])?;
        let leeway = i64::try_from(self.leeway_secs).unwrap_or(0);
        let lifetime = i64::try_from(self.config.max_lifetime_secs).unwrap_or(600);
        if claims.exp - claims.iat > lifetime {
            return Err(TokenError::Invalid(format!("a step-up token lives at most {lifetime} s")).into());
        }
        if claims.iat > now.unix_timestamp() + leeway {
            return Err(TokenError::NotYetValid.into());
        }
        if claims.sub != subject {
            return Err(StepUpError::Mismatch("actor"));
        }
        if claims.command_id != id {
            return Err(StepUpError::Mismatch("command"));
        }
        if claims.idempotency_key != key {
            return Err(StepUpError::Mismatch("idempotency key"));
        }
        if !self.config.acr_values.contains(&claims.acr) {
            return Err(StepUpError::Insufficient("the authentication is not strong enough (acr)"));
        }
        let max_age = i64::try_from(self.config.max_age_secs).unwrap_or(0);
        if now.unix_timestamp() - claims.auth_time > max_age + leeway {
            return Err(StepUpError::Insufficient("the authentication is too old (auth_time)"));
        }
        Ok(StepUpProof {
            issuer: self.issuer.iss.clone(),
            jti: claims.jti,
            acr: claims.acr,
            auth_time: claims.auth_time,
            expires_at: OffsetDateTime::from_unix_timestamp(claims.exp).unwrap_or(now),
        })
    }

    /// The RFC 9470 challenge for a caller who must step up.
    pub fn challenge(&self, description: &str) -> String {
        format!(
            "Bearer realm=\"chatgate\", error=\"insufficient_user_authentication\", \
             error_description=\"{description}\", acr_values=\"{}\", max_age={}",
            self.config.acr_values.join(" "),
            self.config.max_age_secs
        )
    }

    pub fn link(&self, command_id: Uuid, nonce: &str) -> String {
        crate::service::security::authz::step_up_link(&self.config.link, command_id, nonce)
    }

    /// Mints a step-up token (the development issuer: `stepup mint`, tests).
    pub fn mint(
        &self,
        actor: &str,
        command_id: Uuid,
        idempotency_key: &str,
        now: OffsetDateTime,
    ) -> Result<String, String> {
        let iat = now.unix_timestamp();
        let claims = json!({
            "iss": self.issuer.iss,
            "aud": self.config.audience,
            "sub": actor,
            "command_id": command_id,
            "idempotency_key": idempotency_key,
            "acr": self.config.acr_values.first(),
            "jti": hex::encode(rand::random::<[u8; 16]>()),
            "iat": iat,
            "auth_time": iat,
            "exp": iat + i64::try_from(self.config.max_lifetime_secs.min(300)).unwrap_or(300),
        });
        self.issuer.sign(&claims)
    }
}
