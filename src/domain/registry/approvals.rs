//! Approval policies as data: for one command, rules over its values and over who asks decide
//! whether it may go ahead alone, needs other people's approval (by role, how many, within what
//! time, escalated to other roles after a while, with or without their step-up), or is refused.
//! Evaluated by pure functions — [`evaluate`] when a command is asked for, [`tally`] as decisions
//! come in — so that `check-config` and explanations run them without a gateway.
//!
//! Every rule whose conditions hold applies, and all of them must be satisfied: a refund of
//! 1,500.00 that matches "over 100.00: one supervisor" and "over 1,000.00: two supervisors" needs
//! two distinct supervisors (one approval counts towards every rule its approver may satisfy). A
//! rule that refuses wins over any that asks. The requester never counts as an approver.
//! Amounts compare exactly, as the registry's value rules do (fixed point, never floats).

use std::collections::BTreeSet;
use std::time::Duration;

use super::values::ValueRule;
use crate::domain::command::envelope::Args;
use crate::domain::names::named_enum;

/// One rule of a command's policy (`[[commands.<name>.approvals]]`).
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRule {
    /// How the rule is named in evidence, replies and explanations.
    pub name: String,
    /// The values' conditions, all of which must hold (`when.amount = { more_than = "100.00" }`);
    /// none: always. A value the command does not carry counts as holding (fail closed).
    pub when: Vec<(String, ValueRule)>,
    /// The rule applies only when the requester holds one of these roles; empty: anyone.
    pub requested_by: BTreeSet<String>,
    pub outcome: RuleOutcome,
}

/// What a rule whose conditions hold asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum RuleOutcome {
    /// Other people's approval.
    Approval(Need),
    /// The request is refused: beyond what the requester may do at all.
    Refuse,
}

/// The approval a rule needs (kept with a waiting request as it was asked).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Need {
    /// The roles whose holders may approve.
    pub approvers: BTreeSet<String>,
    /// How many distinct approvers (at least 1).
    pub quorum: u32,
    /// How long the request waits for them before it is refused as expired.
    pub within: Duration,
    pub escalation: Option<Escalation>,
    /// Whether an approver proves who they are with a step-up token too.
    pub step_up: bool,
}

/// After `after` without the quorum, the holders of `to` may approve as well.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Escalation {
    pub after: Duration,
    pub to: BTreeSet<String>,
}

/// What a command's policy says of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No rule applies: the request goes ahead as the requester's own.
    Alone,
    /// These rules apply; every one must be satisfied.
    Needs(Vec<(String, Need)>),
    /// The named rule refuses it.
    Refused { rule: String },
}

/// What the policy `rules` says of a request with `args` by someone holding `roles`.
pub fn evaluate(rules: &[ApprovalRule], args: &Args, roles: &BTreeSet<String>) -> Verdict {
    let applies = |rule: &&ApprovalRule| {
        let by_them = rule.requested_by.is_empty() || !rule.requested_by.is_disjoint(roles);
        by_them
            && rule
                .when
                .iter()
                .all(|(name, condition)| args.get(name).is_none_or(|v| condition.admits(name, v).is_ok()))
    };
    let applying: Vec<&ApprovalRule> = rules.iter().filter(applies).collect();
    if let Some(refusing) = applying.iter().find(|rule| rule.outcome == RuleOutcome::Refuse) {
        return Verdict::Refused { rule: refusing.name.clone() };
    }
    let needs: Vec<(String, Need)> = applying
        .into_iter()
        .filter_map(|rule| match &rule.outcome {
            RuleOutcome::Approval(need) => Some((rule.name.clone(), need.clone())),
            RuleOutcome::Refuse => None,
        })
        .collect();
    if needs.is_empty() { Verdict::Alone } else { Verdict::Needs(needs) }
}

/// One person's decision on a request, with the roles they held when they decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    pub approver: String,
    pub roles: BTreeSet<String>,
    pub vote: Vote,
}

named_enum! {
    /// Where an approval stands; only `pending` can be decided on. `closed`: its command ended
    /// another way (an operator's cancel) while it waited.
    ApprovalStatus {
        Pending => "pending",
        Approved => "approved",
        Denied => "denied",
        Expired => "expired",
        Overridden => "overridden",
        Closed => "closed",
    }
}

