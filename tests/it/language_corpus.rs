//! The conversations corpus (`tests/language/conversations.txt`): messages one after another, read
//! as intake reads them, and what they come to. The phrasings corpus (`tests/language/phrasings.txt`): every utterance read by the shipped
//! registry for a tenant of its locale, counted as understood, suggested, refused or misread, with
//! the counts printed. Nothing may be misread, and at least 95% of the phrasings of a command must
//! be read as it with its values. Beside it, a property (every pattern with generated values, and
//! every command as it reads to a person, reads back as that command with those values) and a
//! fuzz-style test (any text: no panic, and never a mutation that skips its confirmation).

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use chatgate::domain::lifecycle::CommandKind;
use chatgate::domain::registry::{
    Audience, Begun, Ending, Interpretation, Open, Part, PlaceholderType, Registry, Step,
};
use proptest::prelude::*;

fn shipped() -> Registry {
    let executors: BTreeSet<String> = ["orders".to_owned(), "gateway".to_owned()].into_iter().collect();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/commands.toml");
    let text = std::fs::read_to_string(&path).expect("the shipped registry");
    Registry::parse(&path, &text, &executors, Duration::from_secs(3_600)).expect("valid")
}

fn audience(locale: &str) -> Audience {
    let currency = if locale == "pt" { "EUR" } else { "USD" };
    Audience { locale: locale.to_owned(), currency: Some(currency.to_owned()) }
}

/// A command as the corpus writes it: `refund amount=25 order_id=1234` (values sorted by name).
fn written(interpretation: &Interpretation<'_>) -> Option<String> {
    let Interpretation::Command { spec, args, .. } = interpretation else { return None };
    let values: Vec<String> = args.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect();
    Some(std::iter::once(spec.name.clone()).chain(values).collect::<Vec<_>>().join(" "))
}

fn sorted(expected: &str) -> String {
    let mut words: Vec<&str> = expected.split_whitespace().collect();
    words[1..].sort_unstable();
    words.join(" ")
}

#[derive(Default)]
struct Counts {
    understood: usize,
    suggested: usize,
    refused: usize,
    misread: Vec<String>,
    commands: usize,
    problems: Vec<String>,
}

#[test]
fn the_phrasings_corpus_is_read_and_nothing_is_misread() {
    let registry = shipped();
    let corpus = include_str!("../language/phrasings.txt");
    let mut counts = Counts::default();
    let mut locales = BTreeSet::new();
    for line in corpus.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let [locale, text, expected] = line.split(" | ").collect::<Vec<_>>()[..] else { panic!("odd line: {line}") };
        locales.insert(locale);
        let read = registry.interpret_text_for(text, &audience(locale));
        let got = written(&read);
        if std::env::var_os("CHATGATE_CORPUS_VERBOSE").is_some() {
            let _ = writeln!(std::io::stderr(), "{line} → {}", got.clone().unwrap_or_else(|| format!("{read:?}")));
        }
        match expected.strip_prefix('-') {
            Some(label) => {
                if let Some(command) = got {
                    counts.misread.push(format!("{line} → {command}"));
                    continue;
                }
                if !label.trim().is_empty() && read.label() != label.trim() {
                    counts.problems.push(format!("{line} → {}", read.label()));
                }
                match read.label() {
                    "suggested" => counts.suggested += 1,
                    _ => counts.refused += 1,
                }
            }
            None => {
                counts.commands += 1;
                match (got, &read) {
                    (Some(command), _) if command == sorted(expected) => counts.understood += 1,
                    (Some(command), _) => counts.misread.push(format!("{line} → {command}")),
                    (None, Interpretation::DidYouMean { .. }) => counts.suggested += 1,
                    (None, _) => {
                        counts.refused += 1;
                        counts.problems.push(format!("{line} → {}", read.label()));
                    }
                }
            }
        }
    }
    let total = counts.understood + counts.suggested + counts.refused + counts.misread.len();
    let summary = format!(
        "phrasings corpus: {total} utterances ({} of a command): understood {}, suggested {}, refused {}, \
         misread {}\n",
        counts.commands,
        counts.understood,
        counts.suggested,
        counts.refused,
        counts.misread.len()
    );
    // Printed past the test harness's capture, so that `cargo test` shows it.
    let _ = std::io::stderr().write_all(summary.as_bytes());
    assert!(total >= 200 && locales.len() >= 2, "{summary}");
    assert!(counts.misread.is_empty(), "misread:\n{}", counts.misread.join("\n"));
    let (not_read, wrong_reason): (Vec<&String>, Vec<&String>) =
        counts.problems.iter().partition(|p| !p.contains(" | - "));
    assert!(counts.understood * 100 >= counts.commands * 95, "{summary}not understood: {not_read:#?}");
    assert!(wrong_reason.is_empty(), "refused for another reason than the corpus says: {wrong_reason:#?}");
}

