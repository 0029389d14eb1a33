//! Commands written in turns (issue #48): "refund", then "1234", then "25.00", as people type on
//! their phones. A message that names a command and its first values, with only values left to
//! write, begins the command; each next message is read as the value asked for, with that value's
//! rules; and the command is its pattern read over all the words together, exactly as if they
//! had come in one message — the same values, so the same idempotency key.

use super::interpret::money_rule;
use super::pattern::{Match, Part, Pattern, PlaceholderType, Reading as HowRead};
use super::{Audience, BrokenRule, CommandSpec, Interpretation, Reading, ReadingRule, Registry};

/// A command begun: what a conversation keeps between turns.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Begun {
    /// The registry's name of the command.
    pub command: String,
    /// The pattern being filled in, as the registry writes it.
    pub pattern: String,
    /// The words read so far, normalized: the pattern's words and then one a value.
    pub words: Vec<String>,
}

/// The value a begun command waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// Its placeholder's name (`order_id`).
    pub name: String,
    pub kind: PlaceholderType,
}

/// What a message does to a begun command.
#[derive(Debug, PartialEq)]
pub enum Turn<'a> {
    /// Its last value: the command, read as if written in one go (`collected`).
    Complete(Interpretation<'a>),
    /// A value taken; `missing` is asked for next.
    Next { begun: Begun, missing: Missing },
    /// Not the value asked for: `missing` is asked again, with the rule it broke if it was one.
    Wrong { missing: Missing, broken: Option<BrokenRule> },
    /// The command or its pattern is no longer in the registry (a reload): the conversation ends.
    Gone,
}

/// Why words do not read as a (leading part of a) pattern.
enum Unread {
    NotRead,
    Broken(BrokenRule),
}

impl Registry {
    /// The command `text` begins, when it names exactly one command the person `may` ask for and
    /// leaves only values to write (`refund`, `refund 1234`), with the value asked for first.
    pub fn begin(
        &self,
        text: &str,
        audience: &Audience,
        may: impl Fn(&CommandSpec) -> bool,
    ) -> Option<(Begun, Missing)> {
        let words = self.normalizer.tokens(text);
        let tokens: Vec<&str> = words.iter().map(String::as_str).collect();
        let mut begun = self
            .commands
            .iter()
            .filter(|spec| may(spec))
            .filter_map(|spec| spec.patterns.iter().find_map(|p| self.begins(spec, p, &tokens, audience)));
        let first = begun.next()?;
        // Two commands begun alike are never guessed between.
        begun.next().is_none().then_some(first)
    }

    /// `pattern`'s longest leading part that `tokens` fill, when only values are left after it.
    fn begins(
        &self,
        spec: &CommandSpec,
        pattern: &Pattern,
        tokens: &[&str],
        audience: &Audience,
    ) -> Option<(Begun, Missing)> {
        let filled = tokens.len();
        if filled == 0 || filled >= pattern.parts.len() || !only_values_after(pattern, filled) {
            return None;
        }
        self.read_leading(spec, pattern, filled, tokens, audience).ok()?;
        let begun = Begun {
            command: spec.name.clone(),
            pattern: pattern.source.clone(),
            words: tokens.iter().map(|t| (*t).to_owned()).collect(),
        };
        Some((begun, missing_at(pattern, filled)?))
    }

