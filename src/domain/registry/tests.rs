use crate::domain::registry::*;

fn executors() -> BTreeSet<String> {
    ["orders".to_owned(), "gateway".to_owned()].into_iter().collect()
}

fn parse(text: &str) -> Result<Registry, RegistryError> {
    Registry::parse(Path::new("commands.toml"), text, &executors(), Duration::from_secs(3_600))
}

fn shipped() -> Registry {
    Registry::shipped_for_tests()
}

#[test]
fn the_shipped_registry_interprets_the_demo_commands() {
    let registry = shipped();
    match registry.interpret_text("Refund  1234   25.00") {
        Interpretation::Command { spec, args, .. } => {
            assert_eq!((spec.name.as_str(), spec.kind, spec.confirmation), ("refund", CommandKind::Mutation, true));
            assert_eq!(serde_json::Value::Object(args), serde_json::json!({"order_id": "1234", "amount": "25"}));
        }
        other => panic!("{other:?}"),
    }
    let status = registry.interpret_text("order status A-17");
    assert!(matches!(status, Interpretation::Command { spec, .. } if spec.name == "order_status"));
    assert!(
        matches!(registry.interpret_text("close account 99"), Interpretation::Command { spec, .. } if spec.step_up)
    );
    let tapped = registry.interpret_reply_id("order_status:42");
    assert!(matches!(tapped, Interpretation::Command { spec, .. } if spec.name == "order_status"));
    assert_eq!(registry.interpret_text("HELP"), Interpretation::Help);
    assert_eq!(registry.interpret_text("what's up"), Interpretation::NoMatch);
    assert_eq!(registry.interpret_text("   "), Interpretation::NoMatch);
}

