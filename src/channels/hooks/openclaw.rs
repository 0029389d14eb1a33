//! OpenClaw's `/hooks/agent` contract as its newest reference states it (openclaw/openclaw
//! `docs/gateway/config-hooks.md` at 256572f, "Hook agent payload" and "Hook retries and
//! fan-out"): the optional fields, each checked; a direct destination given whole or not at all
//! (`channel` with `to`; `"last"`, which earlier OpenClaw took, is taken too); `timeoutSeconds`
//! floored, a non-positive or non-numeric one ignored; and the replay key — `Idempotency-Key`,
//! then `X-OpenClaw-Idempotency-Key`, then the body's `idempotencyKey`, trimmed, at most 256
//! characters. A retry under the key replays the run; another call under the same key is refused
//! (422, with evidence), as chatgate's idempotency promise (IDS) says, where OpenClaw would start
//! another run.

use axum::http::HeaderMap;
use serde_json::{Map, Value};
use sha2::Digest;

use super::bad;
use super::body::{mode_field, text_field};
use crate::channels::ChannelError;
use crate::domain::command::IdempotencyKey;

/// OpenClaw's longest replay key; a longer one is not a key (ignored, as OpenClaw ignores it).
const LONGEST_KEY: usize = 256;

/// OpenClaw's optional `/hooks/agent` fields, each checked, into the arguments.
pub(super) fn fields(body: &Map<String, Value>, args: &mut Map<String, Value>) -> Result<(), ChannelError> {
    for name in ["name", "agentId", "sessionKey", "channel", "to", "accountId", "model", "thinking"] {
        if let Some(value) = text_field(body, name, false)? {
            args.insert(name.into(), value.into());
        }
    }
    if let Some(mode) = mode_field(body, "wakeMode")? {
        args.insert("wakeMode".into(), mode.into());
    }
    match text_field(body, "sessionMode", false)?.as_deref() {
        None => {}
        Some(mode @ ("isolated" | "persistent")) => {
            args.insert("sessionMode".into(), mode.into());
        }
        Some(other) => {
            return Err(bad("invalid_body", format!("`sessionMode` is `isolated` or `persistent`, not `{other}`")));
        }
    }
    match body.get("deliver") {
        None | Some(Value::Null) => {}
        Some(Value::Bool(b)) => {
            args.insert("deliver".into(), (*b).into());
        }
        Some(_) => return Err(bad("invalid_body", "`deliver` is a boolean")),
    }
    // `waitForCompletion` is the caller's, not the command's: a retry may change it and replay.
    match body.get("waitForCompletion") {
        None | Some(Value::Null | Value::Bool(_)) => {}
        Some(_) => return Err(bad("invalid_body", "`waitForCompletion` is a boolean")),
    }
    if let Some(seconds) = body.get("timeoutSeconds").and_then(Value::as_f64).filter(|s| *s >= 1.0 && s.is_finite()) {
        args.insert("timeoutSeconds".into(), (seconds.floor().min(u32::MAX as f64) as u64).into());
    }
    destination(args)
}

/// A direct destination is whole (`channel` and `to`) or absent while delivery is on, and
/// `accountId` needs both. `"channel": "last"` — the example payload of OpenClaw's earlier hooks
/// (`docs/automation/webhook.md` at 013c24e7, where `channel` defaulted to `last`), which callers
/// copied — names no direct channel: it is taken (and kept in the command's arguments), with or
/// without `to`, where newest OpenClaw refuses it. Refused before anything is stored.
fn destination(args: &Map<String, Value>) -> Result<(), ChannelError> {
    if args.get("deliver") == Some(&Value::Bool(false)) {
        return Ok(());
    }
    let (channel, to) = (args.get("channel").and_then(Value::as_str), args.get("to"));
    if channel == Some("last") {
        return match args.contains_key("accountId") {
            true => Err(bad("invalid_destination", "`accountId` needs a direct `channel` and `to`, not `last`.")),
            false => Ok(()),
        };
    }
    if channel.is_some() != to.is_some() {
        return Err(bad("invalid_destination", "A destination is `channel` and `to` together, or neither."));
    }
    if args.contains_key("accountId") && channel.is_none() {
        return Err(bad("invalid_destination", "`accountId` needs `channel` and `to`."));
    }
    Ok(())
}

/// The caller's replay key, as OpenClaw resolves it; `None` when there is none (or it is empty or
/// too long). A key that is not one of chatgate's (visible ASCII, at most 255) is kept as its
/// digest.
pub(super) fn replay_key(headers: &HeaderMap, body: &Map<String, Value>) -> Option<IdempotencyKey> {
    let usable = |raw: &str| Some(raw.trim().to_owned()).filter(|k| !k.is_empty() && k.chars().count() <= LONGEST_KEY);
    let raw = ["idempotency-key", "x-openclaw-idempotency-key"]
        .iter()
        .find_map(|name| headers.get(*name).and_then(|v| v.to_str().ok()).and_then(usable))
        .or_else(|| body.get("idempotencyKey").and_then(Value::as_str).and_then(usable))?;
    IdempotencyKey::parse(&raw).ok().or_else(|| digest_key("hook", &[&raw]))
}