    /// What `text` does to `begun`: a value taken, the command complete, or a value asked again.
    pub fn next_turn(&self, begun: &Begun, text: &str, audience: &Audience) -> Turn<'_> {
        let Some((at, spec)) = self.commands.iter().enumerate().find(|(_, s)| s.name == begun.command) else {
            return Turn::Gone;
        };
        let Some(pattern) = spec.patterns.iter().find(|p| p.source == begun.pattern) else { return Turn::Gone };
        let filled = begun.words.len();
        let Some(missing) = missing_at(pattern, filled).filter(|_| only_values_after(pattern, filled)) else {
            return Turn::Gone;
        };
        let answer = self.normalizer.tokens(text);
        let words: Vec<String> = begun.words.iter().cloned().chain(answer.iter().cloned()).collect();
        let tokens: Vec<&str> = words.iter().map(String::as_str).collect();
        let wrong = |broken| Turn::Wrong { missing: missing.clone(), broken };
        if answer.is_empty() {
            return wrong(None);
        }
        match self.read_leading(spec, pattern, pattern.parts.len(), &tokens, audience) {
            Ok(found) => {
                let reading = Reading { rule: ReadingRule::Collected, pattern: pattern.source.clone(), typos: 0 };
                return Turn::Complete(Interpretation::Command { spec, at, args: found.args, reading });
            }
            Err(Unread::Broken(broken)) => return wrong(Some(broken)),
            Err(Unread::NotRead) => {}
        }
        // Fewer values than the pattern has: the rest is asked for, one at a time.
        let upto = tokens.len().min(pattern.parts.len() - 1);
        match self.read_leading(spec, pattern, upto, &tokens, audience) {
            Ok(_) if upto > filled => match missing_at(pattern, upto) {
                Some(next) => Turn::Next { begun: Begun { words, ..begun.clone() }, missing: next },
                None => Turn::Gone,
            },
            Ok(_) | Err(Unread::NotRead) => wrong(None),
            Err(Unread::Broken(broken)) => wrong(Some(broken)),
        }
    }

    /// `tokens` read as the first `parts` of `pattern`, as a normalized message is (numbers in
    /// the tenant's style, no typos), each value with its rules.
    fn read_leading(
        &self,
        spec: &CommandSpec,
        pattern: &Pattern,
        parts: usize,
        tokens: &[&str],
        audience: &Audience,
    ) -> Result<Match, Unread> {
        let leading = Pattern { source: pattern.source.clone(), parts: pattern.parts[..parts].to_vec() };
        let style = self.normalizer.style(&audience.locale);
        let how = HowRead { numbers: Some(&style), ..HowRead::EXACT };
        let found = leading.read(tokens, &how).ok_or(Unread::NotRead)?;
        if found.two_readings.is_some() {
            return Err(Unread::NotRead);
        }
        match money_rule(&found, audience).or_else(|| spec.broken_rule(&found.args)) {
            Some(broken) => Err(Unread::Broken(broken)),
            None => Ok(found),
        }
    }

    /// Whether `text`, alone, says to stop what is being written (`cancel`, `stop`, `cancelar`).
    pub fn is_cancel(&self, text: &str) -> bool {
        self.normalizer.is_cancel(&self.normalizer.tokens(text))
    }
}

/// Whether every part of `pattern` from `filled` on is a value (no word left to write).
fn only_values_after(pattern: &Pattern, filled: usize) -> bool {
    pattern.parts.iter().skip(filled).all(|p| matches!(p, Part::Placeholder { .. }))
}

/// The value at `at` of `pattern`.
fn missing_at(pattern: &Pattern, at: usize) -> Option<Missing> {
    match pattern.parts.get(at)? {
        Part::Placeholder { name, kind } => Some(Missing { name: name.clone(), kind: *kind }),
        Part::Literal(_) => None,
    }
}

