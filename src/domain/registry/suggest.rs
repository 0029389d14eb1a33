//! "Did you mean …?" for a message that is no command but is close to one: with one more typo in
//! its words, or with one word of it left out ("refund the order 1234 25"), it reads as exactly one
//! command with its values — offered whole, accepted with one tap, and a mutation still asks for
//! its confirmation; failing that, the one command sharing the most words with it, by its usage.
//! A suggestion is never run by itself.

use std::collections::BTreeSet;

use super::interpret::Pass;
use super::{Audience, CommandSpec, Interpretation, Part, ReadingRule, Registry};

/// At most this many words are tried one left out (a chat message, not a document).
const MOST_WORDS: usize = 20;

/// Words shorter than this say nothing about which command was meant (`is`, `my`).
const TELLING_WORD: usize = 3;

impl Registry {
    pub(super) fn suggestion(&self, tokens: &[&str], audience: &Audience) -> Option<Interpretation<'_>> {
        let wider = Pass { rule: ReadingRule::Fuzzy, extra_typos: 1 };
        let mut readings = vec![self.interpret_tokens(tokens, wider, audience)];
        if tokens.len() <= MOST_WORDS {
            // A value is never left out: only a word that is not a number.
            let words = (1..tokens.len()).filter(|&at| !tokens[at].starts_with(|c: char| c.is_numeric()));
            for at in words {
                let fewer: Vec<&str> = tokens.iter().enumerate().filter(|(i, _)| *i != at).map(|(_, t)| *t).collect();
                readings.push(self.interpret_tokens(&fewer, Pass::FUZZY, audience));
            }
        }
        let mut whole: Vec<(&CommandSpec, serde_json::Map<String, serde_json::Value>)> = vec![];
        for reading in readings {
            if let Interpretation::Command { spec, args, .. } = reading
                && !whole.iter().any(|(s, a)| s.name == spec.name && *a == args)
            {
                whole.push((spec, args));
            }
        }
        match whole.as_slice() {
            [(spec, args)] => Some(Interpretation::DidYouMean { spec, accept: spec.written(args) }),
            [] => self.closest(tokens).map(|spec| Interpretation::DidYouMean { spec, accept: None }),
            _ => None,
        }
    }

    /// The one command whose words the message shares most, if one does.
    fn closest(&self, tokens: &[&str]) -> Option<&CommandSpec> {
        let said: Vec<String> = tokens.iter().map(|t| t.to_lowercase()).collect();
        let close = |word: &str| {
            said.iter().any(|s| s == word || (word.len() >= 5 && strsim::damerau_levenshtein(s, word) <= 1))
        };
        let mut scores: Vec<(usize, &CommandSpec)> = self
            .commands
            .iter()
            .filter(|spec| !spec.patterns.is_empty())
            .map(|spec| {
                let words: BTreeSet<&str> = spec
                    .patterns
                    .iter()
                    .flat_map(|p| &p.parts)
                    .filter_map(|part| match part {
                        Part::Literal(word) if word.chars().count() >= TELLING_WORD => Some(word.as_str()),
                        _ => None,
                    })
                    .collect();
                (words.iter().filter(|w| close(w)).count(), spec)
            })
            .filter(|(score, _)| *score > 0)
            .collect();
        scores.sort_by_key(|(score, _)| std::cmp::Reverse(*score));
        match scores.as_slice() {
            [(best, spec), rest @ ..] if rest.first().is_none_or(|(next, _)| next < best) => Some(spec),
            _ => None,
        }
    }
}
