//! Rules a command's values keep, declared beside its patterns in the registry:
//! `values.amount = { more_than = "0", at_most = "10000", decimals = 2 }`
//! for numbers, `choices = [...]` for words. A value that breaks its rule makes no command: the
//! person is told the rule ("the amount must be more than 0"), never the help text, so that a
//! refund of −25, 0 or 25.999 is never put to a one-word "yes".

use std::fmt;

use serde::Deserialize;
use serde_json::Value;

use super::pattern::canonical_decimal;
use crate::domain::names::named_enum;

/// Digits kept after the point when numbers are compared (as many as a decimal may have).
const SCALE: u32 = 18;

/// One value's rule, as the registry writes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValueRule {
    pub more_than: Option<String>,
    pub at_least: Option<String>,
    pub at_most: Option<String>,
    /// Digits allowed after the point (2 for cents).
    pub decimals: Option<u32>,
    /// The words allowed, compared case-insensitively.
    #[serde(default)]
    pub choices: Vec<String>,
    /// The form a value has, as a regular expression it matches whole (`[0-9]{4,10}` for an
    /// order number), checked after normalizing (`#1234` and `no. 1234` are `1234` by then).
    pub pattern: Option<ValuePattern>,
    /// How such a value looks, for the reply that refuses another (`1234`).
    pub example: Option<String>,
}

/// A value's form: a regular expression (the `regex` crate's syntax), anchored at both ends.
#[derive(Debug, Clone)]
pub struct ValuePattern(regex::Regex);

impl PartialEq for ValuePattern {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

impl Eq for ValuePattern {}

impl<'de> Deserialize<'de> for ValuePattern {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let source = String::deserialize(deserializer)?;
        let anchored = format!("^(?:{source})$");
        regex::Regex::new(&anchored).map(Self).map_err(|e| serde::de::Error::custom(format!("`pattern`: {e}")))
    }
}

named_enum! {
    /// Which rule a value broke.
    RuleKind {
        NotANumber => "not_a_number",
        MoreThan => "more_than",
        AtLeast => "at_least",
        AtMost => "at_most",
        Decimals => "decimals",
        Choices => "choices",
        Currency => "currency",
        Pattern => "pattern",
    }
}

/// A value that broke its rule: the placeholder, the rule, the limit the rule names (`0`, `2`,
/// `express, standard`). The reply says it in the person's language (`rejected`'s
/// `invalid_value`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokenRule {
    pub value: String,
    pub rule: RuleKind,
    pub limit: String,
}

impl fmt::Display for BrokenRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} {}", self.value, self.rule, self.limit)
    }
}

/// A canonical decimal as a whole number of 10^-18 units (18 digits each side fit an `i128`).
fn fixed(decimal: &str) -> Option<i128> {
    let canonical = canonical_decimal(decimal)?;
    let (negative, digits) = canonical.strip_prefix('-').map_or((false, canonical.as_str()), |d| (true, d));
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let padded = format!("{fraction:0<width$}", width = SCALE as usize);
    let units = whole.parse::<i128>().ok()? * 10_i128.pow(SCALE) + padded.parse::<i128>().ok()?;
    Some(if negative { -units } else { units })
}

impl ValueRule {
    /// What is wrong with the registry's own rule, if anything.
    pub fn check(&self) -> Result<(), String> {
        for (name, bound) in [("more_than", &self.more_than), ("at_least", &self.at_least), ("at_most", &self.at_most)]
        {
            if bound.as_deref().is_some_and(|b| fixed(b).is_none()) {
                return Err(format!("`{name}` is a number such as \"0\" or \"10000.00\""));
            }
        }
        if self.decimals.is_some_and(|d| d > SCALE) {
            return Err(format!("`decimals` is at most {SCALE}"));
        }
        Ok(())
    }

    fn numeric(&self) -> bool {
        self.more_than.is_some() || self.at_least.is_some() || self.at_most.is_some()
    }