impl CommandSpec {
    /// The registry's question for the value `name` in `locale` (`asks_in`, then `asks`).
    pub fn question(&self, name: &str, locale: &str) -> Option<&str> {
        let locale = locale.to_lowercase();
        let language = locale.split(['-', '_']).next().unwrap_or_default();
        let localized = self.asks_in.get(&locale).or_else(|| self.asks_in.get(language));
        localized.and_then(|asks| asks.get(name)).or_else(|| self.asks.get(name)).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::registry::PlaceholderType::{Id, Money};

    fn usd() -> Audience {
        Audience { locale: "en".into(), currency: Some("USD".into()) }
    }

    fn everyone(_: &CommandSpec) -> bool {
        true
    }

    #[test]
    fn a_command_word_alone_begins_the_command_and_asks_for_its_first_value() {
        let registry = Registry::shipped_for_tests();
        let (begun, missing) = registry.begin("Refund, please", &usd(), everyone).expect("begun");
        assert_eq!((begun.command.as_str(), begun.pattern.as_str()), ("refund", "refund {order_id:id} {amount:money}"));
        assert_eq!(missing, Missing { name: "order_id".into(), kind: Id });
        let (begun, missing) = registry.begin("refund 1234", &usd(), everyone).expect("begun");
        assert_eq!((begun.words, missing.kind), (vec!["refund".to_owned(), "1234".to_owned()], Money));
        assert!(registry.begin("refund 1234 25", &usd(), everyone).is_none(), "whole: no turns");
        assert!(registry.begin("refund", &usd(), |spec| spec.name != "refund").is_none(), "not theirs");
        assert!(registry.begin("hello", &usd(), everyone).is_none());
        assert!(registry.begin("refund 12/34", &usd(), everyone).is_none(), "not an order id");
    }

    #[test]
    fn turns_read_each_value_with_its_rules_and_end_as_the_command_typed_at_once() {
        let registry = Registry::shipped_for_tests();
        let (begun, _) = registry.begin("refund", &usd(), everyone).expect("begun");
        let Turn::Next { begun, missing } = registry.next_turn(&begun, "#1234", &usd()) else { panic!("a value") };
        assert_eq!(missing.name, "amount");
        let Turn::Wrong { broken: Some(broken), .. } = registry.next_turn(&begun, "-5", &usd()) else {
            panic!("a broken rule")
        };
        assert_eq!(broken.value, "amount");
        assert!(matches!(registry.next_turn(&begun, "lots", &usd()), Turn::Wrong { broken: None, .. }));
        let Turn::Complete(collected) = registry.next_turn(&begun, "$25.00 🙏", &usd()) else { panic!("complete") };
        let Interpretation::Command { args, reading, .. } = collected else { panic!("a command") };
        assert_eq!(reading.rule, ReadingRule::Collected);
        let Interpretation::Command { args: at_once, .. } = registry.interpret_text_for("refund 1234 25", &usd())
        else {
            panic!("a command")
        };
        assert_eq!(args, at_once, "the same values, so the same key");
        let gone = Begun { command: "refund".into(), pattern: "refund {x:id}".into(), words: vec!["refund".into()] };
        assert_eq!(registry.next_turn(&gone, "1234", &usd()), Turn::Gone);
    }

    #[test]
    fn cancel_words_and_courtesy_are_known_alone() {
        let registry = Registry::shipped_for_tests();
        assert!(registry.is_cancel("Cancel!") && registry.is_cancel("cancelar") && registry.is_cancel("never mind"));
        assert!(!registry.is_cancel("cancel order 1234"));
        let normalizer = &registry.normalizer;
        for courtesy in ["thanks", "Thank you 🙏", "👍", "❤️", "🙂🙂", "obrigado!"] {
            assert!(normalizer.only_courtesy(courtesy), "{courtesy}");
        }
        for request in ["?", "thanks 1234", "refund", "❌ 1234", "help", "hello", "please"] {
            assert!(!normalizer.only_courtesy(request), "{request}");
        }
    }

    #[test]
    fn link_words_ask_offer_and_undo_alone() {
        use crate::domain::registry::Linking;
        let registry = Registry::shipped_for_tests();
        assert_eq!(registry.linking("Link"), Some(Linking::Ask));
        assert_eq!(registry.linking("vincular, por favor"), Some(Linking::Ask));
        assert_eq!(registry.linking("link k7m2qx9p"), Some(Linking::Offer("k7m2qx9p".into())));
        assert_eq!(registry.linking("Link code K7M2 QX9P!"), Some(Linking::Offer("K7M2QX9P".into())));
        assert_eq!(registry.linking("STOP"), Some(Linking::NotMe));
        assert_eq!(registry.linking("não fui eu"), Some(Linking::NotMe));
        for other in ["refund 1234 25", "link my order 1234 to 5678 please now", "stop it now", "linking"] {
            assert_eq!(registry.linking(other), None, "{other}");
        }
    }
}