/// A value `kind` accepts, from a seed.
/// What `messages`, one after another from a person who may ask for everything, come to, as
/// the conversations corpus writes it.
fn conversed(registry: &Registry, locale: &str, messages: &[&str]) -> String {
    let mut open: Option<(Begun, u32)> = None;
    let mut outcome = String::new();
    for text in messages {
        let reading = open.as_ref().map(|(begun, tries)| Open { begun, tries: *tries });
        (outcome, open) = match registry.step(reading, text, &audience(locale), |_| true, 3) {
            Step::Alone(read) | Step::Complete(read) => {
                (written(&read).unwrap_or_else(|| format!("- {}", read.label())), None)
            }
            Step::Ask { begun, missing, tries, .. } => (format!("? {}", missing.name), Some((begun, tries))),
            Step::Ended(Ending::Cancelled) => ("- cancelled".into(), None),
            Step::Ended(Ending::Tries) => ("- gave_up".into(), None),
        };
    }
    outcome
}

#[test]
fn the_conversations_corpus_comes_to_what_it_says() {
    let registry = shipped();
    let corpus = include_str!("../language/conversations.txt");
    let (mut wrong, mut count) = (vec![], 0);
    for line in corpus.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let [locale, messages, expected] = line.split(" | ").collect::<Vec<_>>()[..] else {
            panic!("odd line: {line}")
        };
        let messages: Vec<&str> = messages.split(" >> ").collect();
        let expected = if expected.starts_with(['-', '?']) { expected.to_owned() } else { sorted(expected) };
        let outcome = conversed(&registry, locale, &messages);
        count += 1;
        if outcome != expected {
            wrong.push(format!("{locale} | {} | wanted {expected}, got {outcome}", messages.join(" >> ")));
        }
    }
    println!("conversations: {count}, {} wrong", wrong.len());
    assert!(count >= 40, "the corpus has {count} conversations");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

fn value(kind: PlaceholderType, seed: u32) -> String {
    match kind {
        PlaceholderType::Id => format!("A{seed}"),
        PlaceholderType::Decimal | PlaceholderType::Money => format!("{}.{:02}", 1 + seed % 9_000, seed % 100),
        PlaceholderType::Int => (1 + seed % 9_000).to_string(),
        PlaceholderType::Word | PlaceholderType::Text => format!("w{seed}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_pattern_and_every_reading_reads_back_as_its_command(seed in 0u32..1_000_000) {
        let registry = shipped();
        for spec in registry.commands() {
            for pattern in &spec.patterns {
                let words: Vec<String> = pattern
                    .parts
                    .iter()
                    .enumerate()
                    .map(|(i, part)| match part {
                        Part::Literal(word) => word.clone(),
                        Part::Placeholder { kind, .. } => value(*kind, seed.wrapping_add(i as u32)),
                    })
                    .collect();
                let text = words.join(" ");
                let Interpretation::Command { spec: read, args, .. } = registry.interpret_text(&text) else {
                    panic!("`{text}` ({}) is not read as a command", pattern.source)
                };
                prop_assert_eq!(&read.name, &spec.name, "{}", text);
                // How it reads to a person (in each locale it has a reading for), and the exact text
                // a suggestion offers, read back the same.
                let mut readings = vec![("en", spec.reads(&args)), ("en", spec.written(&args).unwrap_or_default())];
                readings.extend(spec.reads_as_in.keys().map(|locale| (locale.as_str(), spec.reads_in(&args, locale))));
                for (locale, again) in readings {
                    if spec.takes_text() {
                        continue;
                    }
                    match registry.interpret_text_for(&again, &audience(locale)) {
                        Interpretation::Command { spec: back, args: back_args, .. } => {
                            prop_assert_eq!(&back.name, &spec.name, "{}", again);
                            prop_assert_eq!(&back_args, &args, "{}", again);
                        }
                        // A reading that is not a pattern (an operator's compensation) says what it is.
                        other => prop_assert!(spec.patterns.iter().all(|p| p.source != again), "{again}: {other:?}"),
                    }
                }
            }
        }
    }

    #[test]
    fn any_text_is_read_without_panic_and_no_mutation_skips_its_confirmation(
        text in "\\PC{0,60}",
        words in proptest::collection::vec("(refund|refnd|order|status|close|account|no\\.|#1234|1234|25,00|2,500|\\$25|-25|don't|and|please|hi|reembolsar|encomenda|1\\.000,50|A-17|wait|25 EUR)", 0..8),
    ) {
        let registry = shipped();
        for locale in ["en", "pt"] {
            for message in [text.clone(), words.join(" ")] {
                if let Interpretation::Command { spec, reading, .. } = registry.interpret_text_for(&message, &audience(locale)) {
                    let confirmed = spec.confirmation || reading.needs_confirmation();
                    prop_assert!(spec.kind != CommandKind::Mutation || confirmed, "{message} → {}", spec.name);
                }
            }
        }
    }
}