named_enum! {
    /// One person's decision on an approval, as the API takes it and the evidence records it.
    Vote {
        Approve => "approve",
        Deny => "deny",
    }
}

named_enum! {
    /// Where an approval stands after a decision, as its evidence records it.
    Standing {
        Approved => "approved",
        Denied => "denied",
        Expired => "expired",
        Waiting => "waiting",
    }
}

/// Where a request waiting for approval stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tally {
    /// Every rule has its quorum.
    Approved,
    /// Someone who may decide denied it.
    Denied { by: String },
    /// Past the longest wait of a rule not yet satisfied.
    Expired { rule: String },
    /// Still waiting: for each rule not satisfied, how many more approvals and whose.
    Waiting(Vec<Missing>),
}

impl Tally {
    pub fn standing(&self) -> Standing {
        match self {
            Self::Approved => Standing::Approved,
            Self::Denied { .. } => Standing::Denied,
            Self::Expired { .. } => Standing::Expired,
            Self::Waiting(_) => Standing::Waiting,
        }
    }
}

/// What one rule still lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    pub rule: String,
    pub approvals: u32,
    /// The roles that may give them now (escalation included).
    pub roles: BTreeSet<String>,
}

/// How long after its request the first escalation of `needs` still to come after `waited` is
/// due; none when no escalation is left.
pub fn next_escalation(needs: &[(String, Need)], waited: Duration) -> Option<Duration> {
    let afters = needs.iter().filter_map(|(_, need)| need.escalation.as_ref().map(|e| e.after));
    afters.filter(|after| *after > waited).min()
}

/// The roles `needs` escalate to after waiting from `since` to `by` (the escalations due then),
/// beyond the roles that decide from the start.
pub fn escalating_roles(needs: &[(String, Need)], since: Duration, by: Duration) -> BTreeSet<String> {
    let due = needs.iter().filter_map(|(_, need)| need.escalation.as_ref().filter(|e| (since..=by).contains(&e.after)));
    let approvers: BTreeSet<&String> = needs.iter().flat_map(|(_, need)| &need.approvers).collect();
    due.flat_map(|e| e.to.iter()).filter(|role| !approvers.contains(role)).cloned().collect()
}

/// Whether `person` holding `roles` may decide on `need` after `waited`: they hold an approver's
/// role (or, once escalated, one of the escalation's), and they did not ask.
pub fn may_decide(need: &Need, requester: &str, person: &str, roles: &BTreeSet<String>, waited: Duration) -> bool {
    person != requester && !roles.is_disjoint(&deciders(need, waited))
}

/// The roles that may decide on `need` after `waited`.
pub fn deciders(need: &Need, waited: Duration) -> BTreeSet<String> {
    let mut roles = need.approvers.clone();
    if let Some(escalation) = need.escalation.as_ref().filter(|e| waited >= e.after) {
        roles.extend(escalation.to.iter().cloned());
    }
    roles
}

/// Where `needs` stand after `decisions` (in the order they were made; one person's later
/// decisions after their first do not count), `waited` after the request began waiting. A
/// decision by someone who may not decide on any rule counts for nothing.
pub fn tally(needs: &[(String, Need)], requester: &str, decisions: &[Decided], waited: Duration) -> Tally {
    let mut seen = BTreeSet::new();
    let first: Vec<&Decided> = decisions.iter().filter(|d| seen.insert(d.approver.as_str())).collect();
    let may = |need: &Need, d: &Decided| may_decide(need, requester, &d.approver, &d.roles, waited);
    if let Some(denial) = first.iter().find(|d| d.vote == Vote::Deny && needs.iter().any(|(_, need)| may(need, d))) {
        return Tally::Denied { by: denial.approver.clone() };
    }
    let mut missing = vec![];
    for (rule, need) in needs {
        let given = first.iter().filter(|d| d.vote == Vote::Approve && may(need, d)).count() as u32;
        if given < need.quorum {
            if waited >= need.within {
                return Tally::Expired { rule: rule.clone() };
            }
            missing.push(Missing { rule: rule.clone(), approvals: need.quorum - given, roles: deciders(need, waited) });
        }
    }
    if missing.is_empty() { Tally::Approved } else { Tally::Waiting(missing) }
}

pub mod read;
#[cfg(test)]
mod tests;
