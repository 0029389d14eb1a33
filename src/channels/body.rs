//! What every provider's webhook body shares: an envelope read as a type (the one the OpenAPI
//! document describes, so the two cannot drift apart), the things inside it kept as JSON and read
//! leniently one by one. A body whose envelope is wrong is refused whole and nothing is stored;
//! a message inside it in an odd shape is never a reason to refuse its neighbours (a provider
//! retries the whole delivery on a 4xx or 5xx, for ever or until it disables the endpoint).

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// An id a provider writes as a number and, leniently, as text (Telegram's `update_id`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum NumberOrText {
    Number(i64),
    Text(String),
}

impl NumberOrText {
    /// The id as text; `None` for a blank one.
    pub fn text(&self) -> Option<String> {
        match self {
            NumberOrText::Number(n) => Some(n.to_string()),
            NumberOrText::Text(s) => Some(s.trim().to_owned()).filter(|s| !s.is_empty()),
        }
    }
}

/// A list a provider sends as an array and, in some SDKs' fixtures, as one object where a list of
/// one was meant (WhatsApp's `entry`, `changes`, `messages`).
#[derive(Debug, Clone, PartialEq, Deserialize, utoipa::ToSchema)]
// Read as JSON and matched by its shape (`try_from`): serde would read an untagged enum by
// buffering the whole delivery once more. `untagged` still gives the schema its two shapes.
#[serde(untagged, try_from = "Value")]
pub enum Items {
    #[schema(value_type = Vec<Object>)]
    Many(Vec<Value>),
    #[schema(value_type = Object)]
    One(serde_json::Map<String, Value>),
}

impl TryFrom<Value> for Items {
    type Error = &'static str;

    fn try_from(value: Value) -> Result<Self, Self::Error> {
        match value {
            Value::Array(items) => Ok(Items::Many(items)),
            Value::Object(object) => Ok(Items::One(object)),
            _ => Err("a list (or one object)"),
        }
    }
}

impl Default for Items {
    fn default() -> Self {
        Items::Many(vec![])
    }
}

impl IntoIterator for Items {
    type Item = Value;
    type IntoIter = std::vec::IntoIter<Value>;

    fn into_iter(self) -> Self::IntoIter {
        match self {
            Items::Many(items) => items.into_iter(),
            Items::One(object) => vec![Value::Object(object)].into_iter(),
        }
    }
}

/// Reads a body's envelope as `T`: a JSON object (serde would also read a struct from an array,
/// by position, which no provider sends), then its fields. The error says what is wrong, for the
/// problem document.
pub fn envelope<T: DeserializeOwned>(value: &Value) -> Result<T, String> {
    if !value.is_object() {
        return Err("the body is not a JSON object".into());
    }
    T::deserialize(value).map_err(|e| e.to_string())
}

/// The same, taking the body's value (what the envelope holds is moved, not copied).
pub fn take_envelope<T: DeserializeOwned>(value: Value) -> Result<T, String> {
    if !value.is_object() {
        return Err("the body is not a JSON object".into());
    }
    serde_json::from_value(value).map_err(|e| e.to_string())
}

/// A form's fields as a JSON object of strings: what is stored of a form-encoded webhook, and
/// what its form type reads (a field sent twice keeps its last value).
pub fn form(params: &[(String, String)]) -> Value {
    Value::Object(params.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect())
}

/// A JSON text's value, or why it is not JSON.
pub fn json(body: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(body).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize)]
    struct Envelope {
        id: NumberOrText,
    }

    #[test]
    fn an_envelope_is_an_object_whose_fields_read_as_its_type() {
        let id = |value: Value| envelope::<Envelope>(&value).map(|e| e.id.text());
        assert_eq!(id(json!({"id": 7})), Ok(Some("7".into())));
        assert_eq!(id(json!({"id": " 7 "})), Ok(Some("7".into())));
        assert_eq!(id(json!({"id": " "})), Ok(None));
        // By position serde would read `[7]` as `{"id": 7}`.
        assert!(id(json!([7])).is_err_and(|e| e.contains("not a JSON object")));
        assert!(id(json!({"id": true})).is_err());
        assert!(id(json!({})).is_err_and(|e| e.contains("missing field `id`")));
        assert!(take_envelope::<Envelope>(json!([7])).is_err());
    }

    #[test]
    fn items_are_a_list_or_one_object_read_as_a_list_of_one() {
        #[derive(Debug, Deserialize)]
        struct Listing {
            #[serde(default)]
            entry: Items,
        }
        let entry = |value: Value| take_envelope::<Listing>(value).map(|l| l.entry.into_iter().collect::<Vec<_>>());
        assert_eq!(entry(json!({"entry": [{"a": 1}, {"b": 2}]})), Ok(vec![json!({"a": 1}), json!({"b": 2})]));
        assert_eq!(entry(json!({"entry": {"a": 1}})), Ok(vec![json!({"a": 1})]));
        assert_eq!(entry(json!({})), Ok(vec![]));
        assert!(entry(json!({"entry": "a"})).is_err());
    }
}
