//! Security gates: who may call the API (JWT bearer tokens, scopes per route), what a person
//! may run (authorization against the directory's scopes), a fresh single-use proof for risky
//! commands (step-up), and how fast anyone may go (rate limits).

pub mod approval;
pub mod authn;
pub mod authz;
pub mod complete;
pub mod failures;
pub mod keys;
pub mod mint;
pub mod policy;
pub mod ratelimit;
pub mod registries;
pub mod sessions;
pub mod shared_takes;
pub mod stepup;

use std::path::Path;

pub use authn::{Authenticator, Principal};
pub use authz::AuthzDecision;
pub use complete::{StepUpFailure, complete_step_up};
pub use keys::{Issuer, TokenError};
pub use policy::{Authorization, Policy};
pub use ratelimit::Limits;
pub use registries::{Registries, Spec};
pub use stepup::{StepUpError, StepUpProof, StepUpVerifier};

use crate::config::Config;

/// Everything the gates need, built once from the configuration (keys read and checked).
#[derive(Debug)]
pub struct Security {
    pub authenticator: Authenticator,
    pub stepup: StepUpVerifier,
    pub limits: Limits,
    /// Failed hook-token authentications per client address (OpenClaw's throttle: 20 in 60 s).
    pub hook_auth_failures: failures::FailureWindow,
}

impl Security {
    /// Loads every issuer's keys; key files are relative to `folder`; `tenants` are those the
    /// directory lists (a token for any other is refused). One line per problem.
    pub fn load(
        config: &Config,
        folder: &Path,
        tenants: std::collections::BTreeSet<crate::domain::command::TenantId>,
    ) -> Result<Self, String> {
        let issuers = config
            .auth
            .issuers
            .iter()
            .map(|(name, issuer)| Issuer::load(&format!("auth.issuers.{name}"), issuer, folder))
            .collect::<Result<Vec<_>, _>>()?;
        let stepup_issuer = Issuer::load("stepup", &config.stepup.issuer, folder)?;
        Ok(Self {
            authenticator: Authenticator::new(
                config.auth.audience.clone(),
                config.auth.leeway_secs,
                config.auth.max_lifetime_secs,
                issuers,
                tenants,
            ),
            stepup: StepUpVerifier::new(stepup_issuer, config.stepup.clone(), config.auth.leeway_secs),
            limits: Limits::new(&config.rate_limits),
            hook_auth_failures: failures::FailureWindow::new(20, std::time::Duration::from_secs(60)),
        })
    }
}
