//! Bloodbank's wire format on NATS: CloudEvents 1.0 in structured JSON with Bloodbank's extension
//! attributes (delorenj/bloodbank at 59bee5d: `schemas/_common/cloudevent_base.v1.json` and
//! `schemas/bloodbank/v1/agent/invocation.{start,started,completed,failed}.v1.json`). A command goes
//! out as `bloodbank.v1.agent.invocation.start` (kind `command`, `single_consumer`, its
//! `command_id` and `idempotency_key` the same on every attempt); the agents' `invocation.started`,
//! `.completed` and `.failed` events come back and are read leniently: whatever else they carry is
//! kept, and the command they answer is found through any of the ids Bloodbank's contract puts on
//! them. The trace context rides in the CloudEvents distributed-tracing extension (`traceparent`,
//! `tracestate`).

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::CommandEnvelope;
use crate::domain::delivery::{ApprovalGrant, ApprovalWait};
use crate::domain::preview::{BoundPreview, read_answer};
use crate::executors::responses::{Report, ResultOutcome};
use crate::service::ooc::view::rfc3339;

/// The CloudEvents `type` of the command, and its Bloodbank schema reference.
pub const START_TYPE: &str = "bloodbank.v1.agent.invocation.start";
const START_SCHEMA: &str = "bloodbank.v1.agent.invocation.start.v1";
const START_DATASCHEMA: &str = "apicurio://holyfields/bloodbank.v1.agent.invocation.start/versions/1";
/// The CloudEvents `type` of a preview request (chatgate's own phase beside Bloodbank's, issue
/// #47); the agent answers `bloodbank.v1.agent.invocation.previewed`.
pub const PREVIEW_TYPE: &str = "bloodbank.v1.agent.invocation.preview";
const PREVIEW_SCHEMA: &str = "chatgate.v1.agent.invocation.preview.v1";
/// The `source` of everything this gateway publishes (Bloodbank's `urn:33god:service:<name>`).
const SOURCE: &str = "urn:33god:service:chatgate";
const PRODUCER: &str = "chatgate";

/// `bloodbank.v1.agent.invocation.start`, as Bloodbank's schema has it.
#[derive(Debug, Clone, Serialize)]
pub struct InvocationStart {
    pub specversion: &'static str,
    /// The same for every attempt of one hand-over (JetStream's `Nats-Msg-Id` too), so a publish
    /// sent again after a lost acknowledgement is recognized as the same event.
    pub id: Uuid,
    pub source: &'static str,
    #[serde(rename = "type")]
    pub event_type: &'static str,
    /// The NATS subject it is published on (Bloodbank: the canonical subject bound to its type).
    pub subject: String,
    pub time: String,
    pub datacontenttype: &'static str,
    pub dataschema: &'static str,
    pub correlationid: Uuid,
    pub causationid: Option<Uuid>,
    pub producer: &'static str,
    pub service: &'static str,
    pub domain: &'static str,
    pub schemaref: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
    pub kind: &'static str,
    pub actor: Actor,
    pub command_id: Uuid,
    pub idempotency_key: String,
    pub delivery: &'static str,
    pub data: InvocationData,
}

