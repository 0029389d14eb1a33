//! Text patterns with typed placeholders: `refund {order_id:id} {amount:decimal}`.
//!
//! Matching is by whitespace-separated tokens, case-insensitive for literals, so extra spaces
//! and capitals do not matter. A placeholder takes one token, except `text`, which takes the
//! rest of the message and may only come last. Each typed value is normalized on the way in
//! (`25`, `25.0` and `25.00` are one decimal), so that they give one idempotency key.

use serde_json::Value;

use super::numbers::{NumberRead, NumberStyle, split_money};

/// What a placeholder accepts and how its value is normalized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlaceholderType {
    /// Letters, digits, `-` and `_`, up to 64 characters; kept as written.
    Id,
    /// An optionally signed decimal number; canonical form without superfluous zeros.
    Decimal,
    /// An optionally signed whole number.
    Int,
    /// An amount: a decimal with, in a normalized message, a currency symbol or code beside it
    /// (`$25`, `25 EUR`) that must name the tenant's currency.
    Money,
    /// Any single token.
    Word,
    /// The rest of the message (at least one token); must be the last part.
    Text,
}

impl PlaceholderType {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "id" => Self::Id,
            "decimal" => Self::Decimal,
            "int" => Self::Int,
            "money" => Self::Money,
            "word" => Self::Word,
            "text" => Self::Text,
            _ => return None,
        })
    }

    /// Its name in a pattern (`{amount:money}`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Id => "id",
            Self::Decimal => "decimal",
            Self::Int => "int",
            Self::Money => "money",
            Self::Word => "word",
            Self::Text => "text",
        }
    }

    /// The normalized value of one token, or `None` when the token is not of this type.
    pub fn normalize(self, token: &str) -> Option<Value> {
        match self {
            Self::Id => {
                let ok = !token.is_empty()
                    && token.len() <= 64
                    && token.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
                ok.then(|| Value::String(token.to_owned()))
            }
            Self::Decimal | Self::Money => canonical_decimal(token).map(Value::String),
            Self::Int => canonical_decimal(token).filter(|d| !d.contains('.')).map(Value::String),
            Self::Word | Self::Text => Some(Value::String(token.to_owned())),
        }
    }
}

/// `25`, `25.0`, `+25.00` and `025` all become `25`; `-0.50` becomes `-0.5`. At most 18 digits
/// before and 18 after the point, so that values fit any executor's decimal type.
pub fn canonical_decimal(token: &str) -> Option<String> {
    let (negative, digits) = match token.as_bytes().first()? {
        b'-' => (true, &token[1..]),
        b'+' => (false, &token[1..]),
        _ => (false, token),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !all_digits(whole) || !all_digits(fraction) {
        return None;
    }
    if digits.ends_with('.') || whole.len() > 18 || fraction.len() > 18 {
        return None;
    }
    let whole = whole.trim_start_matches('0');
    let fraction = fraction.trim_end_matches('0');
    let whole = if whole.is_empty() { "0" } else { whole };
    let magnitude = if fraction.is_empty() { whole.to_owned() } else { format!("{whole}.{fraction}") };
    Some(if negative && magnitude != "0" { format!("-{magnitude}") } else { magnitude })
}

/// How a message's words and values are read: exactly as a pattern writes them, or in the
/// tenant's number style with up to `typos` edits in the pattern's words.
#[derive(Debug, Clone, Copy)]
pub struct Reading<'s> {
    /// `None`: ASCII decimals only, no currency.
    pub numbers: Option<&'s NumberStyle>,
    /// Edits allowed in all the words together (never in values).
    pub typos: usize,
    /// Words shorter than this are never read with a typo (`why` is not `who`).
    pub shortest_typo_word: usize,
}

impl Reading<'_> {
    pub const EXACT: Reading<'static> = Reading { numbers: None, typos: 0, shortest_typo_word: usize::MAX };

    /// The edits between a message's word and a pattern's, if within what this reading allows.
    fn typos_between(&self, token: &str, word: &str) -> Option<usize> {
        // A message's words come lowercased already (`normalize`): a lowercase copy of the word
        // for each word of each pattern tried was an allocation per comparison.
        let lower = if token.chars().all(|c| c.to_lowercase().eq([c])) {
            std::borrow::Cow::Borrowed(token)
        } else {
            std::borrow::Cow::Owned(token.to_lowercase())
        };
        if *lower == *word {
            return Some(0);
        }
        if self.typos == 0 || word.chars().count() < self.shortest_typo_word {
            return None;
        }
        let edits = strsim::damerau_levenshtein(&lower, word);
        (edits <= self.typos).then_some(edits)
    }
}

