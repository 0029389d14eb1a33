//! The hookd compatibility bridge (Bloodbank MIG-1): systems that call an agent's hook endpoint
//! point at chatgate without changing what they send or what they check in the answer. Two
//! families call it: OpenClaw's (`/hooks/wake`, `/hooks/agent` with `message`, mapped
//! `/hooks/{name}`) and Bloodbank's hookd bridge callers (`/hooks/agent` with `text`, a
//! `[Command]` line and `sessionKey: "agent:<name>:main"`). Each call becomes a command for the
//! target agent, stored with its evidence and dispatch row in one transaction; the caller never
//! waits for the executor unless it asks to (`waitForCompletion`). Every call is a command of its
//! own unless it carries a replay key (`Idempotency-Key`, `X-OpenClaw-Idempotency-Key`, the body's
//! `idempotencyKey`, or hookd's `[Command] id=`), as OpenClaw runs every hook it is sent. The
//! contract followed is OpenClaw's `docs/gateway/config-hooks.md` at 256572f (`openclaw`).

mod auth;
mod body;
mod completion;
pub mod hookd;
mod openclaw;
mod submit;

use axum::http::HeaderMap;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::channels::{ChannelError, Refusal};
use crate::config::Config;
use crate::domain::agent::command_routing_key;
use crate::domain::command::IdempotencyKey;
use crate::domain::command::Intent;
use crate::service::dispatch::DISPATCH_KIND;
use crate::service::intake::Ingress;

use auth::authenticate;
use body::{body_object, mode_field, text_field};
pub use body::{body_schemas, header_schemas};
pub use completion::{Completion, CompletionStatus};
pub use submit::{Submission, Submitted, Unkeyed, submit};

/// The bridge's name where channels are named (commands, metrics).
pub const CHANNEL: &str = "hooks";

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
    /// `/hooks/wake`: done as far as the caller is concerned (OpenClaw answers 200 with the mode
    /// and whether the wake was queued or the same wake was already waiting).
    Woken { accepted: Accepted, mode: String, event: WakeOutcome },
    /// `/hooks/agent` and mapped hooks: admitted (OpenClaw answers 200 with the run id).
    Queued(Accepted),
    /// `/hooks/agent` with `waitForCompletion`: admitted and waited for.
    Completed { accepted: Accepted, completion: Completion },
    /// A hookd text with nothing in it: nothing stored (hookd answers 204).
    NothingToDo,
}

crate::domain::names::named_enum! {
    /// OpenClaw's `eventOutcome` of a wake: queued, or the same wake already waiting.
    WakeOutcome {
        Queued => "queued",
        Coalesced => "coalesced",
    }
}

/// A hook request as the edge read it: the query, the headers, the body and the caller's address
/// (failed authentications are counted by it).
pub struct HookRequest<'a> {
    pub query: Option<&'a str>,
    pub headers: &'a HeaderMap,
    pub body: &'a [u8],
    pub client: &'a str,
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

fn default_agent(config: &Config) -> Result<String, ChannelError> {
    config.hooks.agents.first().cloned().ok_or_else(|| bad("no_agent", "No agent is configured for hooks."))
}

/// The agent a call names: an `agentId` must be one this gateway knows (OpenClaw: 400); hookd's
/// `sessionKey: "agent:<name>:..."` names one when it is known, else the default agent runs it
/// (the name asked for goes into the decision); no name, the default agent.
fn choose_agent(
    config: &Config,
    args: &Map<String, Value>,
    session: Option<&str>,
    decision: &mut Map<String, Value>,
) -> Result<String, ChannelError> {
    let known = |name: &str| config.hooks.agents.iter().any(|a| a == name);
    if let Some(id) = args.get("agentId").and_then(Value::as_str) {
        return known_agent(config, id);
    }
    match session.and_then(hookd::agent_of_session) {
        Some(name) if known(name) => Ok(name.to_owned()),
        Some(name) => {
            decision.insert("requested_agent".into(), name.into());
            default_agent(config)
        }
        None => default_agent(config),
    }
}

