//! What a message is read as when it is not written exactly as a pattern: Unicode compatibility
//! forms folded (full-width digits become ASCII), the punctuation people put after a
//! word (`1234?`, `#1234,`), a `#` or a number mark (`no.`, `nº`) before a number, and greetings
//! and politeness (`hi`, `please`, `thanks`) at either end of the message — the words each locale
//! lists in the registry (`[language.en] fillers`, compared without case). Values are never
//! changed otherwise (an id keeps its capitals: patterns compare their own words without case),
//! and a word inside the message stays where it is, so `refund please 1234 25` is still not read.

use std::collections::BTreeMap;

use serde::Deserialize;
use unicode_normalization::UnicodeNormalization;

use super::numbers::{NumberStyle, is_currency_mark};

/// Punctuation that may follow any word.
const TRAILING: &[char] = &[',', ';', ':', '!', '?', '¿', '¡', '…'];

/// `[language.LOCALE]` in the registry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LanguageWords {
    /// Greetings and politeness, one word or several (`thank you`), dropped at either end.
    #[serde(default)]
    pub fillers: Vec<String>,
    /// Words that say "number" before one (`no.`, `nº`), dropped before a number.
    #[serde(default)]
    pub number_marks: Vec<String>,
    /// Words that say "do not" before a command (`don't`, `never`): such a message is never one.
    #[serde(default)]
    pub negations: Vec<String>,
    /// Words that take a command back after it (`no wait`, `never mind`).
    #[serde(default)]
    pub retractions: Vec<String>,
    /// Words between two commands in one message (`and`, `then`).
    #[serde(default)]
    pub joiners: Vec<String>,
    /// Words that, alone, end a command being written in turns (`cancel`, `stop`).
    #[serde(default)]
    pub cancels: Vec<String>,
    /// Words that, at the start of a message, correct the request waiting for its confirmation
    /// (`no, 30`, `make it 30`, `actually order 1235`).
    #[serde(default)]
    pub corrections: Vec<String>,
    /// Thanks (`thanks`, `obrigado`): fillers too, and a message of fillers with one of these in
    /// it is courtesy, answered in a few words (a greeting alone is answered with the help).
    #[serde(default)]
    pub thanks: Vec<String>,
    /// Words that ask to link another channel (`link`): alone, for a code; before a code, to
    /// offer it from the address to link (`link K7M2QX9P`).
    #[serde(default)]
    pub links: Vec<String>,
    /// Words that, alone, undo a link just made (`stop`, `not me`): the answer its notice asks for.
    #[serde(default)]
    pub not_me: Vec<String>,
    /// The mark between whole and fraction in the locale's numbers (`,` in Portuguese); `.`
    /// when unset.
    pub decimal_mark: Option<char>,
    /// The locale's own ten digits, 0 to 9, when it has them: read as ASCII's.
    pub digits: Option<String>,
}

/// What a message about linking asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Linking {
    /// "link" alone, from a listed person: a code, please.
    Ask,
    /// "link K7M2QX9P": the code, offered from the address to link.
    Offer(String),
    /// "stop", "not me": undo the link the person was just told of.
    NotMe,
}

/// Every locale's words at once: a greeting in any of the tenant's languages is noise.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Normalizer {
    /// Filler phrases as tokens, longest first.
    fillers: Vec<Vec<String>>,
    number_marks: Vec<String>,
    /// Phrases as tokens, longest first.
    negations: Vec<Vec<String>>,
    retractions: Vec<Vec<String>>,
    joiners: Vec<Vec<String>>,
    cancels: Vec<Vec<String>>,
    thanks: Vec<Vec<String>>,
    corrections: Vec<Vec<String>>,
    links: Vec<Vec<String>>,
    not_me: Vec<Vec<String>>,
    /// The first words of both: a message with none of them is about no link (checked before
    /// the message is normalized, as every message is).
    link_words: Vec<String>,
    /// How each locale writes numbers, by its name (`pt`).
    styles: BTreeMap<String, NumberStyle>,
}

