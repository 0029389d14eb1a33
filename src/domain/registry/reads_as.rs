//! How a command reads to a person: the registry's `reads_as = "refund {amount} on order
//! {order_id}"`, filled in with the command's arguments ("refund 25 on order 1234"), for the
//! confirmation prompt and the outcome replies. A command without one reads as its first pattern
//! with the arguments in place, never with a raw `{placeholder}`.

use serde_json::Value;

use super::pattern::{Part, Pattern};
use crate::domain::command::Args;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Arg(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadsAs {
    pieces: Vec<Piece>,
}

impl ReadsAs {
    /// `{name}` marks an argument; every other character is text.
    pub fn parse(source: &str) -> Result<Self, String> {
        let mut pieces = vec![];
        let mut rest = source;
        while let Some(open) = rest.find('{') {
            let close = rest[open..].find('}').map(|c| open + c).ok_or("a `{` without its `}`")?;
            let name = &rest[open + 1..close];
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!("`{{{name}}}` is not an argument name"));
            }
            if open > 0 {
                pieces.push(Piece::Text(rest[..open].to_owned()));
            }
            pieces.push(Piece::Arg(name.to_owned()));
            rest = &rest[close + 1..];
        }
        if rest.contains('}') {
            return Err("a `}` without its `{`".into());
        }
        if !rest.is_empty() {
            pieces.push(Piece::Text(rest.to_owned()));
        }
        if pieces.is_empty() {
            return Err("is empty".into());
        }
        Ok(Self { pieces })
    }

    /// A pattern's words, its placeholders as arguments.
    pub fn of_pattern(pattern: &Pattern) -> Self {
        let mut pieces = vec![];
        for (i, part) in pattern.parts.iter().enumerate() {
            if i > 0 {
                pieces.push(Piece::Text(" ".into()));
            }
            pieces.push(match part {
                Part::Literal(word) => Piece::Text(word.clone()),
                Part::Placeholder { name, .. } => Piece::Arg(name.clone()),
            });
        }
        Self { pieces }
    }

    /// Plain text (a command without patterns).
    pub fn text(text: &str) -> Self {
        Self { pieces: vec![Piece::Text(text.to_owned())] }
    }

    /// The arguments it names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Arg(name) => Some(name.as_str()),
            Piece::Text(_) => None,
        })
    }

    /// The text with `args` in place (an argument the command lacks reads as its name).
    pub fn fill(&self, args: &Args) -> String {
        self.pieces
            .iter()
            .map(|piece| match piece {
                Piece::Text(text) => text.clone(),
                Piece::Arg(name) => match args.get(name) {
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                    None => name.clone(),
                },
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn args(value: Value) -> Args {
        value.as_object().cloned().expect("an object")
    }

    #[test]
    fn a_declared_reading_is_filled_with_the_arguments() {
        let reads = ReadsAs::parse("refund {amount} on order {order_id}").expect("parses");
        assert_eq!(reads.names().collect::<Vec<_>>(), ["amount", "order_id"]);
        assert_eq!(reads.fill(&args(json!({"order_id": "1234", "amount": "25.00"}))), "refund 25.00 on order 1234");
        assert_eq!(reads.fill(&args(json!({"order_id": 7, "amount": "1"}))), "refund 1 on order 7");
    }

    #[test]
    fn a_pattern_reads_with_its_values_in_place_of_its_placeholders() {
        let pattern = Pattern::parse("refund {order_id:id} {amount:decimal}").expect("pattern");
        let reads = ReadsAs::of_pattern(&pattern);
        assert_eq!(reads.fill(&args(json!({"order_id": "1234", "amount": "25"}))), "refund 1234 25");
    }

    #[test]
    fn malformed_readings_are_refused() {
        for bad in ["refund {amount", "refund amount}", "refund {} now", "refund {a-b}", ""] {
            assert!(ReadsAs::parse(bad).is_err(), "{bad:?}");
        }
    }
}
