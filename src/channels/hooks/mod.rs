//! The hookd compatibility bridge (Bloodbank MIG-1): systems that call an agent's hook endpoint
//! (`/hooks/wake`, `/hooks/agent`, mapped `/hooks/{name}`, as the OpenClaw gateway takes them)
//! point at chatgate without changing what they send, and get `202 Accepted` at once. Each call
//! becomes a command for the target agent, stored with its evidence and dispatch row in one
//! transaction; the caller never waits for the executor.

use axum::http::{HeaderMap, StatusCode, header};
use serde_json::{Map, Value, json};
use subtle::ConstantTimeEq;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::channels::{ChannelError, Refusal};
use crate::domain::command::ActorId;
use crate::domain::command::Channel;
use crate::domain::command::CommandRequest;
use crate::domain::command::ExternalId;
use crate::domain::command::IdempotencyClass;
use crate::domain::command::IdempotencyKey;
use crate::domain::command::Intent;
use crate::domain::command::Risk;
use crate::domain::command::TenantId;
use crate::domain::lifecycle::CommandKind;
use crate::service::Services;
use crate::service::dispatch;
use crate::service::engine::Admission;
use crate::store::Admitted;

/// What a hook call asks for, once read and checked.
struct HookCall {
    agent: String,
    intent: Intent,
    args: Map<String, Value>,
    conversation: String,
}

fn bad(code: &'static str, detail: impl Into<String>) -> ChannelError {
    Refusal::bad_request(code, detail).into()
}

/// The hook token, from `Authorization: Bearer` or `x-openclaw-token`, compared in constant time;
/// a token in the query string is refused (it ends up in logs and proxies).
fn authenticate(state: &Services, headers: &HeaderMap, query: Option<&str>) -> Result<(), ChannelError> {
    let expected = state.config.hooks.token.expose();
    if expected.is_empty() {
        return Err(Refusal::not_configured("The hook bridge is not configured.").into());
    }
    if query.is_some_and(|q| q.split('&').any(|p| p.split('=').next().is_some_and(|k| k.eq_ignore_ascii_case("token"))))
    {
        return Err(bad(
            "token_in_query",
            "The hook token goes in a header (Authorization or x-openclaw-token), never in the URL.",
        ));
    }
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .or_else(|| headers.get("x-openclaw-token").and_then(|v| v.to_str().ok()))
        .map(str::trim);
    let ok = given.is_some_and(|g| bool::from(g.as_bytes().ct_eq(expected.as_bytes())));
    if ok {
        return Ok(());
    }
    Err(Refusal::new(StatusCode::UNAUTHORIZED, "unauthorized", "Unauthorized")
        .detail("A valid hook token is required.")
        .challenge("Bearer realm=\"chatgate-hooks\"")
        .into())
}

/// A string with a character that is not Unicode White_Space (what `str::trim` removes).
const NOT_ONLY_SPACE: &str =
    "[^\\t\\n\\u000B\\u000C\\r \\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]";

/// `hooks:{sessionKey}` is the conversation: visible ASCII, at most 256 bytes with the prefix.
const SESSION_KEY: &str = "^[!-~]{1,250}$";

/// The bridge's bodies as the OpenAPI document describes them, written next to the checks below
/// so that the two say the same: a text is a string with something besides spaces, an optional
/// field may be left out or `null`, `agentId` is one of `agents` (this gateway's allow-list).
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
    let mut agent_ids: Vec<Value> = agents.iter().map(|a| Value::from(a.as_str())).collect();
    agent_ids.push(Value::Null);
    let session = json!({"type": ["string", "null"], "pattern": SESSION_KEY});
    let optional_text = optional(&text);
    let agent = json!({
        "type": "object",
        "required": ["message"],
        "properties": {
            "message": text,
            "name": optional_text, "channel": optional_text, "to": optional_text,
            "model": optional_text, "thinking": optional_text,
            "agentId": {"type": ["string", "null"], "enum": agent_ids},
            "sessionKey": session,
            "wakeMode": mode_or_null,
            "deliver": {"type": ["boolean", "null"]},
            "timeoutSeconds": {"type": ["integer", "null"], "minimum": 1, "maximum": 86_400},
        },
    });
    let wake = json!({
        "type": "object",
        "required": ["text"],
        "properties": {"text": text, "mode": mode_or_null},
    });
    [("/wake", wake), ("/agent", agent), ("/{name}", json!({"type": "object"}))]
}