/// `id`, when it names an agent configured for hooks; else 400 (OpenClaw: a direct agent id must
/// exist).
fn known_agent(config: &Config, id: &str) -> Result<String, ChannelError> {
    match config.hooks.agents.iter().any(|a| a == id) {
        true => Ok(id.to_owned()),
        false => Err(bad("unknown_agent", format!("No agent `{id}` is configured for hooks."))),
    }
}

fn intent(entity: &str, action: &str) -> Result<Intent, ChannelError> {
    Intent::parse(entity, action, None).map_err(|e| bad("invalid_hook", e.to_string()))
}

/// `POST /hooks/wake`: `{"text": "...", "mode": "now" | "next-heartbeat"}`. The same wake while
/// an earlier one still waits is coalesced into it (`eventOutcome: "coalesced"`), as OpenClaw's
/// queue does; otherwise it is queued.
pub async fn wake(ingress: &Ingress, config: &Config, request: &HookRequest<'_>) -> Result<HookOutcome, ChannelError> {
    authenticate(ingress, config, request.headers, request.query, request.client)?;
    let body = body_object(request.body)?;
    let text = text_field(&body, "text", true)?.unwrap_or_default();
    let mode = mode_field(&body, "mode")?.unwrap_or_else(|| "now".into());
    let mut args = Map::new();
    args.insert("text".into(), text.clone().into());
    args.insert("mode".into(), mode.clone().into());
    // A wake may name its agent (`agentId`, OpenClaw's newest contract): one this gateway knows,
    // else 400 as OpenClaw answers; without one, the default agent wakes.
    let agent = match text_field(&body, "agentId", false)? {
        Some(id) => known_agent(config, &id)?,
        None => default_agent(config)?,
    };
    let wake = intent("agent", "wake")?;
    let call = |key| HookCall {
        agent: agent.clone(),
        intent: wake.clone(),
        args: args.clone(),
        conversation: "hooks:wake".into(),
        key,
        decision: Map::new(),
    };
    // A caller's key makes a retry the same wake; without one, the same wake while the earlier
    // one still waits is coalesced into it.
    let keyed = openclaw::replay_key(request.headers, &body);
    let waiting = keyed.clone().or_else(|| openclaw::digest_key("wake", &[&agent, &text, &mode]));
    let (accepted, event) = match admit(ingress, config, request.headers, call(waiting)).await? {
        (accepted, Submitted::New(_)) => (accepted, WakeOutcome::Queued),
        (accepted, Submitted::InProgress(_)) => (accepted, WakeOutcome::Coalesced),
        (accepted, Submitted::Done(_)) if keyed.is_some() => (accepted, WakeOutcome::Coalesced),
        // The same wake, already done: this one is a wake of its own.
        (_, Submitted::Done(_)) => (admit(ingress, config, request.headers, call(None)).await?.0, WakeOutcome::Queued),
    };
    Ok(HookOutcome::Woken { accepted, mode, event })
}

