//! Submitting a machine caller's command (the hook bridge, a Standard Webhooks source): admitted,
//! auto-confirmed and authorized by the caller's credential, and started with its dispatch row, in
//! one transaction.

use axum::http::{HeaderMap, StatusCode};
use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::channels::hooks::bad;
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
use crate::service::dispatch;
use crate::service::engine::Admission;
use crate::service::intake::Admitted;
use crate::service::intake::Ingress;

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
    pub message: Option<crate::service::intake::NewInbound>,
    /// The call's own key (hookd's `[Command] id=`, a hook's resolved replay key); an
    /// `Idempotency-Key` header wins over it when `header_key`.
    pub key: Option<IdempotencyKey>,
    /// Whether the `Idempotency-Key` header is read here (a Standard Webhooks sender's); the hook
    /// bridge resolves its replay key itself, as OpenClaw does.
    pub header_key: bool,
    /// What a call with no key at all is: the same content within the window is the same command
    /// (`Derived`), or every call is a command of its own (`Unique`, as OpenClaw runs every hook).
    pub unkeyed: Unkeyed,
    /// The decision's own fields, beside who issued it and what authorized it.
    pub decision: Map<String, Value>,
}

/// How a submission without any idempotency key is deduplicated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unkeyed {
    Derived,
    Unique,
}

/// An optional header read with `parse`: `Err` when it is there and does not parse.
fn header<T>(headers: &HeaderMap, name: &str, parse: impl Fn(&str) -> Option<T>) -> Result<Option<T>, ()> {
    headers.get(name).map(|v| v.to_str().ok().and_then(&parse).ok_or(())).transpose()
}

/// The caller's `Idempotency-Key` and `X-Correlation-Id`, each checked when it is there: a call
/// with a bad one is refused whatever else it says.
pub(crate) fn caller_headers(
    headers: &HeaderMap,
    with_key: bool,
) -> Result<(Option<IdempotencyKey>, Option<ExternalId>), ChannelError> {
    let key = match with_key {
        true => header(headers, "idempotency-key", |k| IdempotencyKey::parse(k).ok())
            .map_err(|()| bad("invalid_idempotency_key", "`Idempotency-Key` is 1 to 255 visible ASCII characters"))?,
        false => None,
    };
    let correlation_id = header(headers, "x-correlation-id", |c| ExternalId::parse(c).ok())
        .map_err(|()| bad("invalid_correlation_id", "`X-Correlation-Id` is visible ASCII"))?;
    Ok((key, correlation_id))
}

/// A caller's command that the registry describes keeps the registry's value rules, as a
/// person's does: no machine refunds −25 either.
fn keeps_value_rules(ingress: &Ingress, intent: &Intent, args: &Map<String, Value>) -> Result<(), ChannelError> {
    let registry = ingress.policy().registry.current();
    match registry.by_intent(&intent.entity, &intent.action).and_then(|spec| spec.broken_rule(args)) {
        Some(broken) => {
            Err(bad("invalid_value", format!("`{}` breaks its rule: {} {}", broken.value, broken.rule, broken.limit)))
        }
        None => Ok(()),
    }
}

/// What became of a submission: a new command, or the same one again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submitted {
    New(Uuid),
    /// The same call again while its command is under way.
    InProgress(Uuid),
    /// The same call again after its command ended.
    Done(Uuid),
}

impl Submitted {
    pub fn command_id(self) -> Uuid {
        match self {
            Self::New(id) | Self::InProgress(id) | Self::Done(id) => id,
        }
    }
}

/// Admits a submission: the command, auto-confirmed and authorized by the caller's credential,
/// started with its dispatch row, in one transaction. `Idempotency-Key` and `X-Correlation-Id`
/// come from the headers. Returns the command's id — the existing one for a repeat.
pub async fn submit(ingress: &Ingress, headers: &HeaderMap, s: Submission) -> Result<Submitted, ChannelError> {
    let config = misconfigured;
    let (supplied_key, correlation_id) = caller_headers(headers, s.header_key)?;
    keeps_value_rules(ingress, &s.intent, &s.args)?;
    let supplied_key = supplied_key.or(s.key);
    let supplied_key = match (supplied_key, s.unkeyed) {
        (None, Unkeyed::Unique) => IdempotencyKey::parse(&format!("call:{}", Uuid::now_v7())).ok(),
        (key, _) => key,
    };
    let request = CommandRequest {
        // A submission names its intent itself: no registry entry describes it.
        registry_version: None,
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
    let mut decision = s.decision;
    decision.insert("issued_by".into(), json!(s.actor));
    decision.insert("channel".into(), json!(s.channel));
    decision.insert("target_agent".into(), json!(s.agent));
    decision.insert("authorized_by".into(), json!(s.authorized_by));
    let admission = Admission {
        then: dispatch::authorized_at_once(CommandKind::Mutation),
        decision: Some(Value::Object(decision)),
        outbox: dispatch::dispatch_rows(std::slice::from_ref(&s.agent)),
        inbound: s.message,
        ..Admission::default()
    };
    let (_, admitted) = ingress.engine().accept_with(request, admission, OffsetDateTime::now_utc()).await?;
    submitted(admitted)
}

fn misconfigured(what: &'static str) -> ChannelError {
    tracing::error!(what, "a submission source is misconfigured");
    ChannelError::Misconfigured(what)
}

/// What admitting a submission came to, for its caller.
fn submitted(admitted: Admitted) -> Result<Submitted, ChannelError> {
    match admitted {
        Admitted::New { command_id, .. } => Ok(Submitted::New(command_id)),
        // The same call again: the same command.
        Admitted::Replayed(d) => Ok(Submitted::Done(d.command_id)),
        Admitted::InProgress(d) => Ok(Submitted::InProgress(d.command_id)),
        Admitted::Redelivered { command_id: Some(command_id), .. } => Ok(Submitted::InProgress(command_id)),
        Admitted::Redelivered { command_id: None, .. } => {
            Err(misconfigured("a redelivered message without its command"))
        }
        // The engine decides a locked admission again; a hook's agent commands name no resource.
        Admitted::Locked { .. } => Err(misconfigured("a submission locked what it changes")),
        Admitted::Conflict { .. } => {
            Err(Refusal::new(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused", "Idempotency-Key reused")
                .detail("This Idempotency-Key was used for a different call.")
                .into())
        }
    }
}
