//! The scopes that act on the whole deployment rather than one tenant: a token's issuer grants
//! them to the deployment's operators, and no tenant's role (set through its API) may.

pub use crate::service::agents::ADMIN_SCOPE;

/// Reloads the registry, the templates and the directory file: the files are the deployment's.
pub const RELOAD_SCOPE: &str = "config:reload";

pub const DEPLOYMENT_SCOPES: &[&str] = &[ADMIN_SCOPE, RELOAD_SCOPE];