/// `POST /hooks/agent`: OpenClaw's `{"message": "..."}` or hookd's `{"text": "..."}`, with the
/// optional OpenClaw fields, each checked.
pub async fn agent(ingress: &Ingress, config: &Config, request: &HookRequest<'_>) -> Result<HookOutcome, ChannelError> {
    authenticate(ingress, config, request.headers, request.query, request.client)?;
    let body = body_object(request.body)?;
    // Every field and header is checked before anything is decided, an empty call's too.
    submit::caller_headers(request.headers, false)?;
    let mut nothing_to_do = false;
    if body.get("text").is_some_and(|text| !text.is_string()) {
        return Err(bad("invalid_body", "`text` is a string"));
    }
    let (mut args, action, key, mut decision) = match (body.get("message"), body.get("text")) {
        (None, Some(Value::String(text))) => {
            let read = hookd::parse(text);
            nothing_to_do = read.is_empty();
            hookd_call(text, read)?
        }
        _ => {
            let mut args = Map::new();
            args.insert("message".into(), text_field(&body, "message", true)?.into());
            (args, "run".to_owned(), None, Map::new())
        }
    };
    openclaw::fields(&body, &mut args)?;
    let session = args.get("sessionKey").and_then(Value::as_str);
    if session.is_some_and(|k| k.len() > 250 || !k.chars().all(|c| c.is_ascii_graphic())) {
        return Err(bad("invalid_body", "`sessionKey` is 1 to 250 visible ASCII characters"));
    }
    if nothing_to_do {
        return Ok(HookOutcome::NothingToDo);
    }
    let agent = choose_agent(config, &args, session, &mut decision)?;
    let conversation = session.map_or_else(|| "hooks:agent".into(), |k| format!("hooks:{k}"));
    let key = openclaw::replay_key(request.headers, &body).or(key);
    let wait = body.get("waitForCompletion") == Some(&Value::Bool(true));
    let timeout = args.get("timeoutSeconds").and_then(Value::as_u64);
    let call = HookCall { agent, intent: intent("agent", &action)?, args, conversation, key, decision };
    let (accepted, _) = admit(ingress, config, request.headers, call).await?;
    if wait {
        let completion = completion::wait_for(ingress, config, accepted.command_id, &accepted.agent, timeout).await?;
        return Ok(HookOutcome::Completed { accepted, completion });
    }
    Ok(HookOutcome::Queued(accepted))
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

/// `POST /hooks/{name}`: a mapped hook; its fields become the command's arguments.
pub async fn mapped(
    ingress: &Ingress,
    config: &Config,
    name: &str,
    request: &HookRequest<'_>,
) -> Result<HookOutcome, ChannelError> {
    authenticate(ingress, config, request.headers, request.query, request.client)?;
    let Some(mapping) = config.hooks.mappings.get(name) else {
        return Err(Refusal::not_configured(format!("No hook `{name}`.")).into());
    };
    let object = body_object(request.body)?;
    let key = openclaw::replay_key(request.headers, &object);
    let body = Value::Object(object);
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
        key,
        decision: Map::new(),
    };
    Ok(HookOutcome::Queued(admit(ingress, config, request.headers, call).await?.0))
}

/// Admits the call as a command of the bridge's principal — authorized (the token is the
/// authorization), started with its dispatch row — and says where it went.
async fn admit(
    ingress: &Ingress,
    config: &Config,
    headers: &HeaderMap,
    call: HookCall,
) -> Result<(Accepted, Submitted), ChannelError> {
    let hooks = &config.hooks;
    let routing_key = command_routing_key(&call.agent, &call.intent.action);
    let submission = Submission {
        tenant: hooks.tenant.clone(),
        actor: hooks.actor.clone(),
        channel: CHANNEL,
        conversation: call.conversation,
        agent: call.agent.clone(),
        intent: call.intent,
        args: call.args,
        dedupe_window: std::time::Duration::from_secs(hooks.dedupe_window_secs),
        authorized_by: "hook token",
        message: None,
        key: call.key,
        header_key: false,
        unkeyed: Unkeyed::Unique,
        decision: call.decision,
    };
    let submitted = submit(ingress, headers, submission).await?;
    let command_id = submitted.command_id();
    metrics::counter!("chatgate_webhooks_total", "channel" => CHANNEL, "outcome" => "accepted").increment(1);
    // Written with the command; a failure to read it back must not turn an accepted call into an
    // error the caller would retry.
    let outbox_id =
        ingress.engine().database().handover().first_row(command_id, DISPATCH_KIND, &call.agent).await.unwrap_or_else(
            |e| {
                tracing::warn!(error = %e, %command_id, "cannot read back a hook call's dispatch row");
                None
            },
        );
    Ok((Accepted { command_id, agent: call.agent, routing_key, outbox_id }, submitted))
}