/// The headers a submission reads, as checked in `submit` (lower-case names).
pub fn header_schemas() -> [(&'static str, Value); 2] {
    [
        ("idempotency-key", json!({"type": "string", "pattern": "^[!-~]{1,255}$"})),
        ("x-correlation-id", json!({"type": "string", "pattern": "^[!-~]{1,256}$"})),
    ]
}

fn whole_seconds(n: &serde_json::Number) -> Option<u64> {
    n.as_u64()
        .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && (0.0..=u64::MAX as f64).contains(f)).map(|f| f as u64))
}

fn body_object(body: &[u8]) -> Result<Map<String, Value>, ChannelError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(bad("invalid_body", "The body is a JSON object.")),
        Err(e) => Err(bad("invalid_body", format!("The body is not JSON: {e}"))),
    }
}

/// A field that must be a non-empty string when present (`required`: and present).
fn text_field(body: &Map<String, Value>, name: &str, required: bool) -> Result<Option<String>, ChannelError> {
    match body.get(name) {
        None | Some(Value::Null) if !required => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
        None | Some(Value::Null) => Err(bad("invalid_body", format!("`{name}` is required"))),
        Some(_) => Err(bad("invalid_body", format!("`{name}` is a non-empty string"))),
    }
}

fn mode_field(body: &Map<String, Value>, name: &str) -> Result<Option<String>, ChannelError> {
    let mode = text_field(body, name, false)?;
    match mode.as_deref() {
        None | Some("now" | "next-heartbeat") => Ok(mode),
        Some(other) => Err(bad("invalid_body", format!("`{name}` is `now` or `next-heartbeat`, not `{other}`"))),
    }
}

fn default_agent(state: &Services) -> Result<String, ChannelError> {
    state.config.hooks.agents.first().cloned().ok_or_else(|| bad("no_agent", "No agent is configured for hooks."))
}

fn intent(entity: &str, action: &str) -> Result<Intent, ChannelError> {
    Intent::parse(entity, action, None).map_err(|e| bad("invalid_hook", e.to_string()))
}