/// A pattern's reading of a message.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Match {
    pub args: serde_json::Map<String, Value>,
    /// `(placeholder, mark)`: the currency written beside an amount.
    pub marks: Vec<(String, String)>,
    /// `(placeholder, the locale's reading, the other)`: an amount that could mean two things.
    pub two_readings: Option<(String, String, String)>,
    /// The placeholders that are money.
    pub money: Vec<String>,
    /// Edits made to the pattern's words to read the message.
    pub typos: usize,
}

impl Match {
    fn value(&mut self, name: &str, kind: PlaceholderType, token: &str, how: &Reading<'_>) -> Option<()> {
        let numeric = matches!(kind, PlaceholderType::Decimal | PlaceholderType::Int | PlaceholderType::Money);
        if kind == PlaceholderType::Money {
            self.money.push(name.to_owned());
        }
        let Some(style) = how.numbers.filter(|_| numeric) else {
            self.args.insert(name.to_owned(), kind.normalize(token)?);
            return Some(());
        };
        let number = if kind == PlaceholderType::Money {
            let written = split_money(token)?;
            if let Some(mark) = written.mark {
                self.marks.push((name.to_owned(), mark.to_owned()));
            }
            style.read(&written.number)
        } else {
            style.read(token)
        };
        let value = match number {
            NumberRead::Number(n) => kind.normalize(&n)?,
            NumberRead::TwoReadings(ours, other) => {
                let (ours, other) = (kind.normalize(&ours)?, kind.normalize(&other)?);
                let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
                self.two_readings.get_or_insert((name.to_owned(), text(&ours), text(&other)));
                ours
            }
            NumberRead::NotANumber => return None,
        };
        self.args.insert(name.to_owned(), value);
        Some(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// A word that must be there, compared case-insensitively (stored lowercase).
    Literal(String),
    Placeholder {
        name: String,
        kind: PlaceholderType,
    },
}

/// A compiled pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    pub source: String,
    pub parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("pattern is empty")]
    Empty,
    #[error("`{0}` is not a placeholder: write {{name:type}} with type id, decimal, int, money, word or text")]
    BadPlaceholder(String),
    #[error("placeholder `{0}` appears twice")]
    Duplicate(String),
    #[error("a {{..:text}} placeholder must be the last part")]
    TextNotLast,
    #[error("a pattern must start with a literal word")]
    NoLeadingLiteral,
}

