//! Reading `commands.toml`: each command's raw fields checked against the rules of the registry
//! and turned into a [`CommandSpec`], every problem named with the line it is on.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::approvals;
use super::pattern::{self, Part, Pattern, PatternError};
use super::{CommandSpec, ReadsAs, ValueRule};
use crate::domain::command::envelope::Risk;
use crate::domain::command::idempotency::IdempotencyClass;
use crate::domain::lifecycle::CommandKind;
use crate::domain::locks::LockRule;
use crate::domain::preview::PreviewRule;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRegistry {
    #[serde(default)]
    pub(super) commands: BTreeMap<String, Spanned<RawCommand>>,
    /// Each locale's words for reading messages not written exactly (`normalize`).
    #[serde(default)]
    pub(super) language: BTreeMap<String, super::LanguageWords>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCommand {
    entity: String,
    action: String,
    target: Option<String>,
    #[serde(default)]
    patterns: Vec<Spanned<String>>,
    #[serde(default)]
    reply_ids: Vec<Spanned<String>>,
    kind: CommandKind,
    idempotency: Option<IdempotencyClass>,
    dedupe_window: Option<Spanned<String>>,
    confirmation: Option<bool>,
    confirmation_ttl: Option<Spanned<String>>,
    #[serde(default)]
    step_up: bool,
    #[serde(default)]
    scopes: Vec<String>,
    executor: Spanned<String>,
    /// More targets the command goes to; all of them must execute it (the seed's default
    /// multi-target policy).
    #[serde(default)]
    also_executors: Vec<String>,
    timeout: Option<Spanned<String>>,
    ttl: Option<Spanned<String>>,
    risk: Option<Risk>,
    compensation: Option<String>,
    #[serde(default)]
    description: String,
    reply: Option<String>,
    /// How the command reads to a person: text with `{argument}`s.
    reads_as: Option<Spanned<String>>,
    /// How it reads in other locales, by locale (`reads_as_in.pt = "reembolso de {amount} …"`).
    #[serde(default)]
    reads_as_in: BTreeMap<String, Spanned<String>>,
    /// The rules its values keep, by placeholder name.
    #[serde(default)]
    values: BTreeMap<String, Spanned<ValueRule>>,
    /// Who else must approve, or whether it is refused, by its values and who asks.
    #[serde(default)]
    approvals: Vec<Spanned<approvals::read::RawRule>>,
    /// What another mutation of the resource it changes gets while it runs (`none` by default).
    lock: Option<Spanned<LockRule>>,
    /// Whether the executor is asked for a preview before the confirmation (`none` by default).
    preview: Option<Spanned<PreviewRule>>,
    /// Edits allowed in the command's words, all together (`refnd` for `refund`): default 1,
    /// 0 for none; values are never read with a typo.
    typos: Option<usize>,
    /// The question for each value asked for in turns, by placeholder (`asks.order_id = "Which order?"`).
    #[serde(default)]
    asks: BTreeMap<String, Spanned<String>>,
    /// The questions in other locales (`asks_in.pt.order_id = "Qual encomenda?"`).
    #[serde(default)]
    asks_in: BTreeMap<String, BTreeMap<String, Spanned<String>>>,
    /// Phrasings that must read as this command with these values (checked at every load).
    #[serde(default)]
    pub(super) examples: Vec<Spanned<super::examples::Example>>,
}

/// Edits in a command's words read as a typo when the registry does not say.
const DEFAULT_TYPOS: usize = 1;

pub(super) fn build(
    name: &str,
    raw: &RawCommand,
    executors: &BTreeSet<String>,
    default_window: Duration,
    at: &dyn Fn(usize) -> String,
) -> Result<CommandSpec, Vec<String>> {
    let mut problems = vec![];
    let mut problem = |offset: usize, what: String| problems.push(format!("{}: command `{name}`: {what}", at(offset)));
    let patterns = compile(&raw.patterns, Pattern::parse, &mut problem);
    let reply_ids = compile(&raw.reply_ids, Pattern::parse_reply_id, &mut problem);
    let [dedupe_window, confirmation_ttl, timeout, ttl] = durations(raw, default_window, &mut problem);
    let mutation = raw.kind == CommandKind::Mutation;
    let (idempotency_class, confirmation) =
        (raw.idempotency.unwrap_or(IdempotencyClass::default_for(mutation)), raw.confirmation.unwrap_or(mutation));
    check(raw, executors, (idempotency_class, confirmation), (&patterns, &reply_ids), &mut problem);
    let (reads_as, reads_as_in) = readings(raw, &patterns, &reply_ids, name, &mut problem);
    let values = value_rules(raw, &patterns, &mut problem);
    let (asks, asks_in) = questions(raw, &patterns, &mut problem);
    let approvals = approvals::read::rules(&raw.approvals, (raw.kind, &|n| captures(&patterns, n)), &mut problem);
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(CommandSpec {
        name: name.to_owned(),
        entity: raw.entity.to_lowercase(),
        action: raw.action.to_lowercase(),
        target_arg: raw.target.clone(),
        patterns,
        reply_ids,
        kind: raw.kind,
        idempotency_class,
        dedupe_window,
        confirmation,
        confirmation_ttl,
        step_up: raw.step_up,
        scopes: raw.scopes.iter().cloned().collect(),
        executor: raw.executor.get_ref().clone(),
        targets: std::iter::once(raw.executor.get_ref().clone()).chain(raw.also_executors.iter().cloned()).collect(),
        timeout,
        ttl,
        risk: raw.risk.unwrap_or(if mutation { Risk::Medium } else { Risk::Low }),
        compensation: raw.compensation.clone(),
        description: raw.description.clone(),
        reply: raw.reply.clone(),
        reads_as,
        reads_as_in,
        typos: raw.typos.unwrap_or(DEFAULT_TYPOS),
        values,
        approvals,
        lock: raw.lock.as_ref().map_or(LockRule::Off, |rule| *rule.get_ref()),
        preview: raw.preview.as_ref().map_or(PreviewRule::Off, |rule| *rule.get_ref()),
        asks,
        asks_in,
    })
}

type Questions = BTreeMap<String, String>;

/// The questions for values asked in turns, each naming a placeholder the patterns capture.
fn questions(
    raw: &RawCommand,
    patterns: &[Pattern],
    problem: &mut impl FnMut(usize, String),
) -> (Questions, BTreeMap<String, Questions>) {
    let mut checked = |field: &str, asks: &BTreeMap<String, Spanned<String>>| -> Questions {
        let mut questions = Questions::new();
        for (name, question) in asks {
            if !captures(patterns, name) {
                problem(question.span().start, format!("{field}.{name}: no pattern captures `{name}`"));
            } else if question.get_ref().trim().is_empty() {
                problem(question.span().start, format!("{field}.{name}: the question is empty"));
            } else {
                questions.insert(name.clone(), question.get_ref().trim().to_owned());
            }
        }
        questions
    };
    let asks = checked("asks", &raw.asks);
    let asks_in =
        raw.asks_in.iter().map(|(locale, asks)| (locale.to_lowercase(), checked(&format!("asks_in.{locale}"), asks)));
    (asks, asks_in.collect())
}

/// The command's durations — its dedupe window, confirmation TTL, timeout and TTL — each its
/// default when unset, and a problem when it is not a duration.
fn durations(raw: &RawCommand, default_window: Duration, problem: &mut impl FnMut(usize, String)) -> [Duration; 4] {
    let mut duration = |value: &Option<Spanned<String>>, default: Duration, field: &str| match value {
        None => default,
        Some(v) => humantime::parse_duration(v.get_ref()).unwrap_or_else(|e| {
            problem(v.span().start, format!("{field} `{}` is not a duration such as 30s, 5m or 24h: {e}", v.get_ref()));
            default
        }),
    };
    [
        duration(&raw.dedupe_window, default_window, "dedupe_window"),
        duration(&raw.confirmation_ttl, Duration::from_secs(300), "confirmation_ttl"),
        duration(&raw.timeout, Duration::from_secs(30), "timeout"),
        duration(&raw.ttl, Duration::from_secs(600), "ttl"),
    ]
}

/// Whether a pattern captures the placeholder `name`.
fn captures(patterns: &[Pattern], name: &str) -> bool {
    patterns.iter().flat_map(|p| &p.parts).any(|part| matches!(part, Part::Placeholder { name: n, .. } if n == name))
}

/// The value rules, each naming a placeholder the patterns capture and sound in itself.
fn value_rules(
    raw: &RawCommand,
    patterns: &[Pattern],
    problem: &mut impl FnMut(usize, String),
) -> BTreeMap<String, ValueRule> {
    let captured = |name: &str| captures(patterns, name);
    let mut rules = BTreeMap::new();
    for (name, rule) in &raw.values {
        let at = rule.span().start;
        if !captured(name) {
            problem(at, format!("values.{name}: no pattern captures `{name}`"));
        } else if let Err(e) = rule.get_ref().check() {
            problem(at, format!("values.{name}: {e}"));
        } else {
            rules.insert(name.clone(), rule.get_ref().clone());
        }
    }
    rules
}

/// Patterns as written, each that does not parse a problem.
fn compile(
    list: &[Spanned<String>],
    parse: fn(&str) -> Result<Pattern, PatternError>,
    problem: &mut dyn FnMut(usize, String),
) -> Vec<Pattern> {
    list.iter()
        .filter_map(|p| {
            parse(p.get_ref()).map_err(|e| problem(p.span().start, format!("pattern `{}`: {e}", p.get_ref()))).ok()
        })
        .collect()
}

/// Every executor the command names is configured, and named once.
fn check_routing(raw: &RawCommand, executors: &BTreeSet<String>, problem: &mut dyn FnMut(usize, String)) {
    let executor_at = raw.executor.span().start;
    if !executors.contains(raw.executor.get_ref()) {
        let known: Vec<&str> = executors.iter().map(String::as_str).collect();
        problem(
            executor_at,
            format!("executor `{}` is not configured (known: {})", raw.executor.get_ref(), known.join(", ")),
        );
    }
    for extra in &raw.also_executors {
        if !executors.contains(extra) || extra == raw.executor.get_ref() {
            problem(executor_at, format!("also_executors: `{extra}` is not another configured executor"));
        }
    }
}

/// The gates fit the kind: a mutation is never I0, a read is neither confirmed nor stepped up,
/// and a step-up comes after a confirmation.
fn check_gates(raw: &RawCommand, class: IdempotencyClass, confirmation: bool, problem: &mut dyn FnMut(usize, String)) {
    let (at, mutation) = (raw.executor.span().start, raw.kind == CommandKind::Mutation);
    if mutation && class == IdempotencyClass::I0 {
        problem(at, "a mutation cannot be I0 (read-only); IDS defaults mutations to I1".into());
    }
    if !mutation && (confirmation || raw.step_up) {
        problem(at, "a read needs neither confirmation nor step-up".into());
    }
    // The person confirms what they asked for before being asked to prove who they are, and
    // the step-up link can then name the command.
    if mutation && raw.step_up && !confirmation {
        problem(at, "step_up needs confirmation = true".into());
    }
    // A lock names what the command changes: a mutation, and the argument that says which one.
    if let Some(lock) = raw.lock.as_ref().filter(|rule| *rule.get_ref() != LockRule::Off)
        && (!mutation || raw.target.is_none())
    {
        problem(lock.span().start, format!("lock = \"{}\" needs kind = \"mutation\" and a target", lock.get_ref()));
    }
    // A command that waits its turn is asked to confirm when it comes: its first move then.
    if let Some(lock) = raw.lock.as_ref().filter(|rule| *rule.get_ref() == LockRule::Wait)
        && !confirmation
    {
        problem(lock.span().start, "lock = \"wait\" needs confirmation = true".into());
    }
    // A preview is shown in the confirmation prompt: a command asked no confirmation has none.
    if let Some(preview) = raw.preview.as_ref().filter(|rule| *rule.get_ref() != PreviewRule::Off)
        && (!mutation || !confirmation)
    {
        let rule = preview.get_ref();
        problem(preview.span().start, format!("preview = \"{rule}\" needs kind = \"mutation\" and confirmation"));
    }
}

/// Something can ask for the command, its target is captured by every pattern, and its intent
/// is made of plain words.
fn check_patterns(
    raw: &RawCommand,
    patterns: &[Pattern],
    reply_ids: &[Pattern],
    problem: &mut dyn FnMut(usize, String),
) {
    let at = raw.executor.span().start;
    if patterns.is_empty() && reply_ids.is_empty() && raw.patterns.is_empty() && raw.reply_ids.is_empty() {
        problem(at, "has neither patterns nor reply_ids: nothing can ask for it".into());
    }
    if let Some(target) = &raw.target {
        let has = |p: &Pattern| {
            p.parts.iter().any(|part| matches!(part, pattern::Part::Placeholder { name, .. } if name == target))
        };
        if !patterns.iter().chain(reply_ids).all(has) {
            problem(at, format!("target `{target}` is not a placeholder of every pattern"));
        }
    }
    let intent_ok = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !intent_ok(&raw.entity) || !intent_ok(&raw.action) {
        problem(at, "entity and action are single words of letters, digits, '_' or '-'".into());
    }
}

/// The command's `reads_as`, whose every argument each of its patterns captures (so that it
/// always reads in full), else its first pattern.
/// The command's routing, gates and patterns, each problem reported.
fn check(
    raw: &RawCommand,
    executors: &BTreeSet<String>,
    (idempotency_class, confirmation): (IdempotencyClass, bool),
    (patterns, reply_ids): (&[Pattern], &[Pattern]),
    problem: &mut impl FnMut(usize, String),
) {
    check_routing(raw, executors, problem);
    check_gates(raw, idempotency_class, confirmation, problem);
    check_patterns(raw, patterns, reply_ids, problem);
}

/// How the command reads (`reads_as`) and how it reads in each locale (`reads_as_in`).
fn readings(
    raw: &RawCommand,
    patterns: &[Pattern],
    reply_ids: &[Pattern],
    name: &str,
    problem: &mut dyn FnMut(usize, String),
) -> (ReadsAs, BTreeMap<String, ReadsAs>) {
    let default = reading(raw.reads_as.as_ref(), patterns, reply_ids, name, problem);
    let by_locale = raw
        .reads_as_in
        .iter()
        .map(|(locale, source)| (locale.to_lowercase(), reading(Some(source), patterns, reply_ids, name, problem)))
        .collect();
    (default, by_locale)
}

fn reading(
    source: Option<&Spanned<String>>,
    patterns: &[Pattern],
    reply_ids: &[Pattern],
    name: &str,
    problem: &mut dyn FnMut(usize, String),
) -> ReadsAs {
    let fallback = || patterns.first().or(reply_ids.first()).map_or_else(|| ReadsAs::text(name), ReadsAs::of_pattern);
    let Some(source) = source else { return fallback() };
    let reads = match ReadsAs::parse(source.get_ref()) {
        Ok(reads) => reads,
        Err(e) => {
            problem(source.span().start, format!("reads_as `{}` {e}", source.get_ref()));
            return fallback();
        }
    };
    let captures = |p: &Pattern, arg: &str| {
        p.parts.iter().any(|part| matches!(part, pattern::Part::Placeholder { name, .. } if name == arg))
    };
    for arg in reads.names() {
        if !patterns.iter().chain(reply_ids).all(|p| captures(p, arg)) {
            problem(source.span().start, format!("reads_as: `{{{arg}}}` is not a placeholder of every pattern"));
        }
    }
    reads
}
