//! Bloodbank's wire format (seed 002, and the `EventEnvelope` model and command adapter of
//! delorenj/bloodbank's RabbitMQ version). Every message on the bus is an event envelope:
//! `event_id`, `event_type` (its routing key), `timestamp`, `version`, `source` as an object
//! (`host`, `type`, `app`, `meta`), `correlation_ids` (the parent events' ids) beside the
//! `correlation_id` and `causation_id` Bloodbank's publishers add, and the message's own fields in
//! `payload`. Commands go out in it, with the command envelope's fields in `payload`; the agents'
//! `.ack`, `.result`, `.error` and `agent.{name}.state.changed` come back in it. The flat format of
//! chatgate's first bus (the same fields at the top level) is still read.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::agent::AgentState;
use crate::domain::agent::command_routing_key;
use crate::domain::command::CommandEnvelope;
use crate::domain::command::Risk;
use crate::domain::delivery::{ApprovalGrant, ApprovalWait};
use crate::domain::preview::{BoundPreview, read_answer};
use crate::executors::responses::{Report, ResultOutcome};
use crate::service::ooc::view::rfc3339;

/// The envelope version Bloodbank's model defaults to.
pub const ENVELOPE_VERSION: &str = "1.0.0";
/// `source.type`: Bloodbank's trigger type for an external webhook, which is how every command
/// reaches chatgate (a provider's webhook, a hook call, an API request).
const TRIGGER_TYPE: &str = "hook";

/// One message ready for the exchange, with the AMQP properties Bloodbank's publisher sets:
/// `message_id` is the event id, `correlation_id` the envelope's.
#[derive(Debug, Clone)]
pub struct Publication {
    pub routing_key: String,
    pub body: Vec<u8>,
    pub event_id: Uuid,
    pub correlation_id: String,
}

/// The routing key of a command for `agent`: `command.{agent}.{action}`, the command's action.
pub fn routing_key(agent: &str, envelope: &CommandEnvelope) -> String {
    command_routing_key(agent, &envelope.intent.action)
}

/// A command as Bloodbank's command envelope, for `agent`; with `resume`, the grant that a
/// waiting execution of it was approved (in `payload.approval`, chatgate's own field), and the
/// preview its person confirmed (`payload.preview`, with its digest) when it had one.
pub fn command_event(
    agent: &str,
    envelope: &CommandEnvelope,
    (resume, preview): (Option<&ApprovalGrant>, Option<&BoundPreview>),
    host: &str,
    now: OffsetDateTime,
) -> Publication {
    let mut payload = command_payload(agent, envelope, now);
    if let Some(fields) = payload.as_object_mut() {
        if let Some(grant) = resume {
            fields.insert("approval".into(), json!(grant));
        }
        if let Some(preview) = preview {
            fields.insert("preview".into(), json!(preview));
        }
    }
    event(routing_key(agent, envelope), payload, envelope, host, now)
}

/// The request for a command's preview (`command.{agent}.{action}.preview`, chatgate's own phase
/// beside Bloodbank's): the command as it would be handed over, `request_id` its event id. The
/// agent answers `command.{agent}.{action}.previewed` (docs/BLOODBANK.md, "Previews").
pub fn preview_event(
    agent: &str,
    envelope: &CommandEnvelope,
    request_id: Uuid,
    host: &str,
    now: OffsetDateTime,
) -> Publication {
    let payload = command_payload(agent, envelope, now);
    let mut publication = event(format!("{}.preview", routing_key(agent, envelope)), payload, envelope, host, now);
    publication.event_id = request_id;
    publication
}

/// Bloodbank's command fields (and chatgate's own beside them) for `agent`.
fn command_payload(agent: &str, envelope: &CommandEnvelope, now: OffsetDateTime) -> Value {
    // Bloodbank reads 0 as "no expiry"; a command already past its TTL gets 1 ms, so that the
    // agent's TTL guard refuses it rather than running it forever.
    let ttl_ms = envelope.expires_at.map_or(0, |at| (at - now).whole_milliseconds().max(1));
    json!({
        "command_id": envelope.command_id,
        "target_agent": agent,
        "issued_by": envelope.actor_id,
        "action": envelope.intent.action,
        "priority": priority(envelope.risk),
        "ttl_ms": ttl_ms,
        "idempotency_key": envelope.idempotency_key,
        "command_payload": envelope.args,
        // chatgate's own, beside the fields Bloodbank defines (its models ignore extra fields).
        "entity": envelope.intent.entity,
        "command_kind": envelope.command_kind,
        "risk": envelope.risk,
    })
}

