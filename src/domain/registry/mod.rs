//! The command registry (CRCD): what people may ask for, how it is written, and how each
//! command is deduplicated, confirmed, authorized and routed. Loaded from `config/commands.toml`
//! and validated at start-up, every problem reported with the line it is on.

pub mod approvals;
mod build;
mod conversation;
mod corrections;
mod examples;
mod interpret;
pub mod normalize;
pub mod numbers;
pub mod pattern;
pub mod reads_as;
mod refusals;
mod suggest;
mod turns;
pub mod values;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use crate::domain::command::envelope::Args;

use crate::domain::command::envelope::Risk;
use crate::domain::command::idempotency::IdempotencyClass;
use crate::domain::lifecycle::CommandKind;
use build::{RawRegistry, build};
pub use conversation::{Ending, Missed, Open, Step};
pub use corrections::Correction;
pub use interpret::ACCEPT_PREFIX;
pub use normalize::{LanguageWords, Linking, Normalizer};
pub use numbers::Currency;
pub use pattern::{Part, Pattern, PatternError, PlaceholderType, canonical_decimal};
pub use reads_as::ReadsAs;
pub use turns::{Begun, Missing, Turn};
pub use values::{BrokenRule, RuleKind, ValueRule};

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
    /// How it reads in other locales (`reads_as_in`), by lower-case locale.
    pub reads_as_in: std::collections::BTreeMap<String, ReadsAs>,
    /// The rules its values keep, by placeholder name.
    pub values: std::collections::BTreeMap<String, ValueRule>,
    /// Edits read as typos in its words, all together.
    pub typos: usize,
    /// Its approval policy: who else must approve a request, or whether it is refused, by its
    /// values and who asks (`approvals::evaluate`).
    pub approvals: Vec<approvals::ApprovalRule>,
    /// What another mutation of the resource it changes (`entity` and `target`) gets meanwhile.
    pub lock: crate::domain::locks::LockRule,
    /// Whether its executor is asked for a preview before the confirmation, and what a failed one does.
    pub preview: crate::domain::preview::PreviewRule,
    /// The question for each value when it is asked for in turns (`asks`), by placeholder.
    pub asks: std::collections::BTreeMap<String, String>,
    /// The questions in other locales (`asks_in.pt`), by lower-case locale.
    pub asks_in: std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
}

impl CommandSpec {
    pub fn usage(&self) -> String {
        self.patterns.first().map(Pattern::usage).unwrap_or_else(|| self.name.clone())
    }

    /// Whether a pattern takes free text (`{..:text}`), which normalizing would change.
    pub fn takes_text(&self) -> bool {
        self.patterns
            .iter()
            .flat_map(|p| &p.parts)
            .any(|p| matches!(p, Part::Placeholder { kind: PlaceholderType::Text, .. }))
    }

    /// The first rule of `values` that `args` break.
    pub fn broken_rule(&self, args: &Args) -> Option<BrokenRule> {
        self.values.iter().find_map(|(name, rule)| rule.admits(name, args.get(name)?).err())
    }

    /// The command as a person reads it, with `args` in place: "refund 25 on order 1234".
    pub fn reads(&self, args: &Args) -> String {
        self.reads_as.fill(args)
    }

    /// The command as a person of `locale` reads it (`pt-BR`, then `pt`, else `reads_as`).
    pub fn reads_in(&self, args: &Args, locale: &str) -> String {
        let locale = locale.to_lowercase();
        let language = locale.split(['-', '_']).next().unwrap_or_default();
        let reads = self.reads_as_in.get(&locale).or_else(|| self.reads_as_in.get(language));
        reads.unwrap_or(&self.reads_as).fill(args)
    }

    /// The command written exactly as its first pattern that takes all of `args`: what a person
    /// accepting a suggestion sends back, read again exactly.
    pub fn written(&self, args: &Args) -> Option<String> {
        let takes_all = |p: &&Pattern| {
            let names: BTreeSet<&str> = p
                .parts
                .iter()
                .filter_map(|part| match part {
                    Part::Placeholder { name, .. } => Some(name.as_str()),
                    Part::Literal(_) => None,
                })
                .collect();
            names.len() == args.len() && args.keys().all(|k| names.contains(k.as_str()))
        };
        self.patterns.iter().find(takes_all).map(|p| ReadsAs::of_pattern(p).fill(args))
    }
}

crate::domain::names::named_enum! {
    /// How a text was read as its command: written exactly as a pattern, read once normalized,
    /// read with typos in its words, an interactive reply's id, a suggestion the person
    /// accepted, its values collected in turns, or a request corrected (issue #48).
    ReadingRule {
        Exact => "exact",
        Normalized => "normalized",
        Fuzzy => "fuzzy",
        ReplyId => "reply_id",
        Accepted => "accepted",
        Collected => "collected",
        Corrected => "corrected",
    }
}

/// How a message became its command: the rule and the pattern that read it, and the edits made
/// to its words (what the canonicalization's evidence records, so that an auditor can see why
/// "refnd 1234 25" was a refund).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    pub rule: ReadingRule,
    pub pattern: String,
    pub typos: usize,
}

impl Reading {
    /// Whether the person must see the command and confirm it whatever the registry says: a
    /// mutation read with typos in its words is never run on a guess.
    pub fn needs_confirmation(&self) -> bool {
        self.rule == ReadingRule::Fuzzy
    }
}

/// Who a message is read for: the tenant's locale (how its numbers are written) and currency.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Audience {
    pub locale: String,
    /// ISO 4217; an amount written with another currency is refused.
    pub currency: Option<String>,
}

