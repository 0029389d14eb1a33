//! Canonical JSON (JCS, RFC 8785): what every evidence hash and idempotency key is taken over.
//!
//! `serde_jcs` is the reference here, and slow: it buffers every object to sort its keys again and
//! prints every number through an ECMAScript float formatter (about 25 µs for one evidence body,
//! several per command, on the admission's hot path). For most values its output is byte for byte
//! serde_json's compact form: serde_json's maps are already sorted (a `BTreeMap`, by UTF-8 bytes),
//! and it escapes strings as JCS does (`\b \t \n \f \r \" \\`, other control characters as
//! lowercase `\u00xx`, nothing else). The two differ only on
//! - numbers that are not integers of at most 2^53 in magnitude (JCS prints them as ECMAScript
//!   does: `1` for `1.0`, exponents, the nearest double of a larger integer), and
//! - object keys with characters from U+E000 up, which UTF-16 order (JCS) sorts after the
//!   characters beyond U+FFFF and UTF-8 order before them.
//!
//! A value with neither is written by serde_json (about 1 µs); any other goes to `serde_jcs`.
//! The tests check the two agree on arbitrary values.

use serde::Serialize;
use serde_json::Value;

/// The largest integer every JSON reader (an IEEE double) holds exactly.
const EXACT_INTEGER: u64 = 1 << 53;

/// `value` in canonical (JCS) form.
pub fn to_string(value: &Value) -> String {
    if written_alike(value) {
        // A `Value` always serializes.
        return serde_json::to_string(value).unwrap_or_default();
    }
    serde_jcs::to_string(value).unwrap_or_else(|_| value.to_string())
}

/// Any serializable value in canonical (JCS) form; `None` when it cannot be made a JSON value (a
/// map whose keys are not strings).
pub fn of<T: Serialize>(value: &T) -> Option<String> {
    serde_json::to_value(value).ok().map(|value| to_string(&value))
}

/// Whether serde_json's compact form of `value` is already its canonical form.
pub fn written_alike(value: &Value) -> bool {
    match value {
        Value::Null | Value::Bool(_) | Value::String(_) => true,
        Value::Number(number) => {
            number.as_u64().is_some_and(|n| n <= EXACT_INTEGER)
                || number.as_i64().is_some_and(|n| n.unsigned_abs() <= EXACT_INTEGER)
        }
        Value::Array(items) => items.iter().all(written_alike),
        Value::Object(map) => map.iter().all(|(key, value)| sorted_alike(key) && written_alike(value)),
    }
}

/// Whether `key` sorts among its object's other keys by UTF-8 bytes as it does by UTF-16 units.
fn sorted_alike(key: &str) -> bool {
    key.is_ascii() || key.chars().all(|c| c < '\u{E000}')
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::to_string;

    fn reference(value: &Value) -> String {
        serde_jcs::to_string(value).expect("serde_jcs")
    }

    #[test]
    fn the_rfc_examples_and_the_edges_match_serde_jcs() {
        // RFC 8785 §3.2.2's example, as its text.
        let rfc = r#"{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
                      "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/", "literals": [null, true, false]}"#;
        let expected = r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"#;
        let expected = format!("{expected}{}", r#""string":"€$\u000f\nA'B\"\\\\\"/"}"#);
        assert_eq!(to_string(&serde_json::from_str(rfc).expect("the RFC's example")), expected);
        let values = [
            serde_json::from_str(rfc).expect("the RFC's example"),
            json!({"\u{20ac}": "Euro Sign", "\r": "Carriage Return", "\u{fb33}": "Hebrew Letter Dalet With Dagesh",
                   "1": "One", "\u{1f600}": "Emoji: Grinning Face", "\u{0080}": "Control",
                   "\u{00f6}": "Latin Small Letter O With Diaeresis"}),
            json!({"big": 9007199254740993u64, "edge": 9007199254740992u64, "negative": -9007199254740992i64,
                   "float": 1.0, "zero": 0, "nested": {"b": [1, 2.5, {"z": 1, "a": "\u{7f}\u{2028}"}], "a": null}}),
        ];
        for value in values {
            assert_eq!(to_string(&value), reference(&value), "{value}");
        }
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let key = prop_oneof![
            "[a-z_]{0,6}",
            any::<String>(),
            Just("\u{e000}".to_owned()),
            Just("\u{1f600}".to_owned()),
            Just("\u{ffff}".to_owned())
        ]
        .boxed();
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            (-(1i64 << 54)..(1i64 << 54)).prop_map(Value::from),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(key.clone(), inner, 0..6)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn any_value_is_written_as_serde_jcs_writes_it(value in any_json()) {
            prop_assert_eq!(to_string(&value), reference(&value));
        }
    }
}
