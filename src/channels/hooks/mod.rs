//! The hookd compatibility bridge (Bloodbank MIG-1): systems that call an agent's hook endpoint
//! point at chatgate without changing what they send or what they check in the answer. Two
//! families call it: OpenClaw's (`/hooks/wake`, `/hooks/agent` with `message`, mapped
//! `/hooks/{name}`) and Bloodbank's hookd bridge callers (`/hooks/agent` with `text`, a
//! `[Command]` line and `sessionKey: "agent:<name>:main"`). Each call becomes a command for the
//! target agent, stored with its evidence and dispatch row in one transaction; the caller never
//! waits for the executor. Every call is a command of its own unless it carries a key (an
//! `Idempotency-Key`, or hookd's `[Command] id=`), as OpenClaw runs every hook it is sent.

mod body;
pub mod hookd;
mod submit;

use axum::http::{HeaderMap, StatusCode, header};
use serde_json::{Map, Value};
use subtle::ConstantTimeEq;
use uuid::Uuid;

use crate::channels::{ChannelError, Refusal};
use crate::domain::agent::command_routing_key;
use crate::domain::command::IdempotencyKey;
use crate::domain::command::Intent;
use crate::service::Services;
use crate::service::dispatch::DISPATCH_KIND;

use body::{body_object, mode_field, text_field, whole_seconds};
pub use body::{body_schemas, header_schemas};
pub use submit::{Submission, Unkeyed, submit};

/// A hook call the bridge took: the command, the agent it goes to, and what the callers of
/// either family read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    pub command_id: Uuid,
    pub agent: String,
    /// `command.{agent}.{action}`, as hookd reports it.
    pub routing_key: String,
    /// The command's dispatch row (hookd's `outbox_id`); `None` if it could not be read back.
    pub outbox_id: Option<Uuid>,
}

/// How the bridge answers a call.
#[derive(Debug, Clone, PartialEq)]
pub enum HookOutcome {
    /// `/hooks/wake`: done as far as the caller is concerned (OpenClaw answers 200 with the mode).
    Woken { accepted: Accepted, mode: String },
    /// `/hooks/agent` and mapped hooks: queued (202).
    Queued(Accepted),
    /// A hookd text with nothing in it: nothing stored (hookd answers 204).
    NothingToDo,
}

/// What a hook call asks for, once read and checked.
struct HookCall {
    agent: String,
    intent: Intent,
    args: Map<String, Value>,
    conversation: String,
    key: Option<IdempotencyKey>,
    decision: Map<String, Value>,
}