/// What a message means to the registry.
#[derive(Debug, PartialEq)]
pub enum Interpretation<'a> {
    Command {
        spec: &'a CommandSpec,
        /// Where `spec` is in the registry's `commands()`.
        at: usize,
        args: Args,
        reading: Reading,
    },
    /// Matches two or more commands: refused as ambiguous (SMCL S6) rather than guessed.
    Ambiguous(Vec<&'a CommandSpec>),
    /// `spec`, said not to be done ("don't …", "… no wait"): never run.
    Negated(&'a CommandSpec),
    /// Two requests in one message: never run, one at a time.
    Several,
    /// Written as `spec` is, with a value that breaks its rule.
    BrokenRule {
        spec: &'a CommandSpec,
        broken: BrokenRule,
    },
    /// Written as `spec` is, with an amount that could mean two things (`2,500`): asked back.
    TwoReadings {
        spec: &'a CommandSpec,
        value: String,
        readings: (String, String),
    },
    /// Not understood, but close to `spec`: "did you mean …?". With `accept`, the exact text
    /// the person accepts with one tap (`refund 1234 25`); without, the command's usage.
    DidYouMean {
        spec: &'a CommandSpec,
        accept: Option<String>,
    },
    /// Asks for help explicitly.
    Help,
    /// Courtesy alone: a thank-you, an emoji.
    Courtesy,
    NoMatch,
}

impl Interpretation<'_> {
    /// How the message was read, for the metrics: the reading rule of a command, or why none.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Command { reading, .. } => reading.rule.as_str(),
            Self::Ambiguous(_) => "ambiguous",
            Self::BrokenRule { .. } => "refused",
            Self::TwoReadings { .. } => "asked_back",
            Self::DidYouMean { .. } => "suggested",
            Self::Negated(_) => "negated",
            Self::Several => "several",
            Self::Help => "help",
            Self::Courtesy => "courtesy",
            Self::NoMatch => "no_match",
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Registry {
    commands: Vec<CommandSpec>,
    /// Names this registry among the ones the gateway has run (the start of the SHA-256 of its
    /// file): a command records it, and keeps its entry when the registry is reloaded.
    version: String,
    /// The file it was read from, kept so that every instance can read a version again.
    text: String,
    /// How a message not written exactly as a pattern is read again (`[language.*]`).
    normalizer: Normalizer,
}

/// Every problem found, one line each, each naming `file:line`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("; "))]
pub struct RegistryError(pub Vec<String>);

/// The executor that is the gateway itself: the built-in chat commands (`status`, `why`,
/// `retry`, ...) run there (`builtin:gateway`).
pub const GATEWAY_EXECUTOR: &str = "gateway";

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
        let normalizer = Normalizer::new(&raw.language);
        let normalized = |p: &Pattern| p.normalized(|w| normalizer.word(w));
        for (i, (line_a, a)) in commands.iter().enumerate() {
            for (line_b, b) in &commands[i + 1..] {
                for (pa, pb) in pairs(&a.patterns, &b.patterns).chain(pairs(&a.reply_ids, &b.reply_ids)) {
                    let how = if pa.overlaps(pb) {
                        ""
                    } else if normalized(pa).overlaps(&normalized(pb)) {
                        " once normalized"
                    } else {
                        continue;
                    };
                    problems.push(format!(
                        "{line_b}: command `{}` pattern `{}` overlaps `{}` of command `{}` ({line_a}){how}: \
                         one message could mean both",
                        b.name, pb.source, pa.source, a.name
                    ));
                }
            }
        }
        if problems.is_empty() {
            let commands = commands.into_iter().map(|(_, spec)| spec).collect();
            let registry = Self { commands, version: Self::version_of(text), text: text.to_owned(), normalizer };
            registry.reads_its_examples(&raw, &at).map(|()| registry)
        } else {
            Err(RegistryError(problems))
        }
    }

    /// A registry from specs as they are, without the overlap check (for tests of the runtime
    /// ambiguity guard).
    pub fn from_specs(commands: Vec<CommandSpec>) -> Self {
        Self { commands, version: "specs".into(), text: String::new(), normalizer: Normalizer::default() }
    }

    /// The version a registry file's text has.
    pub fn version_of(text: &str) -> String {
        use sha2::Digest;
        let digest = hex::encode(sha2::Sha256::digest(text.as_bytes()));
        format!("r-{}", &digest[..16])
    }

    pub fn version(&self) -> &str {
        &self.version
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn commands(&self) -> &[CommandSpec] {
        &self.commands
    }

    /// Where the command an envelope's intent stands for is in `commands()`.
    pub fn position(&self, entity: &str, action: &str) -> Option<usize> {
        self.commands.iter().position(|c| c.entity == entity && c.action == action)
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

    /// The commands an actor holding `scopes` may ask for, as usage lines for a help reply.
    pub fn help_lines(&self, scopes: &BTreeSet<String>) -> Vec<String> {
        // What the tenant's systems do first, then the gateway's own (status, why, ...).
        let mut commands: Vec<&CommandSpec> =
            self.commands.iter().filter(|c| c.scopes.is_subset(scopes) && !c.patterns.is_empty()).collect();
        commands.sort_by_key(|c| c.executor == GATEWAY_EXECUTOR);
        commands
            .iter()
            .map(|c| if c.description.is_empty() { c.usage() } else { format!("{} — {}", c.usage(), c.description) })
            .collect()
    }
}

fn pairs<'a>(a: &'a [Pattern], b: &'a [Pattern]) -> impl Iterator<Item = (&'a Pattern, &'a Pattern)> {
    a.iter().flat_map(move |x| b.iter().map(move |y| (x, y)))
}

#[cfg(test)]
mod tests;
