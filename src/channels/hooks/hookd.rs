//! What Bloodbank's hookd bridge callers put in `POST /hooks/agent` (delorenj/bloodbank's
//! `hookd/bridge.py`): a `text` whose `[Command] action=<a> id=<id> from=<who> priority=<p>` line
//! names the action (everything after the line is its payload, JSON or plain text), and a
//! `sessionKey` of the form `agent:<name>:...` naming the agent.

use serde_json::{Map, Value};

/// The action of a text without a `[Command]` line, as hookd names it.
pub const PLAIN_TEXT_ACTION: &str = "hook_dispatch";

/// What a hookd text asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct HookText {
    /// Normalized as hookd does: lower case, `-`, `.` and spaces as `_`.
    pub action: String,
    /// `id=`: the caller's own id of the command, its idempotency key here.
    pub id: Option<String>,
    /// `from=`: who issued it.
    pub from: Option<String>,
    /// `priority=`.
    pub priority: Option<String>,
    /// The text after the `[Command]` line: its fields when it is a JSON object, else
    /// `raw_text`; the whole text when there is no `[Command]` line.
    pub payload: Map<String, Value>,
}

impl HookText {
    /// Whether there is nothing to do: a blank text with no `[Command]` line (hookd answers 204).
    pub fn is_empty(&self) -> bool {
        self.action == PLAIN_TEXT_ACTION && self.payload.get("raw_text").and_then(Value::as_str).is_some_and(blank)
    }
}

fn blank(text: &str) -> bool {
    text.trim().is_empty()
}

/// Reads a hookd text.
pub fn parse(text: &str) -> HookText {
    let plain = || {
        let mut payload = Map::new();
        payload.insert("raw_text".into(), text.into());
        HookText { action: PLAIN_TEXT_ACTION.into(), id: None, from: None, priority: None, payload }
    };
    let Some(start) = text.find("[Command]") else { return plain() };
    let rest = &text[start + "[Command]".len()..];
    // `key=value` words in hookd's order (action first, then id, from, priority, each optional),
    // separated by white space; the payload starts after the last one read.
    let mut fields: [Option<&str>; 4] = [None; 4];
    let mut cursor = rest;
    let mut next_key = 0;
    while let Some(word) = cursor.split_whitespace().next() {
        let Some((key, value)) = word.split_once('=') else { break };
        let Some(index) = ["action", "id", "from", "priority"].iter().position(|k| *k == key) else { break };
        if index < next_key || value.is_empty() {
            break;
        }
        fields[index] = Some(value);
        next_key = index + 1;
        let end = cursor.find(word).unwrap_or_default() + word.len();
        cursor = &cursor[end..];
    }
    let Some(action) = fields[0] else { return plain() };
    let remaining = cursor.trim();
    let payload = match serde_json::from_str::<Value>(remaining) {
        Ok(Value::Object(fields)) => fields,
        _ if remaining.is_empty() => Map::new(),
        _ => {
            let mut payload = Map::new();
            payload.insert("raw_text".into(), remaining.into());
            payload
        }
    };
    HookText {
        action: normalize_action(action),
        id: fields[1].map(str::to_owned),
        from: fields[2].map(str::to_owned),
        priority: fields[3].map(str::to_owned),
        payload,
    }
}

/// hookd's action normalization.
pub fn normalize_action(action: &str) -> String {
    let normalized: String =
        action.trim().to_lowercase().chars().map(|c| if matches!(c, '-' | '.' | ' ') { '_' } else { c }).collect();
    if normalized.is_empty() { PLAIN_TEXT_ACTION.into() } else { normalized }
}

/// The agent a session key names: `agent:<name>:...`.
pub fn agent_of_session(session_key: &str) -> Option<&str> {
    let rest = session_key.strip_prefix("agent:")?;
    let (name, _) = rest.split_once(':')?;
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_names_the_action_its_id_and_its_payload() {
        let text =
            parse("[Command] action=Run-Drift.Check id=GOD-5 from=cack priority=high\n{\"ticket_id\": \"GOD-5\"}");
        assert_eq!(text.action, "run_drift_check");
        assert_eq!(
            (text.id.as_deref(), text.from.as_deref(), text.priority.as_deref()),
            (Some("GOD-5"), Some("cack"), Some("high"))
        );
        assert_eq!(text.payload["ticket_id"], "GOD-5");
        let partial = parse("[Command] action=healthcheck");
        assert_eq!((partial.action.as_str(), partial.id, partial.payload.len()), ("healthcheck", None, 0));
        let words = parse("[Command] action=restart please do it now");
        assert_eq!(words.payload["raw_text"], "please do it now");
    }

    #[test]
    fn plain_and_empty_texts() {
        let plain = parse("Check the RabbitMQ logs for auth failures");
        assert_eq!(plain.action, PLAIN_TEXT_ACTION);
        assert_eq!(plain.payload["raw_text"], "Check the RabbitMQ logs for auth failures");
        assert!(!plain.is_empty());
        assert!(parse("").is_empty());
        assert!(parse("  \n ").is_empty());
        assert!(!parse("[Command] action=hook_dispatch").is_empty(), "an explicit command is something to do");
        assert_eq!(parse("[Command] id=1").action, PLAIN_TEXT_ACTION, "no action: a plain text");
    }

    #[test]
    fn the_session_key_names_the_agent() {
        assert_eq!(agent_of_session("agent:lenoon:main"), Some("lenoon"));
        assert_eq!(agent_of_session("hook:email:msg-123"), None);
        assert_eq!(agent_of_session("agent::main"), None);
    }
}
