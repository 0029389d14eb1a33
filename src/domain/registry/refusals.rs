//! Texts that read as a command and must not become one: a negation of it ("don't refund 1234
//! 25", "refund 1234 25 no wait") and two requests in one message ("refund 1234 25 and order
//! status 1234"). Each is told why, instead of the help text; neither is ever run.

use super::interpret::Pass;
use super::{Audience, CommandSpec, Interpretation, Registry};

/// At most this many words are searched for two requests (a chat message, not a document).
const MOST_WORDS: usize = 40;

impl Registry {
    /// What a normalized text that reads as no command says instead, if anything.
    pub(super) fn refusal(&self, tokens: &[&str], audience: &Audience) -> Option<Interpretation<'_>> {
        if let Some(rest) = self.normalizer.unsaid(tokens)
            && let Some(spec) = self.requested(rest, audience)
        {
            return Some(Interpretation::Negated(spec));
        }
        if tokens.len() > MOST_WORDS {
            return None;
        }
        let several = self.normalizer.halves(tokens).into_iter().any(|(first, second)| {
            self.requested(first, audience).is_some() && self.requested(second, audience).is_some()
        });
        several.then_some(Interpretation::Several)
    }

    /// The command `tokens` ask for, typos and all, whether or not its values keep their rules.
    fn requested(&self, tokens: &[&str], audience: &Audience) -> Option<&CommandSpec> {
        [Pass::NORMALIZED, Pass::FUZZY].into_iter().find_map(|pass| {
            match self.interpret_tokens(tokens, pass, audience) {
                Interpretation::Command { spec, .. }
                | Interpretation::BrokenRule { spec, .. }
                | Interpretation::TwoReadings { spec, .. } => Some(spec),
                _ => None,
            }
        })
    }
}