/// A key made of `parts` (a wake's agent, text and mode: the same wake while one waits).
pub(super) fn digest_key(prefix: &str, parts: &[&str]) -> Option<IdempotencyKey> {
    let digest = hex::encode(sha2::Sha256::digest(serde_json::json!(parts).to_string().as_bytes()));
    IdempotencyKey::parse(&format!("{prefix}:{digest}")).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn destinations_are_whole_and_timeouts_lenient() {
        let read = |body: Value| {
            let mut args = Map::new();
            fields(&map(body), &mut args).map(|()| args)
        };
        assert!(read(serde_json::json!({"channel": "last"})).is_ok(), "earlier OpenClaw's default");
        assert!(read(serde_json::json!({"channel": "last", "to": "+15551234567"})).is_ok(), "its example payload");
        assert!(read(serde_json::json!({"channel": "last", "to": "+1555", "accountId": "a"})).is_err());
        assert!(read(serde_json::json!({"channel": "whatsapp"})).is_err(), "half a destination");
        assert!(read(serde_json::json!({"to": "+1555"})).is_err(), "half a destination");
        assert!(read(serde_json::json!({"to": "+1555", "deliver": false})).is_ok(), "no delivery, no destination");
        assert!(read(serde_json::json!({"accountId": "a"})).is_err());
        assert!(read(serde_json::json!({"channel": "whatsapp", "to": "+1555", "accountId": "a"})).is_ok());
        let timeout = |t: Value| {
            read(serde_json::json!({"timeoutSeconds": t})).ok().and_then(|a| a.get("timeoutSeconds").cloned())
        };
        assert_eq!(timeout(serde_json::json!(12.9)), Some(12.into()), "floored");
        assert_eq!(timeout(serde_json::json!(0)), None, "ignored");
        assert_eq!(timeout(serde_json::json!(-5)), None, "ignored");
        assert_eq!(timeout(serde_json::json!("30")), None, "ignored");
    }

    /// The OpenAPI document's agent body accepts exactly the fields `fields` takes: each field
    /// alone with values of every kind, and every mix of `channel`, `to`, `accountId` and
    /// `deliver` (each left out, null or a value). (`agentId` is one of the configured agents:
    /// `choose_agent` checks it, the document's test its enum.)
    #[test]
    fn the_documented_fields_are_the_ones_taken() {
        let [_, (_, agent), _] = crate::channels::hooks::body_schemas(&[]);
        let schema = jsonschema::validator_for(&agent).expect("the agent body's schema compiles");
        let message = || map(serde_json::json!({"message": "refund 1234 25.00"}));
        let kinds = serde_json::json!([
            null,
            "",
            " ",
            "x",
            "last",
            "now",
            "next-heartbeat",
            "isolated",
            true,
            false,
            0,
            7.5,
            [],
            {}
        ]);
        let names = ["name", "channel", "to", "accountId", "model", "thinking", "wakeMode", "sessionMode"];
        let names = names.into_iter().chain(["deliver", "waitForCompletion", "timeoutSeconds", "idempotencyKey"]);
        let mut bodies: Vec<Map<String, Value>> = names
            .flat_map(|name| kinds.as_array().into_iter().flatten().map(move |value| (name, value.clone())))
            .map(|(name, value)| {
                let mut body = message();
                body.insert(name.into(), value);
                body
            })
            .collect();
        let mut mixes = vec![message()];
        let destination: [(&str, Vec<Value>); 4] = [
            ("channel", vec!["last".into(), "whatsapp".into()]),
            ("to", vec!["+15551234567".into()]),
            ("accountId", vec!["a".into()]),
            ("deliver", vec![true.into(), false.into()]),
        ];
        for (name, values) in destination {
            let choices = [None, Some(Value::Null)].into_iter().chain(values.into_iter().map(Some)).collect::<Vec<_>>();
            mixes = mixes
                .into_iter()
                .flat_map(|body| choices.iter().map(move |choice| (body.clone(), choice.clone())))
                .map(|(mut body, choice)| {
                    body.extend(choice.map(|value| (name.to_owned(), value)));
                    body
                })
                .collect();
        }
        assert_eq!(mixes.len(), 4 * 3 * 3 * 4);
        bodies.extend(mixes);
        for body in bodies {
            let taken = fields(&body, &mut Map::new()).is_ok();
            let body = Value::Object(body);
            assert_eq!(schema.is_valid(&body), taken, "{body}");
        }
    }

    #[test]
    fn the_replay_key_comes_from_the_headers_then_the_body() {
        let key = |headers: &HeaderMap, body: &Map<String, Value>| replay_key(headers, body).map(|k| k.to_string());
        let mut headers = HeaderMap::new();
        let body = map(serde_json::json!({"idempotencyKey": " body-key "}));
        assert_eq!(key(&headers, &body).as_deref(), Some("body-key"));
        headers.insert("x-openclaw-idempotency-key", "oc-key".parse().expect("header"));
        assert_eq!(key(&headers, &body).as_deref(), Some("oc-key"));
        headers.insert("idempotency-key", "std-key".parse().expect("header"));
        assert_eq!(key(&headers, &body).as_deref(), Some("std-key"));
        let long = map(serde_json::json!({"idempotencyKey": "k".repeat(257)}));
        assert_eq!(key(&HeaderMap::new(), &long), None, "too long: no key");
        let spaced = map(serde_json::json!({"idempotencyKey": "run é 1"}));
        assert!(key(&HeaderMap::new(), &spaced).is_some_and(|k| k.starts_with("hook:")), "kept as its digest");
    }
}
