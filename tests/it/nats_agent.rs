//! A test agent on NATS JetStream written against Bloodbank's own contract (delorenj/bloodbank,
//! the 59bee5d layout: `schemas/` as vendored in `tests/contracts/bloodbank/` with the commit of
//! each file, the streams of `compose/nats/streams.json`, the subjects and rules of
//! `docs/event-naming.md` §3, §4 and §11), not against chatgate's code. Every command it is given is
//! validated against `invocation.start.v1.json` with a JSON Schema validator; every event it sends
//! is validated against its own schema before it goes. It takes commands from its durable consumer
//! on `{prefix}.cmd.v1.agent.invocation.start`, dispatches by `data.target_agent_id`, and answers on
//! `{prefix}.evt.v1.agent.invocation.{started,completed,failed}` with `causationid` = the command's
//! `command_id`, the way the order number says (see [`Agent::handle`]).

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use async_nats::jetstream::{self, Context};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub use crate::bloodbank_agent::Ledger;

const CONTRACTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/contracts/bloodbank");
const BASE: &str = "https://33god.dev/schemas";

/// Bloodbank's schemas, by the action they describe (`start`, `started`, `completed`, `failed`).
pub struct Schemas {
    validators: HashMap<String, jsonschema::Validator>,
}

impl Schemas {
    pub fn get() -> &'static Schemas {
        static SCHEMAS: OnceLock<Schemas> = OnceLock::new();
        SCHEMAS.get_or_init(|| {
            let read = |path: &str| -> Value {
                let text = std::fs::read_to_string(format!("{CONTRACTS}/{path}")).expect("a vendored schema");
                serde_json::from_str(&text).expect("schema JSON")
            };
            let registry = jsonschema::Registry::new()
                .add(format!("{BASE}/_common/types.v1.json"), read("_common/types.v1.json"))
                .expect("types")
                .add(format!("{BASE}/_common/cloudevent_base.v1.json"), read("_common/cloudevent_base.v1.json"))
                .expect("base")
                .prepare()
                .expect("the registry");
            let validators = ["start", "started", "completed", "failed"]
                .into_iter()
                .map(|action| {
                    let schema = read(&format!("bloodbank/v1/agent/invocation.{action}.v1.json"));
                    let validator = jsonschema::options()
                        .with_registry(&registry)
                        .should_validate_formats(true)
                        .build(&schema)
                        .expect("a schema that compiles");
                    (action.to_owned(), validator)
                })
                .collect();
            Schemas { validators }
        })
    }

    /// Every way `instance` breaks the schema of `action`.
    pub fn errors(&self, action: &str, instance: &Value) -> Vec<String> {
        let validator = &self.validators[action];
        validator.iter_errors(instance).map(|e| format!("{}: {e}", e.instance_path())).collect()
    }
}

/// Bloodbank's streams, as `compose/nats/streams.json` declares them, under `prefix`.
pub async fn streams(context: &Context, prefix: &str) -> Result<(), String> {
    let name = prefix.to_uppercase().replace(['.', '-'], "_");
    let p = prefix;
    for (suffix, subjects, retention, days) in [
        (
            "COMMANDS",
            vec![format!("{p}.cmd.v1.>"), format!("{p}.rpy.v1.>")],
            jetstream::stream::RetentionPolicy::WorkQueue,
            1,
        ),
        (
            "EVENTS",
            vec![format!("{p}.evt.v1.>"), format!("{p}.evt.v2.repo.maintenance.failed")],
            jetstream::stream::RetentionPolicy::Limits,
            7,
        ),
    ] {
        let config = jetstream::stream::Config {
            name: format!("{name}_{suffix}"),
            subjects,
            retention,
            storage: jetstream::stream::StorageType::File,
            max_age: Duration::from_secs(days * 86_400),
            ..Default::default()
        };
        context.get_or_create_stream(config).await.map_err(|e| format!("stream: {e}"))?;
    }
    Ok(())
}

