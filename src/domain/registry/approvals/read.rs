//! A command's approval rules as `commands.toml` writes them, checked and built, every problem
//! named with the line it is on.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::{ApprovalRule, Escalation, Need, RuleOutcome};
use crate::domain::lifecycle::CommandKind;
use crate::domain::registry::values::ValueRule;

/// How long a request waits for its approvers when the rule does not say.
const DEFAULT_WITHIN: Duration = Duration::from_secs(24 * 3600);

/// `[[commands.<name>.approvals]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRule {
    name: String,
    /// The values' conditions, each a value rule (`more_than`, `at_most`, `choices`, ...).
    #[serde(default)]
    when: BTreeMap<String, ValueRule>,
    #[serde(default)]
    requested_by: BTreeSet<String>,
    /// The roles that approve; with `refuse`, none.
    #[serde(default)]
    approvers: BTreeSet<String>,
    quorum: Option<u32>,
    within: Option<String>,
    escalate: Option<RawEscalation>,
    #[serde(default)]
    step_up: bool,
    /// Refused instead of asking anyone.
    #[serde(default)]
    refuse: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEscalation {
    after: String,
    to: BTreeSet<String>,
}

/// The rules of a command of `kind`, each checked against the values its patterns capture; a
/// problem is `(offset, what)`.
pub fn rules(
    raw: &[Spanned<RawRule>],
    (kind, captured): (CommandKind, &dyn Fn(&str) -> bool),
    problem: &mut dyn FnMut(usize, String),
) -> Vec<ApprovalRule> {
    if kind == CommandKind::Read
        && let Some(first) = raw.first()
    {
        // A read is answered at once and never waits: it has nothing for anyone to approve.
        problem(first.span().start, "approvals: a read is never held for approval (`kind = \"read\"`)".into());
    }
    let mut names = BTreeSet::new();
    let mut built = vec![];
    for spanned in raw {
        let at = spanned.span().start;
        let rule = spanned.get_ref();
        let mut problems = vec![];
        if !names.insert(rule.name.as_str()) {
            problems.push(format!("two rules are named `{}`", rule.name));
        }
        for (value, condition) in &rule.when {
            if !captured(value) {
                problems.push(format!("when.{value}: no pattern captures `{value}`"));
            } else if let Err(e) = condition.check() {
                problems.push(format!("when.{value}: {e}"));
            }
        }
        match outcome(rule) {
            Ok(outcome) if problems.is_empty() => built.push(ApprovalRule {
                name: rule.name.clone(),
                when: rule.when.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                requested_by: rule.requested_by.clone(),
                outcome,
            }),
            Ok(_) => {}
            Err(e) => problems.push(e),
        }
        for what in problems {
            problem(at, format!("approvals `{}`: {what}", rule.name));
        }
    }
    built
}

/// What the rule asks for, or what is wrong with it.
fn outcome(rule: &RawRule) -> Result<RuleOutcome, String> {
    let duration = |text: &str, field: &str| {
        humantime::parse_duration(text)
            .map_err(|e| format!("{field} `{text}` is not a duration such as 30m or 4h: {e}"))
    };
    if rule.refuse {
        let asks = !rule.approvers.is_empty() || rule.quorum.is_some() || rule.escalate.is_some() || rule.step_up;
        return if asks { Err("a rule that refuses names no approvers".into()) } else { Ok(RuleOutcome::Refuse) };
    }
    if rule.approvers.is_empty() {
        return Err("`approvers` names the roles that approve (or `refuse = true`)".into());
    }
    let quorum = rule.quorum.unwrap_or(1);
    if quorum == 0 {
        return Err("`quorum` is at least 1".into());
    }
    let within = rule.within.as_deref().map(|w| duration(w, "within")).transpose()?.unwrap_or(DEFAULT_WITHIN);
    let escalation = match &rule.escalate {
        None => None,
        Some(raw) if raw.to.is_empty() => return Err("`escalate.to` names the roles asked next".into()),
        Some(raw) => {
            let after = duration(&raw.after, "escalate.after")?;
            if after >= within {
                return Err(format!("`escalate.after` ({}) comes before `within` ends", raw.after));
            }
            Some(Escalation { after, to: raw.to.clone() })
        }
    };
    Ok(RuleOutcome::Approval(Need {
        approvers: rule.approvers.clone(),
        quorum,
        within,
        escalation,
        step_up: rule.step_up,
    }))
}

/// Every role a command's rules name (to check against the directory's roles).
pub fn roles_named(rules: &[ApprovalRule]) -> BTreeSet<&str> {
    let mut roles: BTreeSet<&str> = BTreeSet::new();
    for rule in rules {
        roles.extend(rule.requested_by.iter().map(String::as_str));
        if let RuleOutcome::Approval(need) = &rule.outcome {
            roles.extend(need.approvers.iter().map(String::as_str));
            roles.extend(need.escalation.iter().flat_map(|e| e.to.iter().map(String::as_str)));
        }
    }
    roles
}