pub(crate) fn bad(code: &'static str, detail: impl Into<String>) -> ChannelError {
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

fn default_agent(state: &Services) -> Result<String, ChannelError> {
    state.config.hooks.agents.first().cloned().ok_or_else(|| bad("no_agent", "No agent is configured for hooks."))
}

/// The agent a call names (`agentId`, or hookd's `sessionKey: "agent:<name>:..."`) when this
/// gateway knows it, else the default agent, as OpenClaw runs an unknown `agentId`; the name asked
/// for goes into the decision.
fn choose_agent(
    state: &Services,
    named: Option<&str>,
    decision: &mut Map<String, Value>,
) -> Result<String, ChannelError> {
    match named {
        Some(name) if state.config.hooks.agents.iter().any(|a| a == name) => Ok(name.to_owned()),
        Some(name) => {
            decision.insert("requested_agent".into(), name.into());
            default_agent(state)
        }
        None => default_agent(state),
    }
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
) -> Result<HookOutcome, ChannelError> {
    authenticate(state, headers, query)?;
    let body = body_object(body)?;
    let text = text_field(&body, "text", true)?.unwrap_or_default();
    let mode = mode_field(&body, "mode")?.unwrap_or_else(|| "now".into());
    let mut args = Map::new();
    args.insert("text".into(), text.into());
    args.insert("mode".into(), mode.clone().into());
    let call = HookCall {
        agent: default_agent(state)?,
        intent: intent("agent", "wake")?,
        args,
        conversation: "hooks:wake".into(),
        key: None,
        decision: Map::new(),
    };
    Ok(HookOutcome::Woken { accepted: admit(state, headers, call).await?, mode })
}

/// `POST /hooks/agent`: OpenClaw's `{"message": "..."}` or hookd's `{"text": "..."}`, with the
/// optional OpenClaw fields, each checked.
pub async fn agent(
    state: &Services,
    query: Option<&str>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<HookOutcome, ChannelError> {
    authenticate(state, headers, query)?;
    let body = body_object(body)?;
    // Every field and header is checked before anything is decided, an empty call's too.
    submit::caller_headers(headers)?;
    let mut nothing_to_do = false;
    let (mut args, action, key, mut decision) = match (body.get("message"), body.get("text")) {
        (None, Some(Value::String(text))) => {
            let read = hookd::parse(text);
            nothing_to_do = read.is_empty();
            hookd_call(text, read)?
        }
        (None, Some(_)) => return Err(bad("invalid_body", "`text` is a string")),
        _ => {
            let mut args = Map::new();
            args.insert("message".into(), text_field(&body, "message", true)?.into());
            (args, "run".to_owned(), None, Map::new())
        }
    };
    openclaw_fields(&body, &mut args)?;
    let session = args.get("sessionKey").and_then(Value::as_str);
    if session.is_some_and(|k| k.len() > 250 || !k.chars().all(|c| c.is_ascii_graphic())) {
        return Err(bad("invalid_body", "`sessionKey` is 1 to 250 visible ASCII characters"));
    }
    if nothing_to_do {
        return Ok(HookOutcome::NothingToDo);
    }
    let named = args.get("agentId").and_then(Value::as_str).or_else(|| session.and_then(hookd::agent_of_session));
    let agent = choose_agent(state, named, &mut decision)?;
    let conversation = session.map_or_else(|| "hooks:agent".into(), |k| format!("hooks:{k}"));
    let call = HookCall { agent, intent: intent("agent", &action)?, args, conversation, key, decision };
    Ok(HookOutcome::Queued(admit(state, headers, call).await?))
}

type CallParts = (Map<String, Value>, String, Option<IdempotencyKey>, Map<String, Value>);

/// A hookd text: its payload is the command's arguments, its `id=` the key, `from=` and
/// `priority=` go into the decision.
fn hookd_call(text: &str, read: hookd::HookText) -> Result<CallParts, ChannelError> {
    let key = match &read.id {
        Some(id) => Some(IdempotencyKey::parse(id).map_err(|_| bad("invalid_body", "`id=` is visible ASCII"))?),
        None => None,
    };
    let mut args = read.payload;
    args.insert("text".into(), text.into());
    let mut decision = Map::new();
    decision.insert("hook_family".into(), "hookd".into());
    for (name, value) in [("requested_by", &read.from), ("priority", &read.priority)] {
        if let Some(value) = value {
            decision.insert(name.into(), value.as_str().into());
        }
    }
    Ok((args, read.action, key, decision))
}

/// OpenClaw's optional `/hooks/agent` fields, each checked, into the arguments.
fn openclaw_fields(body: &Map<String, Value>, args: &mut Map<String, Value>) -> Result<(), ChannelError> {
    for name in ["name", "agentId", "sessionKey", "channel", "to", "model", "thinking"] {
        if let Some(value) = text_field(body, name, false)? {
            args.insert(name.into(), value.into());
        }
    }
    if let Some(mode) = mode_field(body, "wakeMode")? {
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
    Ok(())
}

/// `POST /hooks/{name}`: a mapped hook; its fields become the command's arguments.
pub async fn mapped(
    state: &Services,
    name: &str,
    query: Option<&str>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<HookOutcome, ChannelError> {
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
        key: None,
        decision: Map::new(),
    };
    Ok(HookOutcome::Queued(admit(state, headers, call).await?))
}

/// Admits the call as a command of the bridge's principal — authorized (the token is the
/// authorization), started with its dispatch row — and says where it went.
async fn admit(state: &Services, headers: &HeaderMap, call: HookCall) -> Result<Accepted, ChannelError> {
    let hooks = &state.config.hooks;
    let routing_key = command_routing_key(&call.agent, &call.intent.action);
    let submission = Submission {
        tenant: hooks.tenant.clone(),
        actor: hooks.actor.clone(),
        channel: "hooks",
        conversation: call.conversation,
        agent: call.agent.clone(),
        intent: call.intent,
        args: call.args,
        dedupe_window: std::time::Duration::from_secs(hooks.dedupe_window_secs),
        authorized_by: "hook token",
        message: None,
        key: call.key,
        unkeyed: Unkeyed::Unique,
        decision: call.decision,
    };
    let command_id = submit(state, headers, submission).await?;
    metrics::counter!("chatgate_webhooks_total", "channel" => "hooks", "outcome" => "accepted").increment(1);
    // Written with the command; a failure to read it back must not turn an accepted call into an
    // error the caller would retry.
    let outbox_id = state.store.outbox().first_of(command_id, DISPATCH_KIND, &call.agent).await.unwrap_or_else(|e| {
        tracing::warn!(error = %e, %command_id, "cannot read back a hook call's dispatch row");
        None
    });
    Ok(Accepted { command_id, agent: call.agent, routing_key, outbox_id })
}