    /// Whether `value`, as the placeholder `name` captured it, keeps the rule.
    pub fn admits(&self, name: &str, value: &Value) -> Result<(), BrokenRule> {
        let broken = |rule: RuleKind, limit: &str| BrokenRule { value: name.to_owned(), rule, limit: limit.to_owned() };
        // A machine caller's JSON number is read as written (`25.5`); a person's values are text.
        let text = match value {
            Value::String(text) => text.clone(),
            Value::Number(number) => number.to_string(),
            _ if self.choices.is_empty() && !self.numeric() && self.decimals.is_none() && self.pattern.is_none() => {
                return Ok(());
            }
            _ if self.choices.is_empty() => return Err(broken(RuleKind::NotANumber, "")),
            _ => return Err(broken(RuleKind::Choices, &self.choices.join(", "))),
        };
        let text = text.as_str();
        if !self.choices.is_empty() && !self.choices.iter().any(|c| c.eq_ignore_ascii_case(text)) {
            return Err(broken(RuleKind::Choices, &self.choices.join(", ")));
        }
        if self.pattern.as_ref().is_some_and(|p| !p.0.is_match(text)) {
            return Err(broken(RuleKind::Pattern, self.example.as_deref().unwrap_or_default()));
        }
        if !self.numeric() && self.decimals.is_none() {
            return Ok(());
        }
        let Some(units) = fixed(text) else { return Err(broken(RuleKind::NotANumber, "")) };
        let decimals = text.split_once('.').map_or(0, |(_, f)| f.len());
        if let Some(most) = self.decimals
            && decimals > most as usize
        {
            return Err(broken(RuleKind::Decimals, &most.to_string()));
        }
        let bounds = [
            (&self.more_than, RuleKind::MoreThan, 1),
            (&self.at_least, RuleKind::AtLeast, 0),
            (&self.at_most, RuleKind::AtMost, -1),
        ];
        for (bound, rule, sign) in bounds {
            // `sign`: 1 for a lower bound not reached by equality, 0 for one that is, -1 for an upper.
            let Some(written) = bound.as_deref() else { continue };
            let Some(limit) = fixed(written) else { continue };
            let kept = match sign {
                1 => units > limit,
                0 => units >= limit,
                _ => units <= limit,
            };
            if !kept {
                return Err(broken(rule, written));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amount() -> ValueRule {
        ValueRule {
            more_than: Some("0".into()),
            at_most: Some("10000".into()),
            decimals: Some(2),
            ..ValueRule::default()
        }
    }

    fn broken_order(rule: RuleKind, limit: &str) -> Result<(), BrokenRule> {
        Err(BrokenRule { value: "order_id".into(), rule, limit: limit.into() })
    }

    fn broken(rule: RuleKind, limit: &str) -> Result<(), BrokenRule> {
        Err(BrokenRule { value: "amount".into(), rule, limit: limit.into() })
    }

    #[test]
    fn an_amount_is_more_than_zero_in_cents_and_bounded() {
        let rule = amount();
        let check = |v: &str| rule.admits("amount", &Value::String(v.into()));
        assert_eq!(check("25"), Ok(()));
        assert_eq!(check("0.01"), Ok(()));
        assert_eq!(check("10000"), Ok(()));
        assert_eq!(check("-25"), broken(RuleKind::MoreThan, "0"));
        assert_eq!(check("0"), broken(RuleKind::MoreThan, "0"));
        assert_eq!(check("25.999"), broken(RuleKind::Decimals, "2"));
        assert_eq!(check("10000.01"), broken(RuleKind::AtMost, "10000"));
        // A machine caller's numbers keep the same rule.
        assert_eq!(rule.admits("amount", &serde_json::json!(-25)), broken(RuleKind::MoreThan, "0"));
        assert_eq!(rule.admits("amount", &serde_json::json!(25.5)), Ok(()));
        assert_eq!(rule.admits("amount", &serde_json::json!(true)), broken(RuleKind::NotANumber, ""));
    }

    #[test]
    fn whole_numbers_choices_and_odd_rules() {
        let whole = ValueRule { decimals: Some(0), at_least: Some("1".into()), ..ValueRule::default() };
        assert_eq!(whole.admits("amount", &"2.5".into()), broken(RuleKind::Decimals, "0"));
        assert_eq!(whole.admits("amount", &"0".into()), broken(RuleKind::AtLeast, "1"));
        assert_eq!(whole.admits("amount", &"1".into()), Ok(()));
        let choice = ValueRule { choices: vec!["express".into(), "standard".into()], ..ValueRule::default() };
        assert_eq!(choice.admits("speed", &"EXPRESS".into()), Ok(()));
        assert_eq!(choice.admits("speed", &"slow".into()).map_err(|b| b.rule), Err(RuleKind::Choices));
        assert!(ValueRule { more_than: Some("zero".into()), ..ValueRule::default() }.check().is_err());
        let order: ValueRule = toml::from_str(
            r#"pattern = "[0-9]{4,10}"
example = "1234""#,
        )
        .expect("a rule");
        assert_eq!(order.admits("order_id", &"1234".into()), Ok(()));
        assert_eq!(order.admits("order_id", &"12".into()), broken_order(RuleKind::Pattern, "1234"));
        assert_eq!(order.admits("order_id", &"1234x".into()), broken_order(RuleKind::Pattern, "1234"), "anchored");
        assert!(toml::from_str::<ValueRule>(r#"pattern = "[0-9""#).is_err(), "a pattern that is none");
        assert_eq!(amount().check(), Ok(()));
        assert_eq!(fixed("-0.5"), Some(-500_000_000_000_000_000));
    }
}
