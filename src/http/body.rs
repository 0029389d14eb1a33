//! JSON request bodies: one way to read them, so every route answers the same 400 and reads numbers
//! the way JSON Schema does.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::{Number, Value};

use crate::http::error::{ApiError, invalid_body};

/// A JSON body as the route's type `T`, read by [`read_json`]: the handler that takes it runs
/// only for a body that is one (a body too large is refused as the body limit says).
pub(crate) struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        let bytes = Bytes::from_request(request, state).await.map_err(IntoResponse::into_response)?;
        read_json(&bytes).map(JsonBody).map_err(IntoResponse::into_response)
    }
}

/// A body as the route's type, or a 400 `invalid_body` that says what was wrong.
pub(crate) fn read_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    decode_json(bytes).map_err(|e| invalid_body(&e.to_string()))
}

/// A body as the route's type. JSON Schema counts `25.0` as an integer (a number whose fraction is
/// zero), and the OpenAPI document is JSON Schema, so a client may send one where the type holds a
/// `u64`; serde refuses it. Such a body is read again with whole floats as integers; the first
/// error (with its line and column) is the one reported when that does not help either. A body
/// read at the first try keeps its numbers exactly as sent.
pub(crate) fn decode_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, serde_json::Error> {
    let first = match serde_json::from_slice::<T>(bytes) {
        Ok(value) => return Ok(value),
        Err(error) => error,
    };
    let Ok(mut value) = serde_json::from_slice::<Value>(bytes) else { return Err(first) };
    if !whole_floats_as_integers(&mut value) {
        return Err(first);
    }
    T::deserialize(value).map_err(|_| first)
}

/// Turns every float with no fraction that fits an integer into that integer; says whether any did.
fn whole_floats_as_integers(value: &mut Value) -> bool {
    match value {
        Value::Number(number) => match whole(number) {
            Some(integer) => {
                *number = integer;
                true
            }
            None => false,
        },
        Value::Array(items) => items.iter_mut().fold(false, |any, item| whole_floats_as_integers(item) | any),
        Value::Object(fields) => fields.values_mut().fold(false, |any, item| whole_floats_as_integers(item) | any),
        Value::Null | Value::Bool(_) | Value::String(_) => false,
    }
}

fn whole(number: &Number) -> Option<Number> {
    if !number.is_f64() {
        return None;
    }
    let float = number.as_f64()?;
    // Bounds are the integer types' own (2^63 and 2^64 are exact floats), so the casts cannot saturate.
    if float.fract() != 0.0 {
        None
    } else if (0.0..18_446_744_073_709_551_616.0).contains(&float) {
        Some(Number::from(float as u64))
    } else if (-9_223_372_036_854_775_808.0..0.0).contains(&float) {
        Some(Number::from(float as i64))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::decode_json;

    #[derive(Deserialize, Debug, PartialEq)]
    struct Window {
        within_secs: u64,
        offset: i64,
        extra: Option<serde_json::Value>,
    }

    #[test]
    fn a_whole_float_is_read_as_the_integer_json_schema_says_it_is() {
        let body = br#"{"within_secs": 208645584394825.0, "offset": -3.0, "extra": null}"#;
        let window: Window = decode_json(body).expect("whole floats are integers");
        assert_eq!(window, Window { within_secs: 208_645_584_394_825, offset: -3, extra: None });
    }

    #[test]
    fn a_float_with_a_fraction_is_still_refused_with_the_first_error() {
        let error = decode_json::<Window>(br#"{"within_secs": 2.5, "offset": 1}"#).expect_err("2.5 is no u64");
        assert!(error.to_string().contains("line 1"), "{error}");
        assert!(decode_json::<Window>(br#"{"within_secs": -1.0, "offset": 1}"#).is_err());
        assert!(decode_json::<Window>(br#"{"within_secs": 1e300, "offset": 1}"#).is_err());
    }

    #[test]
    fn a_body_read_at_the_first_try_keeps_its_numbers() {
        let window: Window = decode_json(br#"{"within_secs": 5, "offset": 0, "extra": {"amount": 25.0}}"#).unwrap();
        assert_eq!(window.extra, Some(json!({"amount": 25.0})));
    }
}
