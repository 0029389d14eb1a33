//! Corrections (issue #48, goal 2): while a request waits for its confirmation, "no, 30", "make it
//! 30" or "actually order 1235" replace one of its values. The forms are a closed list per locale
//! (the language tables' `corrections`), and the value replaced is never guessed: a value alone
//! corrects the command's one number (its amount), a value after a word names the value it
//! corrects — the value's name (`order` for `order_id`, `amount`) or a pattern's word before it
//! (`encomenda` in `reembolso da encomenda {order_id}`). Anything else is no correction.

use super::interpret::money_rule;
use super::pattern::{Part, Pattern, PlaceholderType, Reading as HowRead};
use super::{Args, Audience, BrokenRule, CommandSpec, Registry};

/// What a correction makes of a request's values.
#[derive(Debug, Clone, PartialEq)]
pub enum Correction {
    /// The values with the one corrected.
    Values(Args),
    /// The corrected value breaks its rule: the request stays as it was.
    Broken(BrokenRule),
}

impl Registry {
    /// Whether `text` starts as a correction does (the cheap test before any lookup).
    pub fn may_correct(&self, text: &str) -> bool {
        self.normalizer.corrected(&self.normalizer.tokens(text)).is_some()
    }

    /// `args` of a request of `spec`, as `text` corrects them; `None` when `text` is no
    /// correction of them (another form, a value that names nothing or two things, the same value).
    pub fn correct(&self, spec: &CommandSpec, args: &Args, text: &str, audience: &Audience) -> Option<Correction> {
        let tokens = self.normalizer.tokens(text);
        let rest = self.normalizer.corrected(&tokens)?;
        let (name, kind, value) = match rest {
            [value] => {
                let mut numbers = placeholders(spec).filter(|(_, kind, _)| is_number(*kind));
                let (name, kind, _) = numbers.next()?;
                numbers.next().is_none().then_some((name, kind, value))?
            }
            [word, value] => {
                let word = word.to_lowercase();
                let names = |(name, _, before): &(&str, PlaceholderType, Vec<&str>)| {
                    *name == word
                        || name.strip_prefix(word.as_str()).is_some_and(|r| r.starts_with('_'))
                        || before.contains(&word.as_str())
                };
                let mut named = placeholders(spec).filter(names);
                let (name, kind, _) = named.next()?;
                named.all(|(other, ..)| other == name).then_some((name, kind, value))?
            }
            _ => return None,
        };
        let single = Pattern { source: String::new(), parts: vec![Part::Placeholder { name: name.to_owned(), kind }] };
        let style = self.normalizer.style(&audience.locale);
        let found = single.read(&[value.as_str()], &HowRead { numbers: Some(&style), ..HowRead::EXACT })?;
        if found.two_readings.is_some() || args.get(name) == found.args.get(name) {
            return None;
        }
        if let Some(broken) = money_rule(&found, audience) {
            return Some(Correction::Broken(broken));
        }
        let mut corrected = args.clone();
        corrected.extend(found.args);
        Some(match spec.broken_rule(&corrected) {
            Some(broken) => Correction::Broken(broken),
            None => Correction::Values(corrected),
        })
    }
}

fn is_number(kind: PlaceholderType) -> bool {
    matches!(kind, PlaceholderType::Money | PlaceholderType::Decimal | PlaceholderType::Int)
}

/// Each value `spec`'s patterns take, with the words written right before it in any of them.
fn placeholders(spec: &CommandSpec) -> impl Iterator<Item = (&str, PlaceholderType, Vec<&str>)> {
    let mut found: Vec<(&str, PlaceholderType, Vec<&str>)> = vec![];
    for pattern in &spec.patterns {
        for (at, part) in pattern.parts.iter().enumerate() {
            let Part::Placeholder { name, kind } = part else { continue };
            let before = at.checked_sub(1).and_then(|b| match &pattern.parts[b] {
                Part::Literal(word) => Some(word.as_str()),
                Part::Placeholder { .. } => None,
            });
            match found.iter_mut().find(|(n, ..)| n == name) {
                Some((.., words)) => words.extend(before),
                None => found.push((name.as_str(), *kind, before.into_iter().collect())),
            }
        }
    }
    found.into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn usd() -> Audience {
        Audience { locale: "en".into(), currency: Some("USD".into()) }
    }

    fn refund_args() -> Args {
        json!({"order_id": "1234", "amount": "25"}).as_object().cloned().expect("an object")
    }

    #[test]
    fn a_value_alone_corrects_the_amount_and_a_named_one_the_value_it_names() {
        let registry = Registry::shipped_for_tests();
        let refund = registry.get("refund").expect("refund");
        let corrected = |text: &str| registry.correct(refund, &refund_args(), text, &usd());
        let values = |amount: &str, order: &str| {
            let args = json!({"order_id": order, "amount": amount}).as_object().cloned().expect("an object");
            Some(Correction::Values(args))
        };
        assert_eq!(corrected("no, 30"), values("30", "1234"));
        assert_eq!(corrected("Make it $30.00"), values("30", "1234"));
        assert_eq!(corrected("actually order 1235"), values("25", "1235"));
        assert_eq!(corrected("afinal encomenda #1235"), values("25", "1235"), "a Portuguese pattern's word");
        assert!(matches!(corrected("no, -5"), Some(Correction::Broken(_))), "a value that breaks its rule");
        for not_one in ["30", "no", "no, 25", "actually the other one", "no 30 40", "make it 30 EUR 5"] {
            assert_eq!(corrected(not_one), None, "{not_one}");
        }
        let close = registry.get("close_account").expect("close_account");
        let account = json!({"account_id": "A1"}).as_object().cloned().expect("an object");
        assert_eq!(registry.correct(close, &account, "no, 30", &usd()), None, "no number to correct");
    }
}
