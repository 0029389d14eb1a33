//! The demo's policy for refunds, as docs/APPROVALS.md writes it: over 100.00 one supervisor,
//! over 1,000.00 two, a customer alone up to 50.00, and a role that may not refund more than
//! 500.00 at all.

use serde_json::json;

use super::*;

fn roles(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

fn over(amount: &str) -> Vec<(String, ValueRule)> {
    vec![("amount".into(), ValueRule { more_than: Some(amount.into()), ..ValueRule::default() })]
}

fn need(quorum: u32) -> Need {
    Need {
        approvers: roles(&["supervisor"]),
        quorum,
        within: Duration::from_secs(4 * 3600),
        escalation: Some(Escalation { after: Duration::from_secs(3600), to: roles(&["admin"]) }),
        step_up: false,
    }
}

fn rule(name: &str, when: Vec<(String, ValueRule)>, by: &[&str], outcome: RuleOutcome) -> ApprovalRule {
    ApprovalRule { name: name.into(), when, requested_by: roles(by), outcome }
}

fn refunds() -> Vec<ApprovalRule> {
    vec![
        rule("large refund", over("100.00"), &[], RuleOutcome::Approval(need(1))),
        rule("very large refund", over("1000.00"), &[], RuleOutcome::Approval(need(2))),
        rule("a customer's own limit", over("50.00"), &["customer"], RuleOutcome::Approval(need(1))),
        rule("an intern's limit", over("500.00"), &["intern"], RuleOutcome::Refuse),
    ]
}

fn asked(amount: &str, by: &[&str]) -> Verdict {
    let args = json!({"order_id": "1234", "amount": amount});
    evaluate(&refunds(), args.as_object().expect("an object"), &roles(by))
}

fn names(verdict: &Verdict) -> Vec<&str> {
    match verdict {
        Verdict::Needs(needs) => needs.iter().map(|(name, _)| name.as_str()).collect(),
        _ => vec![],
    }
}

#[test]
fn rules_apply_by_value_exactly_and_by_who_asks() {
    assert_eq!(asked("25.00", &["customer"]), Verdict::Alone);
    assert_eq!(asked("50.00", &["customer"]), Verdict::Alone, "at the limit is within it");
    assert_eq!(names(&asked("50.01", &["customer"])), ["a customer's own limit"]);
    assert_eq!(asked("80.00", &["supervisor"]), Verdict::Alone, "a customer's limit is not a supervisor's");
    assert_eq!(asked("100.00", &["supervisor"]), Verdict::Alone);
    assert_eq!(names(&asked("100.01", &["supervisor"])), ["large refund"]);
    assert_eq!(names(&asked("250.00", &["customer"])), ["large refund", "a customer's own limit"]);
    assert_eq!(names(&asked("1500.00", &["admin"])), ["large refund", "very large refund"]);
    // Exact: a float would read 0.1 + 0.2 past 0.3; the registry's fixed point does not.
    assert_eq!(asked("100.000000000000000001", &["admin"]), Verdict::Needs(vec![("large refund".into(), need(1))]));
}

#[test]
fn a_refusing_rule_wins_and_a_missing_value_fails_closed() {
    assert_eq!(asked("600.00", &["intern"]), Verdict::Refused { rule: "an intern's limit".into() });
    assert_eq!(names(&asked("400.00", &["intern"])), ["large refund"]);
    let without_amount = json!({"order_id": "1234"});
    let verdict = evaluate(&refunds(), without_amount.as_object().expect("an object"), &roles(&["intern"]));
    assert_eq!(verdict, Verdict::Refused { rule: "an intern's limit".into() });
}

fn decided(approver: &str, role: &str, approve: bool) -> Decided {
    let vote = if approve { Vote::Approve } else { Vote::Deny };
    Decided { approver: approver.into(), roles: roles(&[role]), vote }
}

const MINUTE: Duration = Duration::from_secs(60);

#[test]
fn quorum_counts_distinct_approvers_never_the_requester() {
    let Verdict::Needs(needs) = asked("1500.00", &["supervisor"]) else { panic!("needs approval") };
    let one = [decided("s1", "supervisor", true)];
    let missing = |tally: Tally| match tally {
        Tally::Waiting(missing) => missing.into_iter().map(|m| (m.rule, m.approvals)).collect::<Vec<_>>(),
        other => panic!("still waiting, not {other:?}"),
    };
    assert_eq!(missing(tally(&needs, "s0", &one, MINUTE)), [("very large refund".to_owned(), 1)]);
    let twice = [decided("s1", "supervisor", true), decided("s1", "supervisor", true)];
    assert_eq!(missing(tally(&needs, "s0", &twice, MINUTE)), [("very large refund".to_owned(), 1)], "once");
    let own = [decided("s0", "supervisor", true), decided("s1", "supervisor", true)];
    assert_eq!(missing(tally(&needs, "s0", &own, MINUTE)), [("very large refund".to_owned(), 1)], "not their own");
    let customer = [decided("c1", "customer", true), decided("s1", "supervisor", true)];
    assert_eq!(missing(tally(&needs, "s0", &customer, MINUTE)), [("very large refund".to_owned(), 1)]);
    let two = [decided("s1", "supervisor", true), decided("s2", "supervisor", true)];
    assert_eq!(tally(&needs, "s0", &two, MINUTE), Tally::Approved);
}

#[test]
fn a_denial_ends_it_and_a_later_change_of_mind_does_not_count() {
    let Verdict::Needs(needs) = asked("250.00", &["customer"]) else { panic!("needs approval") };
    let denied = [decided("s1", "supervisor", false), decided("s1", "supervisor", true)];
    assert_eq!(tally(&needs, "c0", &denied, MINUTE), Tally::Denied { by: "s1".into() });
    let outsider = [decided("c9", "customer", false), decided("s1", "supervisor", true)];
    assert_eq!(tally(&needs, "c0", &outsider, MINUTE), Tally::Approved, "one who may not decide denies nothing");
}

#[test]
fn escalation_widens_who_may_decide_and_time_runs_out() {
    let Verdict::Needs(needs) = asked("250.00", &["customer"]) else { panic!("needs approval") };
    let admin = [decided("a1", "admin", true)];
    let Tally::Waiting(missing) = tally(&needs, "c0", &admin, MINUTE) else { panic!("an admin cannot yet") };
    assert!(missing.iter().all(|m| m.roles == roles(&["supervisor"])));
    assert_eq!(tally(&needs, "c0", &admin, 61 * MINUTE), Tally::Approved, "escalated after an hour");
    assert_eq!(tally(&needs, "c0", &[], 4 * 60 * MINUTE), Tally::Expired { rule: "large refund".into() });
}

/// A command of its own with `approvals` appended, read as the registry reads it.
fn registry_with(approvals: &str) -> Result<crate::domain::registry::Registry, String> {
    let command = concat!(
        "[commands.refund]\nentity = \"order\"\naction = \"refund\"\n",
        "patterns = [\"refund {order_id:id} {amount:money}\"]\nkind = \"mutation\"\nexecutor = \"orders\"\n",
    );
    let executors = ["orders".to_owned()].into_iter().collect();
    let text = format!("{command}{approvals}");
    crate::domain::registry::Registry::parse(std::path::Path::new("commands.toml"), &text, &executors, MINUTE)
        .map_err(|e| e.to_string())
}

/// The problem a rule named `x` with `fields` is refused for.
fn refused(fields: &str) -> String {
    registry_with(&format!("[[commands.refund.approvals]]\nname = \"x\"\n{fields}")).expect_err("refused")
}

#[test]
fn a_policy_is_read_with_the_registry_and_each_problem_names_its_line() {
    let good = concat!(
        "[[commands.refund.approvals]]\nname = \"big\"\nwhen.amount = { more_than = \"100.00\" }\n",
        "approvers = [\"supervisor\"]\nquorum = 2\nwithin = \"4h\"\n",
        "escalate = { after = \"1h\", to = [\"admin\"] }\n",
    );
    let registry = registry_with(good).expect("a sound policy");
    let rules = &registry.get("refund").expect("refund").approvals;
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0].outcome, RuleOutcome::Approval(Need { quorum: 2, ..need(1) }));
    let unknown = refused("when.colour = { choices = [\"red\"] }\napprovers = [\"s\"]\n");
    assert!(unknown.contains("commands.toml:7: command `refund`: approvals `x`: when.colour: no pattern"), "{unknown}");
    assert!(refused("approvers = [\"s\"]\nquorum = 0\n").contains("`quorum` is at least 1"));
    assert!(refused("").contains("`approvers` names the roles"));
    assert!(refused("refuse = true\napprovers = [\"s\"]\n").contains("a rule that refuses names no approvers"));
    let late = refused("approvers = [\"s\"]\nwithin = \"1h\"\nescalate = { after = \"2h\", to = [\"a\"] }\n");
    assert!(late.contains("comes before `within` ends"), "{late}");
    assert!(refused("approvers = [\"s\"]\nwithin = \"soon\"\n").contains("not a duration"));
}

#[test]
fn escalations_come_due_in_their_order_and_ask_only_roles_not_asked_before() {
    let hour = Duration::from_secs(3600);
    let mut later = need(1);
    later.escalation = Some(Escalation { after: 2 * hour, to: roles(&["director", "supervisor"]) });
    let needs = vec![("first".to_owned(), need(1)), ("second".to_owned(), later)];
    assert_eq!(next_escalation(&needs, Duration::ZERO), Some(hour));
    assert_eq!(next_escalation(&needs, hour), Some(2 * hour), "the one due at an hour is past");
    assert_eq!(next_escalation(&needs, 2 * hour), None);
    assert_eq!(escalating_roles(&needs, hour, hour), roles(&["admin"]));
    // The supervisors decide from the start: escalating to them asks no one new.
    assert_eq!(escalating_roles(&needs, 2 * hour, 3 * hour), roles(&["director"]));
    assert!(escalating_roles(&needs, Duration::ZERO, hour / 2).is_empty());
}
