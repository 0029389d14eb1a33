//! Command authorization, the `authz_pending` stage: the actor's scopes (from the directory's
//! roles) against the command's required scopes, and whether a fresh step-up proof is needed.
//! Pure: the callers turn the decision into moves, evidence and replies.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::domain::evidence::decision::{AuthzVerdict, Decision};
use crate::domain::registry::CommandSpec;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthzDecision {
    Allow,
    /// The actor lacks these scopes.
    Deny {
        missing: Vec<String>,
    },
    /// Allowed by scope, but only after a step-up proof.
    StepUp,
}

/// The decision for `spec` requested by an actor holding `held`, with `stepped_up` telling
/// whether a step-up proof was already presented.
pub fn decide(spec: &CommandSpec, held: &BTreeSet<String>, stepped_up: bool) -> AuthzDecision {
    let missing: Vec<String> = spec.scopes.difference(held).cloned().collect();
    if !missing.is_empty() {
        AuthzDecision::Deny { missing }
    } else if spec.step_up && !stepped_up {
        AuthzDecision::StepUp
    } else {
        AuthzDecision::Allow
    }
}

impl AuthzDecision {
    /// What `authz.decided` (or `authz.requested`, for a step-up wait) records: the decision,
    /// the scopes compared, and why.
    pub fn evidence(&self, spec: &CommandSpec, held: &BTreeSet<String>) -> Value {
        let (authz, missing) = match self {
            Self::Allow => (AuthzVerdict::Allow, vec![]),
            Self::Deny { missing } => (AuthzVerdict::Deny, missing.clone()),
            Self::StepUp => (AuthzVerdict::StepUpRequired, vec![]),
        };
        Decision::Authorization {
            authz,
            command: spec.name.clone(),
            required: spec.scopes.iter().cloned().collect(),
            held: held.iter().cloned().collect(),
            missing,
            step_up: spec.step_up,
        }
        .into()
    }

    pub fn reason_code(&self) -> Option<&'static str> {
        match self {
            Self::Allow => None,
            Self::Deny { .. } => Some("missing_scope"),
            Self::StepUp => Some("step_up_required"),
        }
    }
}

/// The step-up link for a command: the configured template with `{command_id}` and `{nonce}`.
pub fn step_up_link(template: &str, command_id: uuid::Uuid, nonce: &str) -> String {
    template.replace("{command_id}", &command_id.to_string()).replace("{nonce}", nonce)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(scopes: &[&str], step_up: bool) -> CommandSpec {
        let registry = crate::domain::registry::Registry::shipped_for_tests();
        let mut spec = registry.get("refund").expect("refund").clone();
        spec.scopes = scopes.iter().map(|s| (*s).to_owned()).collect();
        spec.step_up = step_up;
        spec
    }

    fn held(scopes: &[&str]) -> BTreeSet<String> {
        scopes.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn scopes_then_step_up_decide() {
        let refund = spec(&["orders:refund"], false);
        assert_eq!(decide(&refund, &held(&["orders:refund", "orders:read"]), false), AuthzDecision::Allow);
        assert_eq!(
            decide(&refund, &held(&["orders:read"]), false),
            AuthzDecision::Deny { missing: vec!["orders:refund".into()] }
        );
        let close = spec(&["accounts:close"], true);
        assert_eq!(decide(&close, &held(&["accounts:close"]), false), AuthzDecision::StepUp);
        assert_eq!(decide(&close, &held(&["accounts:close"]), true), AuthzDecision::Allow);
        // No step-up makes up for a missing scope.
        assert!(matches!(decide(&close, &held(&[]), true), AuthzDecision::Deny { .. }));
        let evidence = AuthzDecision::Deny { missing: vec!["accounts:close".into()] }.evidence(&close, &held(&[]));
        assert_eq!(
            (evidence["authz"].as_str(), evidence["missing"][0].as_str()),
            (Some("deny"), Some("accounts:close"))
        );
    }

    #[test]
    fn the_link_names_the_command_and_the_nonce() {
        let id = uuid::Uuid::nil();
        assert_eq!(
            step_up_link("https://x/step-up?c={command_id}&n={nonce}", id, "abc"),
            format!("https://x/step-up?c={id}&n=abc")
        );
    }
}
