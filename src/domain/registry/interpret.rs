//! What a message asks for, in the order a person's words are trusted: written exactly as a
//! pattern; normalized (`normalize`) with numbers in the tenant's style (`numbers`); said not to be
//! done, or two at once (`refusals`); with typos in the command's words, never in its values, and
//! only when one command is that close; else a "did you mean …?" (`suggest`).

use super::numbers::Currency;
use super::pattern::{Match, Reading as HowRead};
use super::{Audience, BrokenRule, CommandSpec, Interpretation, Reading, ReadingRule, Registry, RuleKind};

const HELP_WORDS: &[&str] = &["help", "?", "menu", "commands", "ajuda"];

/// Words shorter than this are never read with a typo: `why` is not `who`, `more` is not `mode`.
const SHORTEST_TYPO_WORD: usize = 5;

/// The id prefix of a suggestion's button: `cg:try:refund 1234 25` sends that text, read exactly.
pub const ACCEPT_PREFIX: &str = "cg:try:";

/// How a pass reads: the rule it records and whether the command's typos are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Pass {
    pub(super) rule: ReadingRule,
    /// Edits allowed beyond each command's own `typos` (a suggestion looks one further).
    pub(super) extra_typos: usize,
}

impl Pass {
    pub(super) const EXACT: Pass = Pass { rule: ReadingRule::Exact, extra_typos: 0 };
    pub(super) const NORMALIZED: Pass = Pass { rule: ReadingRule::Normalized, extra_typos: 0 };
    pub(super) const FUZZY: Pass = Pass { rule: ReadingRule::Fuzzy, extra_typos: 0 };
}

impl Registry {
    /// What a text message asks for, read for the default audience (English numbers, no currency).
    pub fn interpret_text(&self, text: &str) -> Interpretation<'_> {
        self.interpret_text_for(text, &Audience::default())
    }

    /// What a text message asks for, read for `audience`.
    pub fn interpret_text_for(&self, text: &str, audience: &Audience) -> Interpretation<'_> {
        let tokens: Vec<&str> = text.split_whitespace().collect();
        let exact = self.interpret_tokens(&tokens, Pass::EXACT, audience);
        if exact != Interpretation::NoMatch {
            return exact;
        }
        let normalized = self.normalizer.tokens(text);
        let normalized: Vec<&str> = normalized.iter().map(String::as_str).collect();
        let read = self.interpret_tokens(&normalized, Pass::NORMALIZED, audience);
        if read != Interpretation::NoMatch {
            return read;
        }
        if self.normalizer.only_courtesy(text) {
            return Interpretation::Courtesy;
        }
        if let Some(refusal) = self.refusal(&normalized, audience) {
            return refusal;
        }
        match self.interpret_tokens(&normalized, Pass::FUZZY, audience) {
            Interpretation::NoMatch => self.suggestion(&normalized, audience).unwrap_or(Interpretation::NoMatch),
            fuzzy => fuzzy,
        }
    }

    pub(super) fn interpret_tokens(&self, tokens: &[&str], pass: Pass, audience: &Audience) -> Interpretation<'_> {
        if let [word] = tokens
            && HELP_WORDS.contains(&word.to_lowercase().as_str())
        {
            return Interpretation::Help;
        }
        self.interpret(tokens, |spec| &spec.patterns, pass, audience)
    }

    /// What an interactive reply id asks for (`status:1234`), or a suggestion accepted with a
    /// tap (`cg:try:refund 1234 25`: that text, read exactly).
    pub fn interpret_reply_id(&self, id: &str) -> Interpretation<'_> {
        if let Some(text) = id.strip_prefix(ACCEPT_PREFIX) {
            let tokens: Vec<&str> = text.split_whitespace().collect();
            return match self.interpret_tokens(&tokens, Pass::EXACT, &Audience::default()) {
                Interpretation::Command { spec, at, args, reading } => {
                    let reading = Reading { rule: ReadingRule::Accepted, ..reading };
                    Interpretation::Command { spec, at, args, reading }
                }
                Interpretation::BrokenRule { spec, broken } => Interpretation::BrokenRule { spec, broken },
                _ => Interpretation::NoMatch,
            };
        }
        let tokens: Vec<&str> = id.split([':', ' ']).filter(|t| !t.is_empty()).collect();
        let pass = Pass { rule: ReadingRule::ReplyId, ..Pass::EXACT };
        self.interpret(&tokens, |spec| &spec.reply_ids, pass, &Audience::default())
    }

    fn interpret<'a>(
        &'a self,
        tokens: &[&str],
        patterns: impl Fn(&'a CommandSpec) -> &'a Vec<super::Pattern>,
        pass: Pass,
        audience: &Audience,
    ) -> Interpretation<'a> {
        if tokens.is_empty() {
            return Interpretation::NoMatch;
        }
        let style = self.normalizer.style(&audience.locale);
        let mut found: Vec<(usize, &CommandSpec, Match, &str)> = vec![];
        let (mut broken, mut two_readings) = (None, None);
        for (at, spec) in self.commands.iter().enumerate() {
            // Free text would change if it were normalized: such a command is only read exactly.
            if pass.rule != ReadingRule::Exact && pass.rule != ReadingRule::ReplyId && spec.takes_text() {
                continue;
            }
            // Numbers as the tenant writes them even in a text written exactly: `2.500` is never
            // 2.5 to a Portuguese shop.
            let how = match pass.rule {
                ReadingRule::ReplyId | ReadingRule::Accepted => HowRead::EXACT,
                ReadingRule::Exact | ReadingRule::Normalized | ReadingRule::Collected | ReadingRule::Corrected => {
                    HowRead { numbers: Some(&style), ..HowRead::EXACT }
                }
                ReadingRule::Fuzzy => HowRead {
                    numbers: Some(&style),
                    typos: spec.typos + pass.extra_typos,
                    shortest_typo_word: SHORTEST_TYPO_WORD,
                },
            };
            let best = patterns(spec)
                .iter()
                .filter_map(|p| Some((p.read(tokens, &how)?, p.source.as_str())))
                .min_by_key(|(m, _)| m.typos);
            let Some((matched, pattern)) = best else { continue };
            if let Some((value, ours, other)) = matched.two_readings.clone() {
                two_readings = two_readings.or(Some((spec, value, (ours, other))));
            } else if let Some(rule) = money_rule(&matched, audience).or_else(|| spec.broken_rule(&matched.args)) {
                broken = broken.or(Some((spec, rule)));
            } else {
                found.push((at, spec, matched, pattern));
            }
        }
        decide(found, broken, two_readings, pass)
    }
}