/// Each phrase of every locale as folded tokens, longest first.
fn phrases<'l>(lists: impl Iterator<Item = &'l Vec<String>>) -> Vec<Vec<String>> {
    let mut phrases: Vec<Vec<String>> = lists
        .flatten()
        .map(|f| fold(f).split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .filter(|f| !f.is_empty())
        .collect();
    phrases.sort_by_key(|f| std::cmp::Reverse(f.len()));
    phrases.dedup();
    phrases
}

/// Compatibility forms folded (`１２` is `12`).
fn compatible(text: &str) -> String {
    text.nfkc().collect()
}

/// Folded and lower-cased, a typographic apostrophe as `'`: how a word is compared with the lists.
fn fold(text: &str) -> String {
    compatible(text).to_lowercase().replace('\u{2019}', "'")
}

impl Normalizer {
    pub fn new(languages: &BTreeMap<String, LanguageWords>) -> Self {
        let number_marks = languages.values().flat_map(|l| &l.number_marks).map(|m| fold(m)).collect();
        Self {
            fillers: phrases(languages.values().flat_map(|l| [&l.fillers, &l.thanks])),
            number_marks,
            negations: phrases(languages.values().map(|l| &l.negations)),
            retractions: phrases(languages.values().map(|l| &l.retractions)),
            joiners: phrases(languages.values().map(|l| &l.joiners)),
            cancels: phrases(languages.values().map(|l| &l.cancels)),
            thanks: phrases(languages.values().map(|l| &l.thanks)),
            corrections: phrases(languages.values().map(|l| &l.corrections)),
            links: phrases(languages.values().map(|l| &l.links)),
            not_me: phrases(languages.values().map(|l| &l.not_me)),
            link_words: phrases(languages.values().flat_map(|l| [&l.links, &l.not_me]))
                .into_iter()
                .filter_map(|phrase| phrase.into_iter().next())
                .collect(),
            styles: languages
                .iter()
                .map(|(name, l)| (name.to_lowercase(), NumberStyle::new(l.decimal_mark, l.digits.as_deref())))
                .collect(),
        }
    }

    /// How `locale` (`pt-BR`, then `pt`) writes numbers; `.` and ASCII digits if it is not listed.
    pub fn style(&self, locale: &str) -> NumberStyle {
        let locale = locale.to_lowercase();
        let language = locale.split(['-', '_']).next().unwrap_or_default();
        self.styles.get(&locale).or_else(|| self.styles.get(language)).cloned().unwrap_or_default()
    }

    /// One word of a pattern as a normalized message would have it (folded, lower case, without
    /// the punctuation after it): so that `check-config` sees two patterns that only normalizing
    /// tells apart.
    pub fn word(&self, word: &str) -> String {
        let folded = fold(word);
        let trimmed = folded.trim_end_matches(TRAILING).trim_end_matches(['.', '!', '?']);
        trimmed.strip_prefix('#').unwrap_or(trimmed).to_owned()
    }

    /// `text` as words, normalized.
    pub fn tokens(&self, text: &str) -> Vec<String> {
        let folded = compatible(text);
        let words: Vec<&str> = folded.split_whitespace().collect();
        let last = words.len().saturating_sub(1);
        let mut tokens: Vec<String> = words
            .iter()
            .enumerate()
            .map(|(i, word)| {
                let word = word.trim_end_matches(TRAILING);
                // A full stop ends the message; inside it, `no.` and `25.00` keep theirs.
                let word = if i == last { word.trim_end_matches(['.', '!', '?']) } else { word };
                let word = word.trim_end_matches(TRAILING);
                word.strip_prefix('#').filter(|w| w.starts_with(|c: char| c.is_ascii_digit())).unwrap_or(word)
            })
            .filter(|w| !w.is_empty() && !w.chars().all(|c| TRAILING.contains(&c) || c == '.'))
            .map(str::to_owned)
            .collect();
        self.drop_number_marks(&mut tokens);
        self.drop_fillers(&mut tokens);
        join_currency_marks(&mut tokens);
        tokens
    }

    /// What is left of `tokens` without a negation before it or a retraction after it, when
    /// there is one.
    pub fn unsaid<'t, 'w>(&self, tokens: &'t [&'w str]) -> Option<&'t [&'w str]> {
        let lower: Vec<String> = tokens.iter().map(|t| fold(t)).collect();
        let before = self.negations.iter().find(|n| lower.starts_with(n) && n.len() < tokens.len());
        if let Some(negation) = before {
            return Some(&tokens[negation.len()..]);
        }
        let after = self.retractions.iter().find(|r| lower.ends_with(r) && r.len() < tokens.len());
        after.map(|retraction| &tokens[..tokens.len() - retraction.len()])
    }

    /// Every way `tokens` could be two requests: at each word, and around each joiner.
    pub fn halves<'t, 'w>(&self, tokens: &'t [&'w str]) -> Vec<(&'t [&'w str], &'t [&'w str])> {
        let lower: Vec<String> = tokens.iter().map(|t| fold(t)).collect();
        let mut halves = vec![];
        for at in 1..tokens.len() {
            halves.push((&tokens[..at], &tokens[at..]));
            for joiner in self.joiners.iter().filter(|j| lower[at..].starts_with(j) && at + j.len() < tokens.len()) {
                halves.push((&tokens[..at], &tokens[at + joiner.len()..]));
            }
        }
        halves
    }

    /// Whether `tokens` are, all of them, one of the locales' cancel words (`cancel`, `never mind`).
    pub fn is_cancel(&self, tokens: &[String]) -> bool {
        let lower: Vec<String> = tokens.iter().map(|t| fold(t)).collect();
        self.cancels.contains(&lower)
    }

    /// Whether any word of `text` begins a link or not-me phrase: the cheap test before `linking`.
    pub fn may_link(&self, text: &str) -> bool {
        text.split_whitespace().map(|word| word.trim_matches(|c: char| c.is_ascii_punctuation())).any(|word| {
            self.link_words
                .iter()
                .any(|start| start.eq_ignore_ascii_case(word) || (!word.is_ascii() && fold(word) == *start))
        })
    }

    /// What `tokens` ask about linking: a link word alone (a code), a link word and one more word
    /// (that word offered as a code), a not-me word alone (undo).
    pub fn linking(&self, tokens: &[String]) -> Option<Linking> {
        let lower: Vec<String> = tokens.iter().map(|t| fold(t)).collect();
        if self.not_me.contains(&lower) {
            return Some(Linking::NotMe);
        }
        let phrase = self.links.iter().find(|l| lower.starts_with(l))?;
        match &tokens[phrase.len()..] {
            [] => Some(Linking::Ask),
            // A code typed in two halves (`K7M2 QX9P`) is one.
            rest @ ([_] | [_, _]) => Some(Linking::Offer(rest.concat())),
            _ => None,
        }
    }

    /// What follows a correction word at the start of `tokens` (`no, 30` → `30`), when they
    /// start with one and go on.
    pub fn corrected<'t>(&self, tokens: &'t [String]) -> Option<&'t [String]> {
        let lower: Vec<String> = tokens.iter().map(|t| fold(t)).collect();
        let phrase = self.corrections.iter().find(|c| lower.starts_with(c) && c.len() < tokens.len())?;
        Some(&tokens[phrase.len()..])
    }

    /// Whether `text` is courtesy and nothing else: fillers with thanks among them (`thank you 🙏`),
    /// or symbols only (`👍`, `❤️`, `🙂🙂`) — no letter, digit or question in it.
    pub fn only_courtesy(&self, text: &str) -> bool {
        let words: Vec<String> =
            fold(text).split_whitespace().map(|w| w.trim_end_matches(TRAILING).to_owned()).collect();
        if words.is_empty() {
            return false;
        }
        let symbols = text.chars().all(|c| c.is_whitespace() || !(c.is_alphanumeric() || c.is_ascii_punctuation()));
        let thanked = self.thanks.iter().any(|t| words.windows(t.len()).any(|w| w == t.as_slice()));
        symbols || (thanked && self.all_fillers(&words))
    }

    /// Whether `words` are filler phrases end to end.
    fn all_fillers(&self, words: &[String]) -> bool {
        words.is_empty() || self.fillers.iter().any(|f| words.starts_with(f) && self.all_fillers(&words[f.len()..]))
    }

    fn drop_number_marks(&self, tokens: &mut Vec<String>) {
        let mut i = 0;
        while i + 1 < tokens.len() {
            let before_number = tokens[i + 1].starts_with(|c: char| c.is_ascii_digit());
            if before_number && self.number_marks.contains(&tokens[i].to_lowercase()) {
                tokens.remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// Filler phrases at the start and the end, as many as there are.
    fn drop_fillers(&self, tokens: &mut Vec<String>) {
        loop {
            let lower: Vec<String> = tokens.iter().map(|t| t.to_lowercase()).collect();
            let at_start = self.fillers.iter().find(|f| lower.starts_with(f));
            if let Some(filler) = at_start.filter(|f| f.len() < tokens.len()) {
                tokens.drain(..filler.len());
                continue;
            }
            let at_end = self.fillers.iter().find(|f| lower.ends_with(f));
            if let Some(filler) = at_end.filter(|f| f.len() < tokens.len()) {
                tokens.truncate(tokens.len() - filler.len());
                continue;
            }
            return;
        }
    }
}

/// A currency mark written apart from its amount (`25 USD`, `$ 25`) joined to it, so that the
/// amount is one value (`25USD`).
fn join_currency_marks(tokens: &mut Vec<String>) {
    let numeric = |t: &str| t.starts_with(|c: char| c.is_numeric() || c == '-' || c == '−');
    let mut i = 0;
    while i < tokens.len() {
        if is_currency_mark(&tokens[i]) {
            if i + 1 < tokens.len() && numeric(&tokens[i + 1]) {
                let number = tokens.remove(i + 1);
                tokens[i].push_str(&number);
            } else if i > 0 && tokens[i - 1].ends_with(|c: char| c.is_numeric()) {
                let mark = tokens.remove(i);
                tokens[i - 1].push_str(&mark);
                continue;
            }
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn english() -> Normalizer {
        let words = LanguageWords {
            fillers: ["hi", "hello", "please", "pls", "thanks", "thank you"].map(String::from).to_vec(),
            number_marks: ["no.", "nº", "number"].map(String::from).to_vec(),
            negations: ["don't", "do not"].map(String::from).to_vec(),
            retractions: ["no wait"].map(String::from).to_vec(),
            joiners: ["and"].map(String::from).to_vec(),
            ..LanguageWords::default()
        };
        Normalizer::new(&BTreeMap::from([("en".to_owned(), words)]))
    }

    #[test]
    fn greetings_punctuation_marks_and_wide_digits_go_and_values_stay() {
        let n = english();
        let read = |text: &str| n.tokens(text).join(" ");
        assert_eq!(read("Order status 1234?"), "Order status 1234");
        assert_eq!(read("Hi, please refund #1234 25.00, thank you!"), "refund 1234 25.00");
        assert_eq!(read("refund order no. 1234 25.00."), "refund order 1234 25.00");
        assert_eq!(read("ＲＥＦＵＮＤ １２３４ ２５"), "REFUND 1234 25");
        assert_eq!(read("refund please 1234 25"), "refund please 1234 25", "only at the ends");
        assert_eq!(read("please"), "please", "a message is never emptied");
        assert_eq!(read("order status #A-17"), "order status #A-17", "a # before a word stays");
        assert_eq!(read("order status A-17?"), "order status A-17", "an id keeps its capitals");
        assert_eq!(read("don't refund 1234 25"), "don't refund 1234 25");
        assert_eq!(read("refund 1234 25 USD"), "refund 1234 25USD", "a currency apart joins its amount");
        assert_eq!(read("refund 1234 $ 25"), "refund 1234 $25");
    }
}