/// Who asked: the person in the chat, as the gateway knows them.
#[derive(Debug, Clone, Serialize)]
pub struct Actor {
    #[serde(rename = "type")]
    pub actor_type: &'static str,
    pub agent_id: String,
    pub channel: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct InvocationData {
    pub target_agent_id: String,
    pub thread_id: Option<String>,
    pub turn_id: Option<String>,
    pub prompt: Option<String>,
    pub context: InvocationContext,
}

/// The command itself, for an agent that acts on structured values rather than the prompt.
#[derive(Debug, Clone, Serialize)]
pub struct InvocationContext {
    pub command_id: Uuid,
    pub tenant_id: String,
    pub entity: String,
    pub action: String,
    pub args: Map<String, Value>,
    pub command_kind: Value,
    pub risk: Value,
    /// chatgate's own idempotency key, the one its HTTP executors get.
    pub idempotency_key: String,
    /// Milliseconds left before the command expires (0: it does not).
    pub ttl_ms: i128,
    /// A waiting execution's grant: it was approved, and goes on (chatgate's own field).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalGrant>,
    /// The preview its person confirmed, with its digest (chatgate's own field).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview: Option<BoundPreview>,
}

/// The request for the command's preview, as event `id` on `subject`: the invocation it would be,
/// under the preview's type.
pub fn invocation_preview(
    agent: &str,
    envelope: &CommandEnvelope,
    (id, subject): (Uuid, String),
    now: OffsetDateTime,
) -> InvocationStart {
    let mut event = invocation_start(agent, envelope, (id, subject), now);
    event.event_type = PREVIEW_TYPE;
    event.schemaref = PREVIEW_SCHEMA;
    event.dataschema = PREVIEW_SCHEMA;
    event.idempotency_key = format!("agent.invocation.preview:target:{agent}:command:{}", envelope.command_id);
    event
}

/// The command's invocation for `agent`, handed over as event `id` on `subject`.
pub fn invocation_start(
    agent: &str,
    envelope: &CommandEnvelope,
    (id, subject): (Uuid, String),
    now: OffsetDateTime,
) -> InvocationStart {
    let as_uuid = |text: &str| text.parse::<Uuid>().ok();
    let ttl_ms = envelope.expires_at.map_or(0, |at| (at - now).whole_milliseconds().max(1));
    let trace: HashMap<String, String> = crate::service::telemetry::current_headers();
    InvocationStart {
        specversion: "1.0",
        id,
        source: SOURCE,
        event_type: START_TYPE,
        subject,
        time: rfc3339(now),
        datacontenttype: "application/json",
        dataschema: START_DATASCHEMA,
        // A root command's correlation is its own id (Bloodbank's rule), unless the gateway's
        // correlation id is itself a UUID.
        correlationid: as_uuid(envelope.correlation_id.as_str()).unwrap_or(envelope.command_id),
        causationid: envelope.causation_id.as_ref().and_then(|id| as_uuid(id.as_str())),
        producer: PRODUCER,
        service: PRODUCER,
        domain: "agent",
        schemaref: START_SCHEMA,
        traceparent: trace.get("traceparent").cloned(),
        tracestate: trace.get("tracestate").cloned(),
        kind: "command",
        actor: Actor {
            actor_type: "chat_user",
            agent_id: envelope.actor_id.to_string(),
            channel: envelope.channel.to_string(),
        },
        command_id: envelope.command_id,
        // Bloodbank's form for this command: `<action>:<scope>`, the same on every attempt.
        idempotency_key: format!("agent.invocation.start:target:{agent}:command:{}", envelope.command_id),
        delivery: "single_consumer",
        data: InvocationData {
            target_agent_id: agent.to_owned(),
            thread_id: Some(envelope.conversation_id.to_string()),
            turn_id: envelope.message_ids.first().map(ToString::to_string),
            prompt: Some(prompt(envelope)),
            context: InvocationContext {
                command_id: envelope.command_id,
                tenant_id: envelope.tenant_id.to_string(),
                entity: envelope.intent.entity.clone(),
                action: envelope.intent.action.clone(),
                args: envelope.args.clone(),
                command_kind: json!(envelope.command_kind),
                risk: json!(envelope.risk),
                idempotency_key: envelope.idempotency_key.to_string(),
                ttl_ms,
                approval: None,
                preview: None,
            },
        },
    }
}

/// The command in one line: `order.refund amount=25.00 order_id=1234`.
fn prompt(envelope: &CommandEnvelope) -> String {
    let args = envelope.args.iter().map(|(name, value)| match value {
        Value::String(text) => format!("{name}={text}"),
        other => format!("{name}={other}"),
    });
    let head = format!("{}.{}", envelope.intent.entity, envelope.intent.action);
    std::iter::once(head).chain(args).collect::<Vec<_>>().join(" ")
}

/// An agent's event, as far as it has to read: everything else it carries is kept in `data`.
#[derive(Debug, Deserialize)]
struct AgentEvent {
    #[serde(rename = "type", default)]
    event_type: Option<String>,
    #[serde(default)]
    causationid: Option<Value>,
    #[serde(default)]
    correlationid: Option<Value>,
    #[serde(default)]
    command_id: Option<Value>,
    #[serde(default)]
    data: Value,
}

/// What an agent's event says, and the ids that may name the command it is about, most specific
/// first: `causationid` (the command that caused it), `data.command_id`, a `command_id` attribute,
/// `data.invocation_id` (an agent that reuses the command's id), `correlationid`.
#[derive(Debug, Clone, PartialEq)]
pub struct Said {
    pub about: Vec<Uuid>,
    pub what: Saying,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Saying {
    Started,
    Completed {
        outcome: ResultOutcome,
        detail: Value,
    },
    Failed {
        retryable: bool,
        retry_after: Option<Duration>,
        detail: Value,
    },
    /// `invocation.waiting` (chatgate's own event beside Bloodbank's): the execution waits for
    /// people's approval, as `data` says (`reason`, `message`, `roles`, `quorum`, `within_secs`).
    Waiting(ApprovalWait),
    /// `invocation.previewed` (chatgate's own): the agent's answer to a preview request, its
    /// `data` the answer as every transport carries it (`status`, `preview` or `error`).
    Previewed(Value),
}

impl Said {
    /// What it says about `command_id`, as the responses of every bus are read.
    pub fn report(&self, command_id: Uuid) -> Report {
        match &self.what {
            Saying::Started => Report::Ack { command_id },
            Saying::Completed { outcome, detail } => {
                Report::Result { command_id, outcome: *outcome, detail: detail.clone() }
            }
            Saying::Failed { retryable, retry_after, detail } => {
                Report::Error { command_id, retryable: *retryable, retry_after: *retry_after, detail: detail.clone() }
            }
            Saying::Waiting(wait) => Report::Waiting { command_id, wait: wait.clone() },
            Saying::Previewed(data) => {
                // The command is named by the event's ids; the answer need not repeat it.
                let mut answer = data.clone();
                if let Some(fields) = answer.as_object_mut() {
                    fields.entry("command_id").or_insert_with(|| json!(command_id));
                }
                Report::Previewed { command_id, answer: read_answer(answer.to_string().as_bytes(), command_id) }
            }
        }
    }
}

/// Why an agent's event could not be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Unreadable {
    #[error("not a JSON CloudEvent: {0}")]
    NotJson(String),
    #[error("`{0}` is not an invocation's started, completed, skipped, failed or waiting")]
    Type(String),
    #[error("a waiting invocation's data does not read: {0}")]
    Waiting(String),
    #[error("no id in it names a command")]
    NoCommand,
}

/// Reads one event from the agents' subjects; the action is the event's `type` (its subject's when
/// it has none).
pub fn read(subject: &str, body: &[u8]) -> Result<Said, Unreadable> {
    let event: AgentEvent = serde_json::from_slice(body).map_err(|e| Unreadable::NotJson(e.to_string()))?;
    let named = event.event_type.clone().unwrap_or_else(|| subject.to_owned());
    let action = named.rsplit('.').next().unwrap_or_default();
    let data = &event.data;
    let what = match action {
        "started" => Saying::Started,
        "completed" | "skipped" => {
            let outcome = if action == "skipped" { ResultOutcome::Skipped } else { ResultOutcome::Success };
            let result = data.get("result").or_else(|| data.get("output")).cloned().unwrap_or(Value::Null);
            let detail = json!({"outcome": outcome, "result_payload": result, "invocation": data});
            Saying::Completed { outcome, detail }
        }
        "failed" => failed(data),
        "waiting" => Saying::Waiting(ApprovalWait::picked_from(data).map_err(|e| Unreadable::Waiting(e.to_string()))?),
        "previewed" => Saying::Previewed(data.clone()),
        _ => return Err(Unreadable::Type(named)),
    };
    let about: Vec<Uuid> = [
        event.causationid.as_ref(),
        data.get("command_id"),
        event.command_id.as_ref(),
        data.get("invocation_id"),
        event.correlationid.as_ref(),
    ]
    .into_iter()
    .flatten()
    .filter_map(|id| id.as_str().and_then(|id| id.parse().ok()))
    .fold(Vec::new(), |mut ids, id| {
        if !ids.contains(&id) {
            ids.push(id);
        }
        ids
    });
    if about.is_empty() {
        return Err(Unreadable::NoCommand);
    }
    Ok(Said { about, what })
}

/// `invocation.failed`: its `error_code` is kept as the failure's code (`ROUTE_DENIED` stays
/// `ROUTE_DENIED`); `retryable` and `retry_after_ms`, beside Bloodbank's fields, say the agent
/// declined for now.
fn failed(data: &Value) -> Saying {
    let retryable = data.get("retryable").and_then(Value::as_bool).unwrap_or(false);
    let retry_after_ms = data.get("retry_after_ms").and_then(Value::as_u64);
    let detail = json!({
        "code": data.get("error_code").and_then(Value::as_str).unwrap_or("execution_failed"),
        "message": data.get("error_message").and_then(Value::as_str).unwrap_or_default(),
        "retryable": retryable,
        "retry_after_ms": retry_after_ms,
        "invocation": data,
    });
    Saying::Failed { retryable, retry_after: retry_after_ms.map(Duration::from_millis), detail }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(event_type: &str, causation: Option<Uuid>, data: Value) -> Vec<u8> {
        json!({"specversion": "1.0", "id": Uuid::new_v4(), "source": "urn:33god:agent:orders", "type": event_type,
            "time": "2026-11-25T10:00:00Z", "correlationid": Uuid::new_v4(), "causationid": causation,
            "producer": "orders", "service": "orders", "domain": "agent", "kind": "event",
            "ordering_key": "invocation:i-1", "actor": {"type": "agent_api", "agent_id": "orders"}, "data": data})
        .to_string()
        .into_bytes()
    }

    #[test]
    fn an_agents_events_read_with_their_codes_and_the_command_they_answer() {
        let command = Uuid::now_v7();
        let started =
            read("x", &event("bloodbank.v1.agent.invocation.started", Some(command), json!({"invocation_id": "i-1"})));
        assert_eq!(started.as_ref().map(|s| (s.about[0], &s.what)), Ok((command, &Saying::Started)));
        let failed = json!({"invocation_id": "i-1", "error_code": "ROUTE_DENIED", "error_message": "no route"});
        let Ok(Said { what: Saying::Failed { retryable, detail, .. }, .. }) =
            read("x", &event("bloodbank.v1.agent.invocation.failed", Some(command), failed))
        else {
            panic!("a failure");
        };
        assert!(!retryable);
        assert_eq!(detail["code"], "ROUTE_DENIED");
        let done = json!({"invocation_id": "i-1", "result": {"shipped": true}, "tokens": 12});
        let Ok(Said { what: Saying::Completed { detail, .. }, .. }) =
            read("x", &event("bloodbank.v1.agent.invocation.completed", Some(command), done))
        else {
            panic!("a completion");
        };
        assert_eq!(
            (detail["result_payload"]["shipped"].clone(), detail["invocation"]["tokens"].clone()),
            (json!(true), json!(12))
        );
    }

    #[test]
    fn the_command_is_found_through_any_id_and_nonsense_is_named() {
        let command = Uuid::now_v7();
        let by_data =
            event("bloodbank.v1.agent.invocation.started", None, json!({"invocation_id": "i", "command_id": command}));
        assert!(read("x", &by_data).is_ok_and(|s| s.about.first() == Some(&command)));
        assert!(matches!(read("x", b"{"), Err(Unreadable::NotJson(_))));
        let odd = event("bloodbank.v1.agent.invocation.paused", Some(command), json!({}));
        assert!(matches!(read("x", &odd), Err(Unreadable::Type(_))));
        let nameless = json!({"type": "bloodbank.v1.agent.invocation.started", "data": {"invocation_id": "i"}});
        assert_eq!(read("x", nameless.to_string().as_bytes()), Err(Unreadable::NoCommand));
    }
}