/// The notice that an operator canceled a command `agent` was given
/// (`command.{agent}.{action}.cancel`).
pub fn cancel_event(
    agent: &str,
    envelope: &CommandEnvelope,
    reason: &str,
    host: &str,
    now: OffsetDateTime,
) -> Publication {
    let payload = json!({
        "command_id": envelope.command_id,
        "target_agent": agent,
        "action": envelope.intent.action,
        "idempotency_key": envelope.idempotency_key,
        "reason": reason,
    });
    event(format!("{}.cancel", routing_key(agent, envelope)), payload, envelope, host, now)
}

fn priority(risk: Risk) -> &'static str {
    match risk {
        Risk::High => "high",
        _ => "normal",
    }
}

fn event(
    event_type: String,
    payload: Value,
    envelope: &CommandEnvelope,
    host: &str,
    now: OffsetDateTime,
) -> Publication {
    let event_id = Uuid::now_v7();
    let causation = envelope.causation_id.as_ref().map_or_else(|| envelope.command_id.to_string(), |c| c.to_string());
    // Bloodbank's `correlation_ids` are UUIDs: the ids chatgate holds that are UUIDs go there, and
    // the correlation id itself, whatever its form, in `correlation_id`.
    let mut parents: Vec<Uuid> =
        [envelope.correlation_id.as_str(), causation.as_str()].iter().filter_map(|id| id.parse().ok()).collect();
    parents.dedup();
    let body = json!({
        "event_id": event_id,
        "event_type": event_type,
        "timestamp": rfc3339(now),
        "version": ENVELOPE_VERSION,
        "source": {
            "host": host,
            "type": TRIGGER_TYPE,
            // hookd's bridge wrote the trigger under both names; readers of either find it.
            "trigger_type": TRIGGER_TYPE,
            "app": "chatgate",
            "meta": {"tenant_id": envelope.tenant_id, "channel": envelope.channel},
        },
        "correlation_ids": parents,
        "correlation_id": envelope.correlation_id,
        "causation_id": causation,
        "agent_context": null,
        "payload": payload,
    });
    Publication {
        routing_key: event_type,
        body: body.to_string().into_bytes(),
        event_id,
        correlation_id: envelope.correlation_id.to_string(),
    }
}

/// Why a message from the bus could not be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Unreadable {
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("`{0}` is neither a command response nor an agent state event")]
    RoutingKey(String),
    #[error("its fields do not read: {0}")]
    Fields(String),
    #[error("`{0}` is not an agent state")]
    State(String),
}

/// The fields of a response, wherever the envelope put them.
#[derive(Debug, Deserialize)]
struct ResponseFields {
    command_id: Uuid,
    #[serde(default)]
    outcome: Option<ResultOutcome>,
    #[serde(default)]
    result_payload: Option<Value>,
    #[serde(default)]
    duration_ms: Option<u64>,
    #[serde(default)]
    error_code: Option<String>,
    #[serde(default)]
    error_message: Option<String>,
    #[serde(default)]
    retryable: Option<bool>,
    #[serde(default)]
    retry_after_ms: Option<u64>,
}

/// Reads one message from the gateway's queue.
pub fn read(routing_key: &str, data: &[u8]) -> Result<Report, Unreadable> {
    let body: Value = serde_json::from_slice(data).map_err(|e| Unreadable::NotJson(e.to_string()))?;
    let parts: Vec<&str> = routing_key.split('.').collect();
    if let ["agent", _, "state", "changed"] = parts.as_slice() {
        return read_state(&body);
    }
    let ["command", _, _, kind] = parts.as_slice() else {
        return Err(Unreadable::RoutingKey(routing_key.to_owned()));
    };
    let fields = fields_of(&body, "command_id");
    let fields: ResponseFields =
        serde_json::from_value(fields.clone()).map_err(|e| Unreadable::Fields(e.to_string()))?;
    let command_id = fields.command_id;
    Ok(match *kind {
        "ack" => Report::Ack { command_id },
        "previewed" => {
            let answer = fields_of(&body, "command_id").to_string();
            Report::Previewed { command_id, answer: read_answer(answer.as_bytes(), command_id) }
        }
        "waiting" => {
            let wait = ApprovalWait::picked_from(fields_of(&body, "command_id"));
            Report::Waiting { command_id, wait: wait.map_err(|e| Unreadable::Fields(e.to_string()))? }
        }
        "result" => {
            let outcome = fields.outcome.unwrap_or(ResultOutcome::Success);
            let detail = json!({
                "outcome": outcome,
                "result_payload": fields.result_payload.unwrap_or(Value::Null),
                "duration_ms": fields.duration_ms,
            });
            Report::Result { command_id, outcome, detail }
        }
        "error" => {
            let retryable = fields.retryable.unwrap_or(false);
            let detail = json!({
                "code": fields.error_code.as_deref().unwrap_or("execution_failed"),
                "message": fields.error_message.unwrap_or_default(),
                "retryable": retryable,
                "retry_after_ms": fields.retry_after_ms,
            });
            Report::Error {
                command_id,
                retryable,
                retry_after: fields.retry_after_ms.map(Duration::from_millis),
                detail,
            }
        }
        _ => return Err(Unreadable::RoutingKey(routing_key.to_owned())),
    })
}