/// `POST /hooks/wake`: `{"text": "...", "mode": "now" | "next-heartbeat"}`.
pub async fn wake(
    state: &Services,
    query: Option<&str>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Uuid, ChannelError> {
    authenticate(state, headers, query)?;
    let body = body_object(body)?;
    let text = text_field(&body, "text", true)?.unwrap_or_default();
    let mode = mode_field(&body, "mode")?.unwrap_or_else(|| "now".into());
    let mut args = Map::new();
    args.insert("text".into(), text.into());
    args.insert("mode".into(), mode.into());
    let call = HookCall {
        agent: default_agent(state)?,
        intent: intent("agent", "wake")?,
        args,
        conversation: "hooks:wake".into(),
    };
    admit(state, headers, call).await
}

/// `POST /hooks/agent`: `{"message": "..."}` and the optional OpenClaw fields, each checked.
pub async fn agent(
    state: &Services,
    query: Option<&str>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Uuid, ChannelError> {
    authenticate(state, headers, query)?;
    let body = body_object(body)?;
    let mut args = Map::new();
    args.insert("message".into(), text_field(&body, "message", true)?.into());
    for name in ["name", "agentId", "sessionKey", "channel", "to", "model", "thinking"] {
        if let Some(value) = text_field(&body, name, false)? {
            args.insert(name.into(), value.into());
        }
    }
    if let Some(mode) = mode_field(&body, "wakeMode")? {
        args.insert("wakeMode".into(), mode.into());
    }
    match body.get("deliver") {
        None | Some(Value::Null) => {}
        Some(Value::Bool(b)) => {
            args.insert("deliver".into(), (*b).into());
        }
        Some(_) => return Err(bad("invalid_body", "`deliver` is a boolean")),
    }
    match body.get("timeoutSeconds") {
        None | Some(Value::Null) => {}
        // A whole number, written `30` or `30.0` (JSON does not tell them apart).
        Some(Value::Number(n)) if whole_seconds(n).is_some_and(|s| (1..=86_400).contains(&s)) => {
            args.insert("timeoutSeconds".into(), whole_seconds(n).into());
        }
        Some(_) => return Err(bad("invalid_body", "`timeoutSeconds` is a whole number of seconds from 1 to 86400")),
    }
    let agent = match args.get("agentId").and_then(Value::as_str) {
        None => default_agent(state)?,
        Some(id) if state.config.hooks.agents.iter().any(|a| a == id) => id.to_owned(),
        Some(id) => return Err(bad("unknown_agent", format!("`agentId` `{id}` is not an agent this bridge may call"))),
    };
    let session = args.get("sessionKey").and_then(Value::as_str);
    if session.is_some_and(|k| k.len() > 250 || !k.chars().all(|c| c.is_ascii_graphic())) {
        return Err(bad("invalid_body", "`sessionKey` is 1 to 250 visible ASCII characters"));
    }
    let conversation = session.map_or_else(|| "hooks:agent".into(), |k| format!("hooks:{k}"));
    let call = HookCall { agent, intent: intent("agent", "run")?, args, conversation };
    admit(state, headers, call).await
}

/// `POST /hooks/{name}`: a mapped hook; its fields become the command's arguments.
pub async fn mapped(
    state: &Services,
    name: &str,
    query: Option<&str>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Uuid, ChannelError> {
    authenticate(state, headers, query)?;
    let Some(mapping) = state.config.hooks.mappings.get(name) else {
        return Err(Refusal::not_configured(format!("No hook `{name}`.")).into());
    };
    let body = Value::Object(body_object(body)?);
    let mut args = Map::new();
    for (arg, pointer) in &mapping.args {
        match body.pointer(pointer) {
            Some(value @ (Value::String(_) | Value::Number(_) | Value::Bool(_))) => {
                args.insert(arg.clone(), value.clone());
            }
            Some(_) => return Err(bad("invalid_body", format!("`{pointer}` is a string, a number or a boolean"))),
            None => return Err(bad("invalid_body", format!("`{pointer}` is required"))),
        }
    }
    let call = HookCall {
        agent: mapping.agent.clone(),
        intent: intent(&mapping.entity, &mapping.action)?,
        args,
        conversation: format!("hooks:{name}"),
    };
    admit(state, headers, call).await
}

/// Admits the call as a command of the bridge's principal — authorized (the token is the
/// authorization), started with its dispatch row — and answers 202 at once.
async fn admit(state: &Services, headers: &HeaderMap, call: HookCall) -> Result<Uuid, ChannelError> {
    let hooks = &state.config.hooks;
    let submission = Submission {
        tenant: hooks.tenant.clone(),
        actor: hooks.actor.clone(),
        channel: "hooks",
        conversation: call.conversation,
        agent: call.agent,
        intent: call.intent,
        args: call.args,
        dedupe_window: std::time::Duration::from_secs(hooks.dedupe_window_secs),
        authorized_by: "hook token",
        message: None,
    };
    let command_id = submit(state, headers, submission).await?;
    metrics::counter!("chatgate_webhooks_total", "channel" => "hooks", "outcome" => "accepted").increment(1);
    Ok(command_id)
}

/// A command a machine caller submits for an agent (the hook bridge, a Standard Webhooks source).
pub struct Submission {
    pub tenant: String,
    pub actor: String,
    pub channel: &'static str,
    pub conversation: String,
    pub agent: String,
    pub intent: Intent,
    pub args: Map<String, Value>,
    pub dedupe_window: std::time::Duration,
    /// What authorized it, for the evidence.
    pub authorized_by: &'static str,
    /// The carrying message, for transport dedupe (a sender's delivery id).
    pub message: Option<crate::store::NewInbound>,
}

/// An optional header read with `parse`: `Err` when it is there and does not parse.
fn header<T>(headers: &HeaderMap, name: &str, parse: impl Fn(&str) -> Option<T>) -> Result<Option<T>, ()> {
    headers.get(name).map(|v| v.to_str().ok().and_then(&parse).ok_or(())).transpose()
}

/// Admits a submission: the command, auto-confirmed and authorized by the caller's credential,
/// started with its dispatch row, in one transaction. `Idempotency-Key` and `X-Correlation-Id`
/// come from the headers. Returns the command's id — the existing one for a repeat.
pub async fn submit(state: &Services, headers: &HeaderMap, s: Submission) -> Result<Uuid, ChannelError> {
    let config = |what: &'static str| -> ChannelError {
        tracing::error!(what, "a submission source is misconfigured");
        ChannelError::Misconfigured(what)
    };
    let supplied_key = header(headers, "idempotency-key", |k| IdempotencyKey::parse(k).ok())
        .map_err(|()| bad("invalid_idempotency_key", "`Idempotency-Key` is 1 to 255 visible ASCII characters"))?;
    let correlation_id = header(headers, "x-correlation-id", |c| ExternalId::parse(c).ok())
        .map_err(|()| bad("invalid_correlation_id", "`X-Correlation-Id` is visible ASCII"))?;
    let request = CommandRequest {
        tenant_id: TenantId::parse(&s.tenant).map_err(|_| config("tenant"))?,
        actor_id: ActorId::parse(&s.actor).map_err(|_| config("actor"))?,
        channel: Channel::parse(s.channel).map_err(|_| config("channel"))?,
        conversation_id: ExternalId::parse(&s.conversation)
            .map_err(|_| bad("invalid_body", "the conversation (`sessionKey`) is visible ASCII"))?,
        message_ids: s.message.iter().map(|m| m.provider_message_id.clone()).collect(),
        correlation_id,
        causation_id: None,
        intent: s.intent,
        args: s.args,
        command_kind: CommandKind::Mutation,
        idempotency_class: IdempotencyClass::I1,
        risk: Risk::Low,
        supplied_key,
        ttl: Some(std::time::Duration::from_secs(900)),
        dedupe_window: s.dedupe_window,
        target_command_id: None,
    };
    let admission = Admission {
        then: dispatch::authorized_at_once(CommandKind::Mutation),
        decision: Some(json!({
            "issued_by": s.actor, "channel": s.channel, "target_agent": s.agent, "authorized_by": s.authorized_by,
        })),
        outbox: dispatch::dispatch_rows(std::slice::from_ref(&s.agent)),
        inbound: s.message,
        ..Admission::default()
    };
    let (_, admitted) = state.engine.accept_with(request, admission, OffsetDateTime::now_utc()).await?;
    match admitted {
        Admitted::New { command_id, .. } => Ok(command_id),
        // The same call again: the same command.
        Admitted::Replayed(d) | Admitted::InProgress(d) => Ok(d.command_id),
        Admitted::Redelivered { command_id: Some(command_id), .. } => Ok(command_id),
        Admitted::Redelivered { command_id: None, .. } => Err(config("a redelivered message without its command")),
        Admitted::Conflict { .. } => {
            Err(Refusal::new(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused", "Idempotency-Key reused")
                .detail("This Idempotency-Key was used for a different call.")
                .into())
        }
    }
}