/// Splits at whitespace and, when `colons`, at `:` outside `{...}`.
fn tokens(source: &str, colons: bool) -> Vec<&str> {
    let mut out = vec![];
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in source.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            c if depth == 0 && (c.is_whitespace() || (colons && c == ':')) => {
                if start < i {
                    out.push(&source[start..i]);
                }
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    if start < source.len() {
        out.push(&source[start..]);
    }
    out
}

impl Pattern {
    /// A text pattern: words separated by whitespace.
    pub fn parse(source: &str) -> Result<Self, PatternError> {
        Self::build(source, tokens(source, false))
    }

    /// An interactive reply id pattern, where `:` separates too (`order_status:{order_id:id}`).
    pub fn parse_reply_id(source: &str) -> Result<Self, PatternError> {
        Self::build(source, tokens(source, true))
    }

    fn build(source: &str, tokens: Vec<&str>) -> Result<Self, PatternError> {
        let mut parts = vec![];
        for token in tokens {
            if let Some(inner) = token.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
                let (name, kind) = inner.split_once(':').unwrap_or((inner, "word"));
                let valid_name = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                let kind = PlaceholderType::parse(kind).filter(|_| valid_name);
                let kind = kind.ok_or_else(|| PatternError::BadPlaceholder(token.to_owned()))?;
                if parts.iter().any(|p| matches!(p, Part::Placeholder { name: n, .. } if n == name)) {
                    return Err(PatternError::Duplicate(name.to_owned()));
                }
                parts.push(Part::Placeholder { name: name.to_owned(), kind });
            } else if token.contains(['{', '}']) {
                return Err(PatternError::BadPlaceholder(token.to_owned()));
            } else {
                parts.push(Part::Literal(token.to_lowercase()));
            }
        }
        match parts.first() {
            None => return Err(PatternError::Empty),
            Some(Part::Placeholder { .. }) => return Err(PatternError::NoLeadingLiteral),
            Some(Part::Literal(_)) => {}
        }
        let text_at = parts.iter().position(|p| matches!(p, Part::Placeholder { kind: PlaceholderType::Text, .. }));
        if text_at.is_some_and(|at| at != parts.len() - 1) {
            return Err(PatternError::TextNotLast);
        }
        Ok(Self { source: source.to_owned(), parts })
    }

    /// The arguments when `tokens` match exactly, normalized; `None` otherwise.
    pub fn matches(&self, tokens: &[&str]) -> Option<serde_json::Map<String, Value>> {
        let found = self.read(tokens, &Reading::EXACT)?;
        (found.marks.is_empty() && found.two_readings.is_none()).then_some(found.args)
    }

    /// What `tokens` say when they match as `how` reads them: the arguments, the currency marks
    /// beside amounts, an amount with two readings, the typos corrected in the words.
    pub fn read(&self, tokens: &[&str], how: &Reading<'_>) -> Option<Match> {
        let mut found = Match::default();
        let mut rest = tokens;
        for part in &self.parts {
            match part {
                Part::Literal(word) => {
                    let (first, tail) = rest.split_first()?;
                    found.typos += how.typos_between(first, word)?;
                    rest = tail;
                }
                Part::Placeholder { name, kind: PlaceholderType::Text } => {
                    if rest.is_empty() {
                        return None;
                    }
                    found.args.insert(name.clone(), Value::String(rest.join(" ")));
                    rest = &[];
                }
                Part::Placeholder { name, kind } => {
                    let (first, tail) = rest.split_first()?;
                    found.value(name, *kind, first, how)?;
                    rest = tail;
                }
            }
        }
        (rest.is_empty() && found.typos <= how.typos).then_some(found)
    }

    /// A usage line for help replies: `refund {order_id} {amount}`.
    pub fn usage(&self) -> String {
        let words: Vec<String> = self
            .parts
            .iter()
            .map(|p| match p {
                Part::Literal(word) => word.clone(),
                Part::Placeholder { name, .. } => format!("{{{name}}}"),
            })
            .collect();
        words.join(" ")
    }

    /// The pattern with each of its words as `word` normalizes it.
    pub fn normalized(&self, word: impl Fn(&str) -> String) -> Self {
        let parts = self
            .parts
            .iter()
            .map(|part| match part {
                Part::Literal(literal) => Part::Literal(word(literal)),
                placeholder => placeholder.clone(),
            })
            .collect();
        Self { source: self.source.clone(), parts }
    }

    /// Whether some message could match both patterns (checked at start-up, so that a
    /// registry never depends on which of two commands is tried first).
    pub fn overlaps(&self, other: &Pattern) -> bool {
        overlap(&self.parts, &other.parts)
    }
}

fn overlap(a: &[Part], b: &[Part]) -> bool {
    use PlaceholderType::Text;
    match (a.split_first(), b.split_first()) {
        (None, None) => true,
        // A text placeholder swallows one or more tokens of the other side.
        (Some((Part::Placeholder { kind: Text, .. }, _)), _) => !b.is_empty(),
        (_, Some((Part::Placeholder { kind: Text, .. }, _))) => !a.is_empty(),
        (Some((x, a_rest)), Some((y, b_rest))) => token_overlap(x, y) && overlap(a_rest, b_rest),
        _ => false,
    }
}