/// Plays the agent `agent` until stopped, connecting again after a server restart.
pub async fn run(url: String, prefix: String, agent: String, ledger: Ledger, stopping: CancellationToken) {
    while !stopping.is_cancelled() {
        tokio::select! {
            () = stopping.cancelled() => return,
            result = serve(&url, &prefix, &agent, &ledger) => if let Err(error) = result {
                eprintln!("test agent: {error}; connecting again");
            },
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn serve(url: &str, prefix: &str, agent: &str, ledger: &Ledger) -> Result<(), String> {
    let client = async_nats::connect(url).await.map_err(|e| e.to_string())?;
    let context = jetstream::new(client);
    streams(&context, prefix).await?;
    let name = format!("{}_COMMANDS", prefix.to_uppercase().replace(['.', '-'], "_"));
    let stream = context.get_stream(&name).await.map_err(|e| e.to_string())?;
    let config = jetstream::consumer::pull::Config {
        durable_name: Some(format!("agent-{agent}")),
        // Commands, and chatgate's preview requests beside them (issue #47).
        filter_subject: format!("{prefix}.cmd.v1.agent.invocation.>"),
        ack_policy: jetstream::consumer::AckPolicy::Explicit,
        ..Default::default()
    };
    let consumer = stream.get_or_create_consumer(&format!("agent-{agent}"), config).await.map_err(|e| e.to_string())?;
    let mut messages = consumer.messages().await.map_err(|e| e.to_string())?;
    let worker = Agent { context: &context, prefix, name: agent, ledger };
    while let Some(message) = messages.next().await {
        let message = message.map_err(|e| e.to_string())?;
        let body: Value = serde_json::from_slice(&message.payload).unwrap_or(Value::Null);
        let msg_id = message.headers.as_ref().and_then(|h| h.get("Nats-Msg-Id")).map(|v| v.as_str().to_owned());
        if msg_id.as_deref() != body["id"].as_str() {
            ledger.violation(format!("Nats-Msg-Id {msg_id:?} is not the event id {}", body["id"]));
        }
        if body["type"] == "bloodbank.v1.agent.invocation.preview" {
            worker.preview(&body).await?;
        } else {
            worker.handle(&body).await?;
        }
        message.ack().await.map_err(|e| e.to_string())?;
    }
    Err("the consumer ended".into())
}

struct Agent<'a> {
    context: &'a Context,
    prefix: &'a str,
    name: &'a str,
    ledger: &'a Ledger,
}

impl Agent<'_> {
    /// By the order number: 13 starts and fails (`ORDER_LOCKED`); 19 is denied before it starts
    /// (`ROUTE_DENIED`); 17 is declined for now the first time (retryable), done the second; 11
    /// says everything twice; 15 says it completed before it says it started; any other starts
    /// and completes. A key done before is completed again without a second effect.
    async fn handle(&self, command: &Value) -> Result<(), String> {
        self.ledger.bodies.lock().expect("lock").push(command.clone());
        let errors = Schemas::get().errors("start", command);
        if !errors.is_empty() {
            self.ledger.violation(format!("invocation.start: {errors:?}"));
            return Ok(());
        }
        // Dispatch by `data.target_agent_id` (event-naming §3.2): another agent's command is not ours.
        if command["data"]["target_agent_id"] != self.name {
            return Ok(());
        }
        let key = format!("{}|{}", command["idempotency_key"], command["command_id"]);
        let order = command["data"]["context"]["args"]["order_id"].as_str().unwrap_or_default().to_owned();
        let seen = {
            let mut seen = self.ledger.seen.lock().expect("lock");
            let count = seen.entry(command["command_id"].to_string()).or_default();
            *count += 1;
            *count
        };
        let invocation = format!("inv-{}", Uuid::new_v4().simple());
        let say = |action: &'static str, data: Value| self.say(command, &invocation, action, data);
        // 77 waits for a supervisor's approval before it does anything (chatgate's
        // `invocation.waiting`), and does the work once when the command comes back with the grant.
        if order == "77" {
            let grant = &command["data"]["context"]["approval"];
            if grant["decision"] == "approved" {
                *self.ledger.effects.lock().expect("lock").entry(key).or_default() += 1;
                let result = json!({"result": {"order": order, "approved_by": grant["approvers"][0]["approver"]}});
                return say("completed", result).await;
            }
            say("started", json!({})).await?;
            let waiting = json!({"reason": "refund_review", "message": "a supervisor reviews this one",
                "roles": ["supervisor"]});
            return say("waiting", waiting).await;
        }
        if order.ends_with("19") {
            return say("failed", json!({"error_code": "ROUTE_DENIED", "error_message": "no route to orders"})).await;
        }
        if order.ends_with("17") && seen == 1 {
            let busy =
                json!({"error_code": "AGENT_BUSY", "error_message": "busy", "retryable": true, "retry_after_ms": 200});
            return say("failed", busy).await;
        }
        if order.ends_with("13") {
            say("started", json!({})).await?;
            return say("failed", json!({"error_code": "ORDER_LOCKED", "error_message": "the order is locked"})).await;
        }
        let first = self.ledger.effects.lock().expect("lock").insert(key, 1).is_none();
        let result = json!({"result": {"order": order, "state": "shipped", "first_time": first}});
        match order.as_str() {
            o if o.ends_with("15") => {
                say("completed", result).await?;
                say("started", json!({})).await
            }
            o if o.ends_with("11") => {
                for (action, data) in [("started", json!({})), ("completed", result)] {
                    say(action, data.clone()).await?;
                    say(action, data).await?;
                }
                Ok(())
            }
            _ => {
                say("started", json!({})).await?;
                say("completed", result).await
            }
        }
    }

    /// A preview request (docs/BLOODBANK.md, "Previews"): order *66 is refused, order *99 gets no
    /// answer at all, any other is previewed, in `invocation.previewed`.
    async fn preview(&self, request: &Value) -> Result<(), String> {
        self.ledger.previews.lock().expect("lock").push(request.clone());
        let args = &request["data"]["context"]["args"];
        let (order, amount) =
            (args["order_id"].as_str().unwrap_or_default(), args["amount"].as_str().unwrap_or_default());
        let answer = if order.ends_with("99") {
            return Ok(());
        } else if order.ends_with("66") {
            json!({"status": "refused", "error": {"code": "order_closed", "message": format!("order {order} is closed")}})
        } else {
            json!({"status": "preview", "preview": {"summary": format!("Order {order}: refunding {amount} of 80.00")}})
        };
        let invocation = format!("inv-{}", Uuid::new_v4().simple());
        self.say(request, &invocation, "previewed", answer).await
    }

    /// One event about `command`, validated against its schema, published with JetStream's ack.
    async fn say(&self, command: &Value, invocation: &str, action: &'static str, fields: Value) -> Result<(), String> {
        let mut data = json!({"invocation_id": invocation, "thread_id": command["data"]["thread_id"],
            "turn_id": command["data"]["turn_id"]});
        if let (Some(data), Some(fields)) = (data.as_object_mut(), fields.as_object()) {
            data.extend(fields.clone());
        }
        let subject = format!("{}.evt.v1.agent.invocation.{action}", self.prefix);
        let event = json!({
            "specversion": "1.0", "id": Uuid::new_v4(), "source": format!("urn:33god:agent:{}", self.name),
            "type": format!("bloodbank.v1.agent.invocation.{action}"), "subject": subject,
            "time": time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default(),
            "datacontenttype": "application/json", "correlationid": command["correlationid"],
            "causationid": command["command_id"], "producer": self.name, "service": self.name, "domain": "agent",
            "kind": "event", "ordering_key": format!("invocation:{invocation}"),
            "actor": {"type": "agent_api", "agent_id": self.name}, "data": data,
        });
        // `waiting` and `previewed` are chatgate's own events: Bloodbank has no schema for them.
        if action != "waiting" && action != "previewed" {
            let errors = Schemas::get().errors(action, &event);
            assert!(errors.is_empty(), "the test agent's own {action} breaks Bloodbank's schema: {errors:?}");
        }
        let ack = self.context.publish(subject, event.to_string().into()).await.map_err(|e| e.to_string())?;
        ack.await.map(|_| ()).map_err(|e| e.to_string())
    }
}