#[test]
fn equal_amounts_in_different_forms_are_one_argument() {
    let registry = shipped();
    let amount = |text| match registry.interpret_text(text) {
        Interpretation::Command { args, .. } => args["amount"].clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(amount("refund 1234 25"), amount("refund 1234 25.0"));
    assert_eq!(amount("refund 1234 25.0"), amount("refund 1234 25.00"));
    assert_ne!(amount("refund 1234 25"), amount("refund 1234 25.01"));
}

#[test]
fn a_command_without_a_window_gets_the_configured_default() {
    let registry = shipped();
    assert_eq!(registry.get("order_status").map(|c| c.dedupe_window), Some(Duration::from_secs(3_600)));
    assert_eq!(registry.get("refund").map(|c| c.dedupe_window), Some(Duration::from_secs(86_400)), "declared 24h");
}

#[test]
fn help_lists_only_what_the_actor_may_ask() {
    let registry = shipped();
    let customer: BTreeSet<String> = ["orders:read".into(), "orders:refund".into()].into_iter().collect();
    let lines = registry.help_lines(&customer);
    // The two order commands first, then what everyone may ask the gateway itself.
    assert_eq!(lines.len(), 6, "{lines:?}");
    assert!(lines[..2].iter().all(|l| l.starts_with("order status") || l.starts_with("refund {order_id}")));
    assert!(lines.iter().any(|l| l.starts_with("status {ref}")) && lines.iter().any(|l| l.starts_with("why {ref}")));
    assert!(!lines.iter().any(|l| l.contains("close account") || l.contains("retry") || l.contains("failures")));
    let nobody = registry.help_lines(&BTreeSet::new());
    assert!(nobody.iter().all(|l| ["status", "why", "more"].iter().any(|w| l.starts_with(w))), "{nobody:?}");
}

#[test]
fn overlapping_patterns_are_refused_naming_both_lines() {
    let err = parse(
        r#"
[commands.a]
entity = "order"
action = "status"
patterns = ["order {what:word} {id:id}"]
kind = "read"
executor = "orders"

[commands.b]
entity = "order"
action = "cancel"
patterns = ["order cancel {id:id}"]
kind = "mutation"
executor = "orders"
"#,
    )
    .expect_err("overlap");
    assert_eq!(err.0.len(), 1, "{err}");
    assert!(err.0[0].starts_with("commands.toml:9:") && err.0[0].contains("commands.toml:2"), "{err}");
    assert!(err.0[0].contains("overlaps"), "{err}");
}

#[test]
fn every_problem_is_reported_with_its_line() {
    let err = parse(
        r#"[commands.broken]
entity = "order"
action = "refund"
target = "order_id"
patterns = ["refund {order_id:cash}"]
kind = "mutation"
idempotency = "I0"
dedupe_window = "a while"
executor = "payments"
compensation = "nope"
"#,
    )
    .expect_err("invalid");
    let text = err.to_string();
    for expected in [
        "commands.toml:5: command `broken`: pattern `refund {order_id:cash}`",
        "commands.toml:8: command `broken`: dedupe_window `a while` is not a duration",
        "commands.toml:9: command `broken`: executor `payments` is not configured",
        "a mutation cannot be I0",
    ] {
        assert!(text.contains(expected), "missing `{expected}` in {text}");
    }
}

#[test]
fn structural_mistakes_are_refused() {
    assert!(parse("[commands.x]\nentity = \"a\"\n").is_err(), "missing fields");
    assert!(
        parse("[commands.x]\nentity = \"a\"\naction = \"b\"\nkind = \"read\"\nexecutor = \"orders\"\nsurprise = 1\n")
            .is_err()
    );
    // Every case below starts the same: one command `x`.
    let x = |rest: &str| format!("[commands.x]\nentity = \"a\"\naction = \"b\"\npatterns = [\"x\"]\n{rest}");
    let read_with_confirmation = x("kind = \"read\"\nconfirmation = true\nexecutor = \"orders\"\n");
    assert!(parse(&read_with_confirmation).expect_err("read").to_string().contains("neither confirmation"));
    let step_up_unconfirmed = x("kind = \"mutation\"\nconfirmation = false\nstep_up = true\nexecutor = \"orders\"\n");
    assert!(parse(&step_up_unconfirmed).expect_err("step-up").to_string().contains("step_up needs confirmation"));
    let unknown_target = x("kind = \"read\"\nexecutor = \"orders\"\nalso_executors = [\"ledger\"]\n");
    assert!(parse(&unknown_target).expect_err("unknown target").to_string().contains("also_executors: `ledger`"));
    let lock_without_target = x("kind = \"mutation\"\nexecutor = \"orders\"\nlock = \"refuse\"\n");
    let refused = parse(&lock_without_target).expect_err("a lock names a target").to_string();
    assert!(refused.contains(":7: command `x`: lock = \"refuse\" needs kind = \"mutation\" and a target"), "{refused}");
    let unknown_rule = x("kind = \"mutation\"\ntarget = \"b\"\nexecutor = \"orders\"\nlock = \"later\"\n");
    assert!(parse(&unknown_rule).expect_err("an unknown rule").to_string().contains("later"));
    let wait_unconfirmed =
        x("kind = \"mutation\"\ntarget = \"b\"\nconfirmation = false\nexecutor = \"orders\"\nlock = \"wait\"\n");
    let refused = parse(&wait_unconfirmed).expect_err("a waiter is asked when its turn comes").to_string();
    assert!(refused.contains("lock = \"wait\" needs confirmation = true"), "{refused}");
    let preview_read = x("kind = \"read\"\nexecutor = \"orders\"\npreview = \"optional\"\n");
    let refused = parse(&preview_read).expect_err("a read has no prompt to show a preview in").to_string();
    assert!(refused.contains("preview = \"optional\" needs kind = \"mutation\" and confirmation"), "{refused}");
    let bad_comp = x("kind = \"mutation\"\nexecutor = \"orders\"\ncompensation = \"y\"\n");
    assert!(parse(&bad_comp).expect_err("compensation").to_string().contains("compensation `y` is not a command"));
    let err = parse("[commands\n").expect_err("syntax");
    assert!(err.to_string().starts_with("commands.toml:1"), "{err}");
}

#[test]
fn a_message_matching_two_commands_is_ambiguous_at_run_time() {
    // `check-config` refuses such a registry; the runtime guard is still there.
    let shipped = shipped();
    let mut twin = shipped.get("refund").expect("refund").clone();
    twin.name = "refund_twin".into();
    let registry = Registry::from_specs(vec![shipped.get("refund").expect("refund").clone(), twin]);
    match registry.interpret_text("refund 1 2") {
        Interpretation::Ambiguous(specs) => assert_eq!(specs.len(), 2),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_command_reads_to_a_person_as_the_registry_says_never_as_a_raw_pattern() {
    let registry = shipped();
    let Interpretation::Command { spec, args, .. } = registry.interpret_text("refund 1234 25.00") else {
        panic!("a refund");
    };
    assert_eq!(spec.reads(&args), "refund 25 on order 1234");
    let with = |reads_as: &str| {
        format!(
            "[commands.r]\nentity = \"o\"\naction = \"r\"\n\
             patterns = [\"r {{id:id}}\", \"again {{id:id}} {{n:int}}\"]\n\
             kind = \"read\"\nexecutor = \"orders\"\nreads_as = \"{reads_as}\"\n"
        )
    };
    let only_in_one = parse(&with("r {n} of {id}")).expect_err("`n` is not in every pattern").to_string();
    assert!(only_in_one.contains("reads_as: `{n}` is not a placeholder of every pattern"), "{only_in_one}");
    let unclosed = parse(&with("r {id")).expect_err("unclosed").to_string();
    assert!(unclosed.contains("reads_as `r {id` a `{` without its `}`"), "{unclosed}");
    let fine = parse(&with("item {id}")).expect("parses");
    let Interpretation::Command { spec, args, .. } = fine.interpret_text("again 7 3") else { panic!("a command") };
    assert_eq!(spec.reads(&args), "item 7");
    // Without `reads_as`, the first pattern with its values: no `{placeholder}` reaches a person.
    let Interpretation::Command { spec, args, .. } = registry.interpret_text("order status A-17") else {
        panic!("order status");
    };
    assert!(!spec.reads(&args).contains('{'), "{}", spec.reads(&args));
}

#[test]
fn a_refund_of_nothing_of_a_negative_or_of_a_fraction_of_a_cent_breaks_its_rule() {
    let registry = shipped();
    let rule_of = |text: &str| match registry.interpret_text(text) {
        Interpretation::BrokenRule { spec, broken } => Some((spec.name.clone(), broken.rule, broken.limit)),
        Interpretation::Command { .. } => None,
        other => panic!("{text}: {other:?}"),
    };
    let refund = |rule: RuleKind, limit: &str| Some(("refund".to_owned(), rule, limit.to_owned()));
    assert_eq!(rule_of("refund 1234 -25"), refund(RuleKind::MoreThan, "0"));
    assert_eq!(rule_of("refund 1234 0"), refund(RuleKind::MoreThan, "0"));
    assert_eq!(rule_of("refund 1234 0.00"), refund(RuleKind::MoreThan, "0"));
    assert_eq!(rule_of("refund 1234 25.999"), refund(RuleKind::Decimals, "2"));
    assert_eq!(rule_of("refund 1234 10000.01"), refund(RuleKind::AtMost, "10000"));
    assert_eq!(rule_of("reverse refund 1234 -1"), Some(("refund_reversal".into(), RuleKind::MoreThan, "0".into())));
    assert_eq!(rule_of("refund 1234 25.00"), None);
    assert_eq!(rule_of("refund 1234 0.01"), None);
    assert_eq!(rule_of("refund 1234 10000"), None);
}

#[test]
fn a_value_rule_names_a_captured_value_and_is_sound() {
    let with = |values: &str| {
        format!(
            "[commands.x]\nentity = \"a\"\naction = \"b\"\npatterns = [\"x {{n:decimal}}\"]\nkind = \"read\"\n\
             executor = \"orders\"\n{values}\n"
        )
    };
    let err = parse(&with("values.m = { more_than = \"0\" }")).expect_err("not captured").to_string();
    assert!(err.contains("commands.toml:7: command `x`: values.m: no pattern captures `m`"), "{err}");
    let err = parse(&with("values.n = { at_most = \"lots\" }")).expect_err("not a number").to_string();
    assert!(err.contains("values.n: `at_most` is a number"), "{err}");
    assert!(parse(&with("values.n = { kind = 1 }")).is_err(), "an unknown field");
    let fine = parse(&with("values.n = { at_least = \"1\", decimals = 0 }")).expect("valid");
    assert!(matches!(fine.interpret_text("x 0"), Interpretation::BrokenRule { .. }));
    assert!(matches!(fine.interpret_text("x 3"), Interpretation::Command { .. }));
}

#[test]
fn everyday_phrasings_are_read_and_their_values_kept() {
    let registry = shipped();
    let read = |text: &str| match registry.interpret_text(text) {
        Interpretation::Command { spec, args, .. } => {
            let values: Vec<String> = args.values().map(|v| v.as_str().unwrap_or_default().to_owned()).collect();
            format!("{} {}", spec.name, values.join(" "))
        }
        other => format!("{other:?}"),
    };
    for (text, reading) in [
        ("Order status 1234?", "order_status 1234"),
        ("order status #1234", "order_status 1234"),
        ("Where is my order 1234?", "order_status 1234"),
        ("hi, where is order A-17 please", "order_status A-17"),
        ("ＯＲＤＥＲ ＳＴＡＴＵＳ １２３４", "order_status 1234"),
        ("please refund 1234 25.00", "refund 25 1234"),
        ("refund #1234 25.00, thanks!", "refund 25 1234"),
        ("Refund 25.00 on order 1234.", "refund 25 1234"),
        ("refund order no. 1234 25", "refund 25 1234"),
        ("Olá, estado da encomenda 1234?", "order_status 1234"),
        ("reembolsar 1234 25.00 por favor", "refund 25 1234"),
        ("help?", "Help"),
    ] {
        assert_eq!(read(text), reading, "{text}");
    }
    // Never read: a negation, two commands, a filler inside the values, a word left over.
    for (text, reading) in [
        ("don't refund 1234 25.00", "negated"),
        ("Don’t refund #1234 25.00!", "negated"),
        ("do not refund 1234 -25", "negated"),
        ("refund 1234 25.00 no wait", "negated"),
        ("não reembolsar 1234 25.00", "negated"),
        ("refund 1234 25.00 and order status 1234", "several"),
        ("refund 1234 25.00 order status 1234", "several"),
        ("reembolsar 1234 25.00 e estado da encomenda 1234", "several"),
        ("refund please 1234 25.00", "suggested"),
        ("refund 1234 25.00 and 4567 10.00", "no_match"),
        ("refund 1234 25.00 extra", "suggested"),
        ("refund 1234 25.00 30", "no_match"),
    ] {
        assert_eq!(registry.interpret_text(text).label(), reading, "{text}");
    }
    // Normalized, a value that breaks its rule is still told so, never read.
    assert!(matches!(registry.interpret_text("please refund #1234 -25!"), Interpretation::BrokenRule { .. }));
}

#[test]
fn check_config_reports_patterns_that_overlap_once_normalized() {
    let two = |a: &str, b: &str| {
        format!(
            "[commands.a]\nentity = \"a\"\naction = \"a\"\npatterns = [\"{a}\"]\nkind = \"read\"\nexecutor = \"orders\"\n\
             [commands.b]\nentity = \"b\"\naction = \"b\"\npatterns = [\"{b}\"]\nkind = \"read\"\nexecutor = \"orders\"\n"
        )
    };
    for (a, b) in [("ｓｔａｔｕｓ {r:id}", "status {r:id}"), ("status? {r:id}", "status {r:id}")] {
        let err = parse(&two(a, b)).expect_err("overlap once normalized").to_string();
        assert!(err.contains("once normalized: one message could mean both"), "{a} / {b}: {err}");
    }
    let err = parse(&two("status {r:id}", "STATUS {r:id}")).expect_err("plain overlap").to_string();
    assert!(err.contains("of command `a` (commands.toml:1): one message"), "{err}");
    assert!(parse(&two("status {r:id}", "state {r:id}")).is_ok());
}

#[test]
fn an_id_with_a_declared_form_is_read_after_normalizing_and_refused_otherwise() {
    let registry = parse(
        r##"
[language.en]
number_marks = ["no."]

[commands.order_status]
entity = "order"
action = "status"
patterns = ["order status {order_id:id}"]
values.order_id = { pattern = "[0-9]{4,10}", example = "1234" }
kind = "read"
executor = "orders"
"##,
    )
    .expect("valid");
    let read = |text| registry.interpret_text(text);
    assert!(matches!(read("order status #1234?"), Interpretation::Command { .. }), "`#` and `?` go first");
    assert!(matches!(read("order status no. 1234"), Interpretation::Command { .. }));
    match read("order status A-17") {
        Interpretation::BrokenRule { broken, .. } => {
            assert_eq!((broken.rule, broken.limit.as_str()), (RuleKind::Pattern, "1234"))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_command_reads_in_the_tenants_locale_where_the_registry_says_how() {
    let registry = shipped();
    let refund = registry.get("refund").expect("refund");
    let args = serde_json::json!({"order_id": "1234", "amount": "25"}).as_object().cloned().unwrap_or_default();
    assert_eq!(refund.reads_in(&args, "pt"), "reembolso de 25 na encomenda 1234");
    assert_eq!(refund.reads_in(&args, "pt-BR"), "reembolso de 25 na encomenda 1234", "the language's");
    assert_eq!(refund.reads_in(&args, "en"), "refund 25 on order 1234");
    assert_eq!(refund.reads_in(&args, "de"), "refund 25 on order 1234", "else the default");
    let bad = parse(
        "[commands.a]\nentity = \"a\"\naction = \"a\"\npatterns = [\"a {x:id}\"]\nreads_as_in.pt = \"a {y}\"\n\
         kind = \"read\"\nexecutor = \"orders\"\n",
    );
    assert!(bad.is_err_and(|e| e.to_string().contains("`{y}` is not a placeholder")), "checked as reads_as is");
}
