//! Command authorization, the `authz_pending` stage: the actor's scopes (from the directory's
//! roles) against the command's required scopes, and whether a fresh step-up proof is needed.
//! Pure: the callers turn the decision into moves, evidence and replies.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::domain::command::Args;
use crate::domain::evidence::decision::{AuthzVerdict, Decision};
use crate::domain::registry::CommandSpec;
use crate::domain::registry::approvals::{self, Need, Verdict};

/// The reason code of a request waiting for its requester's step-up proof.
pub const STEP_UP_REQUIRED: &str = "step_up_required";
/// The reason code of a request its approval policy refuses.
pub const POLICY_REFUSED: &str = "policy_refused";
/// The reason code of a request waiting for other people's approval.
pub const APPROVAL_REQUIRED: &str = "approval_required";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthzDecision {
    Allow,
    /// The actor lacks these scopes.
    Deny {
        missing: Vec<String>,
    },
    /// Allowed by scope, but only after a step-up proof.
    StepUp,
    /// The command's approval policy refuses it for this requester (by the named rule).
    Refused {
        rule: String,
    },
    /// Allowed by scope, and waits for other people's approval: the policy's rules that apply.
    Approval {
        needs: Vec<(String, Need)>,
    },
}

/// Who asks, as the approval policy reads them, and what they ask with.
#[derive(Debug, Clone, Copy)]
pub struct Requester<'a> {
    pub roles: &'a BTreeSet<String>,
    pub args: &'a Args,
}

/// [`decide`], then the command's approval policy: a refusing rule refuses whatever the scopes
/// say (before anyone steps up); rules that ask for approval are asked after the step-up.
pub fn decide_with_policy(
    spec: &CommandSpec,
    held: &BTreeSet<String>,
    requester: Requester<'_>,
    stepped_up: bool,
) -> AuthzDecision {
    let decision = decide(spec, held, stepped_up);
    if matches!(decision, AuthzDecision::Deny { .. }) {
        return decision;
    }
    match approvals::evaluate(&spec.approvals, requester.args, requester.roles) {
        Verdict::Refused { rule } => AuthzDecision::Refused { rule },
        Verdict::Needs(needs) if decision == AuthzDecision::Allow => AuthzDecision::Approval { needs },
        _ => decision,
    }
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
        let (authz, missing, policy) = match self {
            Self::Allow => (AuthzVerdict::Allow, vec![], None),
            Self::Deny { missing } => (AuthzVerdict::Deny, missing.clone(), None),
            Self::StepUp => (AuthzVerdict::StepUpRequired, vec![], None),
            Self::Refused { rule } => (AuthzVerdict::PolicyRefused, vec![], Some(vec![rule.clone()])),
            Self::Approval { needs } => {
                (AuthzVerdict::ApprovalRequired, vec![], Some(needs.iter().map(|(rule, _)| rule.clone()).collect()))
            }
        };
        Decision::Authorization {
            authz,
            command: spec.name.clone(),
            required: spec.scopes.iter().cloned().collect(),
            held: held.iter().cloned().collect(),
            missing,
            step_up: spec.step_up,
            policy,
        }
        .into()
    }

    pub fn reason_code(&self) -> Option<&'static str> {
        match self {
            Self::Allow => None,
            Self::Deny { .. } => Some("missing_scope"),
            Self::StepUp => Some(STEP_UP_REQUIRED),
            Self::Refused { .. } => Some(POLICY_REFUSED),
            Self::Approval { .. } => Some(APPROVAL_REQUIRED),
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