/// Whether one token could satisfy both parts.
fn token_overlap(a: &Part, b: &Part) -> bool {
    use PlaceholderType::*;
    match (a, b) {
        (Part::Literal(x), Part::Literal(y)) => x == y,
        (Part::Literal(word), Part::Placeholder { kind, .. })
        | (Part::Placeholder { kind, .. }, Part::Literal(word)) => kind.normalize(word).is_some(),
        (Part::Placeholder { kind: x, .. }, Part::Placeholder { kind: y, .. }) => match (x, y) {
            // Every decimal and int is also a word; whole numbers are ids.
            (Word | Text, _) | (_, Word | Text) => true,
            (Id | Decimal | Int | Money, Id | Decimal | Int | Money) => true,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tokens(text: &str) -> Vec<&str> {
        text.split_whitespace().collect()
    }

    #[test]
    fn typed_placeholders_match_and_normalize() {
        let refund = Pattern::parse("refund {order_id:id} {amount:decimal}").expect("valid");
        let args = refund.matches(&tokens("  REFUND   1234   25.00 ")).expect("matches");
        assert_eq!(serde_json::Value::Object(args), json!({"order_id": "1234", "amount": "25"}));
        assert!(refund.matches(&tokens("refund 1234 lots")).is_none(), "decimal type is checked");
        assert!(refund.matches(&tokens("refund 1234")).is_none(), "missing argument");
        assert!(refund.matches(&tokens("refund 1234 25 now")).is_none(), "extra words");
        assert!(refund.matches(&tokens("refund 12/34 25")).is_none(), "id type is checked");
    }

    #[test]
    fn decimals_have_one_canonical_form() {
        for (raw, canonical) in [
            ("25", "25"),
            ("25.0", "25"),
            ("25.00", "25"),
            ("+025.50", "25.5"),
            ("-0.50", "-0.5"),
            ("-0", "0"),
            (".5", "0.5"),
        ] {
            assert_eq!(canonical_decimal(raw).as_deref(), Some(canonical), "{raw}");
        }
        for bad in ["", "-", "25.", "2,5", "1e3", "twelve", "1.2.3", &"9".repeat(19)] {
            assert_eq!(canonical_decimal(bad), None, "{bad}");
        }
    }

    #[test]
    fn text_takes_the_rest_and_must_be_last() {
        let note = Pattern::parse("note {order_id:id} {body:text}").expect("valid");
        let args = note.matches(&tokens("note 7 call me   back")).expect("matches");
        assert_eq!(args["body"], "call me back");
        assert_eq!(Pattern::parse("say {a:text} now"), Err(PatternError::TextNotLast));
    }

    #[test]
    fn malformed_patterns_are_refused() {
        assert_eq!(Pattern::parse("  "), Err(PatternError::Empty));
        assert!(matches!(Pattern::parse("refund {x:cash}"), Err(PatternError::BadPlaceholder(_))));
        assert!(matches!(Pattern::parse("refund {x}{y}"), Err(PatternError::BadPlaceholder(_))));
        assert_eq!(Pattern::parse("refund {x:id} {x:id}"), Err(PatternError::Duplicate("x".into())));
        assert_eq!(Pattern::parse("{x:id} refund"), Err(PatternError::NoLeadingLiteral));
    }

    #[test]
    fn overlap_is_found_where_one_message_fits_both() {
        let p = |s| Pattern::parse(s).expect("valid");
        assert!(p("order status {id:id}").overlaps(&p("order {what:word} {id:id}")));
        assert!(p("refund {o:id} {a:decimal}").overlaps(&p("REFUND {x:int} {y:int}")));
        assert!(p("note {t:text}").overlaps(&p("note a b c")));
        assert!(!p("order status {id:id}").overlaps(&p("order cancel {id:id}")));
        assert!(!p("refund {o:id}").overlaps(&p("refund {o:id} {a:decimal}")));
        assert!(!p("pay {a:decimal}").overlaps(&p("pay now")), "`now` is no decimal");
    }

    #[test]
    fn a_word_is_read_lowercased_whatever_case_it_came_in() {
        let greeting = Pattern::parse("ǆabc σας").expect("valid");
        for written in ["ǆabc σας", "ǅabc ΣΑΣ", "Ǆabc Σας"] {
            assert!(greeting.matches(&tokens(written)).is_some(), "{written}");
        }
        assert!(greeting.matches(&tokens("ǆabc σασ")).is_none(), "a sigma inside a word is no final one");
    }

    #[test]
    fn usage_hides_types() {
        assert_eq!(
            Pattern::parse("Refund {order_id:id} {amount:decimal}").expect("valid").usage(),
            "refund {order_id} {amount}"
        );
    }
}