/// An agent's report of its own state: `payload.state` in Bloodbank's envelope (or `to_state`,
/// as a transition names it), `state` at the top level in the flat format.
fn read_state(body: &Value) -> Result<Report, Unreadable> {
    let payload = &body["payload"];
    let named = [payload.get("state"), payload.get("to_state"), body.get("state")]
        .into_iter()
        .flatten()
        .find_map(Value::as_str)
        .unwrap_or_default();
    let state = named.parse::<AgentState>().map_err(|_| Unreadable::State(named.to_owned()))?;
    Ok(Report::State { state })
}

/// `payload` when it is an object holding `key` (Bloodbank's envelope), the body itself otherwise.
fn fields_of<'a>(body: &'a Value, key: &str) -> &'a Value {
    match body.get("payload") {
        Some(payload) if payload.get(key).is_some() => payload,
        _ => body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `.error` as Bloodbank's `CommandEventPublisher.publish_error` builds it.
    fn bloodbank_error(command_id: Uuid, retryable: bool) -> Vec<u8> {
        json!({
            "event_id": Uuid::new_v4(), "event_type": "command.error", "timestamp": "2026-11-23T10:00:00+00:00",
            "version": "1.0", "source": {"host": "h", "type": "service", "app": "command-adapter"},
            "producer": "service:command-adapter", "correlation_id": "c", "causation_id": null,
            "payload": {"command_id": command_id, "target_agent": "orders", "action": "ship",
                "error_code": "invalid_state", "error_message": "not idle", "retryable": retryable,
                "retry_after_ms": 5000, "fsm_version": 3},
        })
        .to_string()
        .into_bytes()
    }

    #[test]
    fn bloodbanks_responses_read_from_their_payload() {
        let id = Uuid::now_v7();
        let Ok(Report::Error { command_id, retryable, retry_after, detail }) =
            read("command.orders.ship.error", &bloodbank_error(id, true))
        else {
            panic!("an error report");
        };
        assert_eq!((command_id, retryable, retry_after), (id, true, Some(Duration::from_millis(5000))));
        assert_eq!(detail["code"], "invalid_state");
        let result = json!({"payload": {"command_id": id, "target_agent": "orders", "action": "ship",
            "outcome": "skipped", "fsm_version": 1, "duration_ms": null, "result_payload": null}});
        let report = read("command.orders.ship.result", result.to_string().as_bytes());
        assert!(matches!(report, Ok(Report::Result { outcome: ResultOutcome::Skipped, .. })), "{report:?}");
        let ack = json!({"payload": {"command_id": id, "target_agent": "orders", "action": "ship"}});
        assert_eq!(read("command.orders.ship.ack", ack.to_string().as_bytes()), Ok(Report::Ack { command_id: id }));
        let state = json!({"payload": {"agent_name": "orders", "state": "working"}});
        let report = read("agent.orders.state.changed", state.to_string().as_bytes());
        assert_eq!(report, Ok(Report::State { state: AgentState::Working }));
    }

    #[test]
    fn the_flat_format_still_reads_and_nonsense_does_not() {
        let id = Uuid::now_v7();
        let flat = json!({"command_id": id, "outcome": "success", "result_payload": {"n": 1}});
        let Ok(Report::Result { detail, .. }) = read("command.orders.ship.result", flat.to_string().as_bytes()) else {
            panic!("a result");
        };
        assert_eq!(detail["result_payload"]["n"], 1);
        assert!(matches!(read("command.orders.ship.result", b"{"), Err(Unreadable::NotJson(_))));
        let odd = json!({"command_id": id, "outcome": "maybe"}).to_string();
        assert!(matches!(read("command.orders.ship.result", odd.as_bytes()), Err(Unreadable::Fields(_))));
        assert!(matches!(read("command.orders.ship", b"{}"), Err(Unreadable::RoutingKey(_))));
        let state = json!({"state": "dreaming"}).to_string();
        assert!(matches!(read("agent.orders.state.changed", state.as_bytes()), Err(Unreadable::State(_))));
    }
}