/// One command found: it; several: ambiguous (never guessed); none: why not, if a command was
/// written with a value that breaks its rule or could mean two things.
fn decide<'a>(
    mut found: Vec<(usize, &'a CommandSpec, Match, &str)>,
    broken: Option<(&'a CommandSpec, BrokenRule)>,
    two_readings: Option<(&'a CommandSpec, String, (String, String))>,
    pass: Pass,
) -> Interpretation<'a> {
    match (found.len(), broken, two_readings) {
        (0, None, None) => Interpretation::NoMatch,
        (0, _, Some((spec, value, readings))) => Interpretation::TwoReadings { spec, value, readings },
        (0, Some((spec, broken)), None) => Interpretation::BrokenRule { spec, broken },
        (1, None, None) => {
            let (at, spec, matched, pattern) = found.remove(0);
            let rule = if matched.typos > 0 { ReadingRule::Fuzzy } else { pass.rule };
            let reading = Reading { rule, pattern: pattern.to_owned(), typos: matched.typos };
            Interpretation::Command { spec, at, args: matched.args, reading }
        }
        (_, broken, two) => Interpretation::Ambiguous(
            found
                .into_iter()
                .map(|(_, spec, ..)| spec)
                .chain(broken.map(|(spec, _)| spec))
                .chain(two.map(|(spec, ..)| spec))
                .collect(),
        ),
    }
}

/// An amount with a currency mark must be in the tenant's currency, and no finer than its minor
/// unit (a cent for dollars, a whole yen).
pub(super) fn money_rule(matched: &Match, audience: &Audience) -> Option<BrokenRule> {
    let currency = audience.currency.as_deref().and_then(Currency::by_code);
    let broken = |value: &str, rule, limit: &str| BrokenRule { value: value.to_owned(), rule, limit: limit.to_owned() };
    for (name, mark) in &matched.marks {
        match currency {
            Some(c) if c.is_named_by(mark) => {}
            Some(c) => return Some(broken(name, RuleKind::Currency, c.code)),
            None => return Some(broken(name, RuleKind::Currency, "")),
        }
    }
    let currency = currency?;
    matched.money.iter().find_map(|name| {
        let value = matched.args.get(name)?.as_str()?;
        let decimals = value.split_once('.').map_or(0, |(_, f)| f.len());
        (decimals > currency.minor_units as usize)
            .then(|| broken(name, RuleKind::Decimals, &currency.minor_units.to_string()))
    })
}
