//! Reading a hook call's body: the field checks and, beside them, the schemas the OpenAPI document
//! gives the same bodies, so that the two say the same.

use serde_json::{Map, Value, json};

use crate::channels::ChannelError;
use crate::channels::hooks::bad;

/// A string with a character that is not Unicode White_Space (what `str::trim` removes).
const NOT_ONLY_SPACE: &str =
    "[^\\t\\n\\u000B\\u000C\\r \\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]";

/// `hooks:{sessionKey}` is the conversation: visible ASCII, at most 256 bytes with the prefix.
pub(super) const SESSION_KEY: &str = "^[!-~]{1,250}$";

/// The bridge's bodies as the OpenAPI document describes them, written next to the checks below
/// so that the two say the same: a text is a string with something besides spaces, an optional
/// field may be left out or `null`. `/agent` takes OpenClaw's `message` or hookd's `text` (which
/// may be blank: nothing to do, 204); an `agentId` is one of `agents` (the configured ones); a
/// direct destination is `channel` and `to` together (or `channel` `last`) unless `deliver` is false;
/// `timeoutSeconds` and `idempotencyKey` may be anything (what is not usable is ignored, as
/// OpenClaw ignores it).
pub fn body_schemas(agents: &[String]) -> [(&'static str, Value); 3] {
    // Something besides what `str::trim` removes (Unicode White_Space), spelled out so that any
    // regex engine reads it alike.
    let text = json!({"type": "string", "pattern": NOT_ONLY_SPACE});
    let optional = |schema: &Value| {
        let mut schema = schema.clone();
        schema["type"] = json!([schema["type"], "null"]);
        schema
    };
    let mode = json!({"type": "string", "enum": ["now", "next-heartbeat"]});
    let mut mode_or_null = optional(&mode);
    mode_or_null["enum"] = json!(["now", "next-heartbeat", null]);
    let session = json!({"type": ["string", "null"], "pattern": SESSION_KEY});
    let optional_text = optional(&text);
    let agent = json!({
        "type": "object",
        "anyOf": [{"required": ["message"]}, {"required": ["text"]}],
        "properties": {
            "message": text,
            "text": {"type": "string"},
            "name": optional_text, "channel": optional_text, "to": optional_text, "accountId": optional_text,
            "model": optional_text, "thinking": optional_text,
            "agentId": {"enum": agents.iter().map(|a| json!(a)).chain([Value::Null]).collect::<Vec<_>>()},
            "sessionKey": session,
            "sessionMode": {"enum": ["isolated", "persistent", null]},
            "wakeMode": mode_or_null,
            "deliver": {"type": ["boolean", "null"]},
            "waitForCompletion": {"type": ["boolean", "null"]},
            "timeoutSeconds": {},
            "idempotencyKey": {},
        },
        "allOf": destination_schema(),
    });
    let wake = json!({
        "type": "object",
        "required": ["text"],
        "properties": {"text": text, "mode": mode_or_null},
    });
    [("/wake", wake), ("/agent", agent), ("/{name}", json!({"type": "object"}))]
}

/// While delivery is on (`deliver` not `false`): a `channel` other than `last` needs its `to`, a
/// `to` needs its `channel`, an `accountId` needs both and a direct one (as
/// `openclaw::destination` checks). `last`, earlier OpenClaw's default, is taken with or without
/// `to`: callers copied its example payload.
fn destination_schema() -> Value {
    let delivering = json!({"not": {"const": false}});
    let string = json!({"type": "string"});
    let direct = json!({"type": "string", "not": {"const": "last"}});
    let given = |field: &str, schema: &Value| {
        let properties = json!({field: schema, "deliver": delivering});
        json!({"required": [field], "properties": properties})
    };
    let needs = |properties: Value| {
        let required: Vec<&String> = properties.as_object().into_iter().flat_map(|p| p.keys()).collect();
        json!({"required": required, "properties": properties})
    };
    json!([
        {"if": given("channel", &direct), "then": needs(json!({"to": string}))},
        {"if": given("to", &string), "then": needs(json!({"channel": string}))},
        {"if": given("accountId", &string), "then": needs(json!({"channel": direct, "to": string}))},
    ])
}

/// The headers a submission reads, as checked in `submit` (lower-case names).
pub fn header_schemas() -> [(&'static str, Value); 2] {
    [
        ("idempotency-key", json!({"type": "string", "pattern": "^[!-~]{1,255}$"})),
        ("x-correlation-id", json!({"type": "string", "pattern": "^[!-~]{1,256}$"})),
    ]
}

pub(super) fn body_object(body: &[u8]) -> Result<Map<String, Value>, ChannelError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(bad("invalid_body", "The body is a JSON object.")),
        Err(e) => Err(bad("invalid_body", format!("The body is not JSON: {e}"))),
    }
}

/// A field that must be a non-empty string when present (`required`: and present).
pub(super) fn text_field(
    body: &Map<String, Value>,
    name: &str,
    required: bool,
) -> Result<Option<String>, ChannelError> {
    match body.get(name) {
        None | Some(Value::Null) if !required => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
        None | Some(Value::Null) => Err(bad("invalid_body", format!("`{name}` is required"))),
        Some(_) => Err(bad("invalid_body", format!("`{name}` is a non-empty string"))),
    }
}

pub(super) fn mode_field(body: &Map<String, Value>, name: &str) -> Result<Option<String>, ChannelError> {
    let mode = text_field(body, name, false)?;
    match mode.as_deref() {
        None | Some("now" | "next-heartbeat") => Ok(mode),
        Some(other) => Err(bad("invalid_body", format!("`{name}` is `now` or `next-heartbeat`, not `{other}`"))),
    }
}
