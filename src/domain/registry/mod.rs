//! The command registry (CRCD): what people may ask for, how it is written, and how each
//! command is deduplicated, confirmed, authorized and routed. Loaded from `config/commands.toml`
//! and validated at start-up, every problem reported with the line it is on.

pub mod pattern;
pub mod reads_as;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::domain::command::envelope::Args;

use crate::domain::command::envelope::Risk;
use crate::domain::command::idempotency::IdempotencyClass;
use crate::domain::lifecycle::CommandKind;
pub use pattern::{Pattern, PatternError, PlaceholderType, canonical_decimal};
pub use reads_as::ReadsAs;

/// One validated command.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandSpec {
    pub name: String,
    pub entity: String,
    pub action: String,
    /// The placeholder whose value is the intent's target (`order_id` for a refund).
    pub target_arg: Option<String>,
    pub patterns: Vec<Pattern>,
    /// Interactive reply ids (`button_reply.id`, `list_reply.id`) that mean this command;
    /// the same syntax as text patterns, with `:` as a separator too.
    pub reply_ids: Vec<Pattern>,
    pub kind: CommandKind,
    pub idempotency_class: IdempotencyClass,
    pub dedupe_window: Duration,
    /// Whether a person must confirm; a mutation without it is auto-confirmed, and recorded so.
    pub confirmation: bool,
    pub confirmation_ttl: Duration,
    pub step_up: bool,
    pub scopes: BTreeSet<String>,
    pub executor: String,
    /// Every target the command is dispatched to: `executor` first, then `also_executors`.
    pub targets: Vec<String>,
    pub timeout: Duration,
    /// How long the command may wait before it starts.
    pub ttl: Duration,
    pub risk: Risk,
    pub compensation: Option<String>,
    pub description: String,
    /// The template of the reply when it executed (`executed` when unset): built-in chat
    /// commands answer with their own (`requests`, `why`, ...), rendered with the result.
    pub reply: Option<String>,
    /// How the command reads to a person (`reads_as`, else its first pattern).
    pub reads_as: ReadsAs,
}

impl CommandSpec {
    pub fn usage(&self) -> String {
        self.patterns.first().map(Pattern::usage).unwrap_or_else(|| self.name.clone())
    }

    /// The command as a person reads it, with `args` in place: "refund 25 on order 1234".
    pub fn reads(&self, args: &Args) -> String {
        self.reads_as.fill(args)
    }
}

/// What a message means to the registry.
#[derive(Debug, PartialEq)]
pub enum Interpretation<'a> {
    Command {
        spec: &'a CommandSpec,
        args: Args,
    },
    /// Matches two or more commands: refused as ambiguous (SMCL S6) rather than guessed.
    Ambiguous(Vec<&'a CommandSpec>),
    /// Asks for help explicitly.
    Help,
    NoMatch,
}

#[derive(Debug, Clone, Default)]
pub struct Registry {
    commands: Vec<CommandSpec>,
}

/// Every problem found, one line each, each naming `file:line`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("; "))]
pub struct RegistryError(pub Vec<String>);

const HELP_WORDS: &[&str] = &["help", "?", "menu", "commands"];

impl Registry {
    /// Parses and validates a registry file; `executors` are the names configured, and
    /// `default_window` the dedupe window of commands that declare none.
    pub fn parse(
        path: &Path,
        text: &str,
        executors: &BTreeSet<String>,
        default_window: Duration,
    ) -> Result<Self, RegistryError> {
        let at = |offset: usize| {
            let before = text.get(..offset).unwrap_or(text);
            format!("{}:{}", path.display(), before.matches('\n').count() + 1)
        };
        let raw: RawRegistry = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| at(s.start)).unwrap_or_else(|| path.display().to_string());
            RegistryError(vec![format!("{line}: {}", e.message())])
        })?;
        let mut problems = vec![];
        let mut commands = vec![];
        for (name, spanned) in &raw.commands {
            let line = at(spanned.span().start);
            match build(name, spanned.get_ref(), executors, default_window, &at) {
                Ok(spec) => commands.push((line, spec)),
                Err(mut found) => problems.append(&mut found),
            }
        }
        let names: BTreeSet<&str> = commands.iter().map(|(_, c)| c.name.as_str()).collect();
        for (line, spec) in &commands {
            if let Some(comp) = spec.compensation.as_deref().filter(|c| !names.contains(c)) {
                problems.push(format!("{line}: command `{}`: compensation `{comp}` is not a command", spec.name));
            }
        }
        for (i, (line_a, a)) in commands.iter().enumerate() {
            for (line_b, b) in &commands[i + 1..] {
                for (pa, pb) in pairs(&a.patterns, &b.patterns).chain(pairs(&a.reply_ids, &b.reply_ids)) {
                    if pa.overlaps(pb) {
                        problems.push(format!(
                            "{line_b}: command `{}` pattern `{}` overlaps `{}` of command `{}` ({line_a}): \
                             one message could mean both",
                            b.name, pb.source, pa.source, a.name
                        ));
                    }
                }
            }
        }
        if problems.is_empty() {
            Ok(Self { commands: commands.into_iter().map(|(_, spec)| spec).collect() })
        } else {
            Err(RegistryError(problems))
        }
    }

    /// A registry from specs as they are, without the overlap check (for tests of the runtime
    /// ambiguity guard).
    pub fn from_specs(commands: Vec<CommandSpec>) -> Self {
        Self { commands }
    }

    pub fn commands(&self) -> &[CommandSpec] {
        &self.commands
    }

    pub fn get(&self, name: &str) -> Option<&CommandSpec> {
        self.commands.iter().find(|c| c.name == name)
    }

    /// The command an envelope's intent stands for.
    pub fn by_intent(&self, entity: &str, action: &str) -> Option<&CommandSpec> {
        self.commands.iter().find(|c| c.entity == entity && c.action == action)
    }

    /// The shipped registry, for unit tests elsewhere in the crate.
    #[cfg(test)]
    pub(crate) fn shipped_for_tests() -> Self {
        let executors = ["orders".to_owned(), "gateway".to_owned()].into_iter().collect();
        let text = include_str!("../../../config/commands.toml");
        Self::parse(Path::new("commands.toml"), text, &executors, std::time::Duration::from_secs(3_600))
            .unwrap_or_else(|e| panic!("the shipped registry is valid: {e}"))
    }

    /// What a text message asks for.
    pub fn interpret_text(&self, text: &str) -> Interpretation<'_> {
        let tokens: Vec<&str> = text.split_whitespace().collect();
        if let [word] = tokens.as_slice()
            && HELP_WORDS.contains(&word.to_lowercase().as_str())
        {
            return Interpretation::Help;
        }
        self.interpret(&tokens, |spec| &spec.patterns)
    }

    /// What an interactive reply id asks for (`status:1234`).
    pub fn interpret_reply_id(&self, id: &str) -> Interpretation<'_> {
        let tokens: Vec<&str> = id.split([':', ' ']).filter(|t| !t.is_empty()).collect();
        self.interpret(&tokens, |spec| &spec.reply_ids)
    }

    fn interpret<'a>(
        &'a self,
        tokens: &[&str],
        patterns: impl Fn(&'a CommandSpec) -> &'a Vec<Pattern>,
    ) -> Interpretation<'a> {
        if tokens.is_empty() {
            return Interpretation::NoMatch;
        }
        let mut found: Vec<(&CommandSpec, Args)> = vec![];
        for spec in &self.commands {
            if let Some(args) = patterns(spec).iter().find_map(|p| p.matches(tokens)) {
                found.push((spec, args));
            }
        }
        match found.len() {
            0 => Interpretation::NoMatch,
            1 => {
                let (spec, args) = found.remove(0);
                Interpretation::Command { spec, args }
            }
            _ => Interpretation::Ambiguous(found.into_iter().map(|(spec, _)| spec).collect()),
        }
    }

    /// The commands an actor holding `scopes` may ask for, as usage lines for a help reply.
    pub fn help_lines(&self, scopes: &BTreeSet<String>) -> Vec<String> {
        // What the tenant's systems do first, then the gateway's own (status, why, ...).
        let mut commands: Vec<&CommandSpec> =
            self.commands.iter().filter(|c| c.scopes.is_subset(scopes) && !c.patterns.is_empty()).collect();
        commands.sort_by_key(|c| c.executor == crate::service::ooc::GATEWAY);
        commands
            .iter()
            .map(|c| if c.description.is_empty() { c.usage() } else { format!("{} — {}", c.usage(), c.description) })
            .collect()
    }
}

fn pairs<'a>(a: &'a [Pattern], b: &'a [Pattern]) -> impl Iterator<Item = (&'a Pattern, &'a Pattern)> {
    a.iter().flat_map(move |x| b.iter().map(move |y| (x, y)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRegistry {
    #[serde(default)]
    commands: BTreeMap<String, Spanned<RawCommand>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCommand {
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
}

fn build(
    name: &str,
    raw: &RawCommand,
    executors: &BTreeSet<String>,
    default_window: Duration,
    at: &dyn Fn(usize) -> String,
) -> Result<CommandSpec, Vec<String>> {
    let mut problems = vec![];
    let mut problem = |offset: usize, what: String| problems.push(format!("{}: command `{name}`: {what}", at(offset)));
    let compile = |list: &[Spanned<String>],
                   parse: fn(&str) -> Result<Pattern, PatternError>,
                   problem: &mut dyn FnMut(usize, String)|
     -> Vec<Pattern> {
        list.iter()
            .filter_map(|p| {
                parse(p.get_ref()).map_err(|e| problem(p.span().start, format!("pattern `{}`: {e}", p.get_ref()))).ok()
            })
            .collect()
    };
    let patterns = compile(&raw.patterns, Pattern::parse, &mut problem);
    let reply_ids = compile(&raw.reply_ids, Pattern::parse_reply_id, &mut problem);
    let mut duration = |value: &Option<Spanned<String>>, default: Duration, field: &str| match value {
        None => default,
        Some(v) => humantime::parse_duration(v.get_ref()).unwrap_or_else(|e| {
            problem(v.span().start, format!("{field} `{}` is not a duration such as 30s, 5m or 24h: {e}", v.get_ref()));
            default
        }),
    };
    let dedupe_window = duration(&raw.dedupe_window, default_window, "dedupe_window");
    let confirmation_ttl = duration(&raw.confirmation_ttl, Duration::from_secs(300), "confirmation_ttl");
    let timeout = duration(&raw.timeout, Duration::from_secs(30), "timeout");
    let ttl = duration(&raw.ttl, Duration::from_secs(600), "ttl");
    let mutation = raw.kind == CommandKind::Mutation;
    let idempotency_class =
        raw.idempotency.unwrap_or(if mutation { IdempotencyClass::I1 } else { IdempotencyClass::I0 });
    let confirmation = raw.confirmation.unwrap_or(mutation);
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
    if mutation && idempotency_class == IdempotencyClass::I0 {
        problem(executor_at, "a mutation cannot be I0 (read-only); IDS defaults mutations to I1".into());
    }
    if !mutation && (confirmation || raw.step_up) {
        problem(executor_at, "a read needs neither confirmation nor step-up".into());
    }
    // The person confirms what they asked for before being asked to prove who they are, and
    // the step-up link can then name the command.
    if mutation && raw.step_up && !confirmation {
        problem(executor_at, "step_up needs confirmation = true".into());
    }
    if patterns.is_empty() && reply_ids.is_empty() && raw.patterns.is_empty() && raw.reply_ids.is_empty() {
        problem(executor_at, "has neither patterns nor reply_ids: nothing can ask for it".into());
    }
    if let Some(target) = &raw.target {
        let has = |p: &Pattern| {
            p.parts.iter().any(|part| matches!(part, pattern::Part::Placeholder { name, .. } if name == target))
        };
        if !patterns.iter().chain(&reply_ids).all(has) {
            problem(executor_at, format!("target `{target}` is not a placeholder of every pattern"));
        }
    }
    let intent_ok = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !intent_ok(&raw.entity) || !intent_ok(&raw.action) {
        problem(executor_at, "entity and action are single words of letters, digits, '_' or '-'".into());
    }
    let reads_as = reading(raw, &patterns, &reply_ids, name, &mut problem);
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
    })
}

/// The command's `reads_as`, whose every argument each of its patterns captures (so that it
/// always reads in full), else its first pattern.
fn reading(
    raw: &RawCommand,
    patterns: &[Pattern],
    reply_ids: &[Pattern],
    name: &str,
    problem: &mut dyn FnMut(usize, String),
) -> ReadsAs {
    let fallback = || patterns.first().or(reply_ids.first()).map_or_else(|| ReadsAs::text(name), ReadsAs::of_pattern);
    let Some(source) = &raw.reads_as else { return fallback() };
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

#[cfg(test)]
mod tests;
