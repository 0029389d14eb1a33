//! Traces across the gateway and its executors (issue #19), from the OpenTelemetry side: the
//! real binary exports over OTLP/HTTP (protobuf, the protocol's default) to a receiver stand-in
//! here, configured only by the standard variables, and an executor stand-in reads the W3C
//! `traceparent` it is sent. A command's spans (its webhook, every transition, every dispatch)
//! share one trace; a hook caller's `traceparent` is continued; a later webhook that confirms a
//! command adds spans to that command's trace.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::HeaderMap;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;
use reqwest::StatusCode;
use serde_json::json;

use crate::fake_graph::FakeServer;
use crate::helpers::{CUSTOMER, DEMO_NUMBER};
use crate::process::{ConfigDir, Gateway};

/// A span as the receiver got it.
#[derive(Debug, Clone)]
struct Received {
    name: String,
    trace_id: String,
    span_id: String,
    parent: String,
    command: Option<String>,
    service: Option<String>,
}

type Spans = Arc<Mutex<Vec<Received>>>;

fn string_of(attributes: &[opentelemetry_proto::tonic::common::v1::KeyValue], key: &str) -> Option<String> {
    attributes.iter().find(|kv| kv.key == key).and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
        AnyValue::StringValue(value) => Some(value.clone()),
        _ => None,
    })
}

/// An OTLP/HTTP receiver stand-in: `POST /v1/traces` with protobuf, as a collector takes it.
async fn otlp_receiver() -> (String, Spans) {
    let spans = Spans::default();
    let kept = spans.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| {
            let kept = kept.clone();
            async move {
                let protobuf = headers.get("content-type").is_some_and(|v| v == "application/x-protobuf");
                let Ok(request) = ExportTraceServiceRequest::decode(body)
                    .map_err(|_| ())
                    .and_then(|r| if protobuf { Ok(r) } else { Err(()) })
                else {
                    return StatusCode::BAD_REQUEST;
                };
                let mut kept = kept.lock().expect("lock");
                for resource in request.resource_spans {
                    let service = resource.resource.as_ref().and_then(|r| string_of(&r.attributes, "service.name"));
                    for span in resource.scope_spans.into_iter().flat_map(|scope| scope.spans) {
                        kept.push(Received {
                            name: span.name.clone(),
                            trace_id: hex::encode(&span.trace_id),
                            span_id: hex::encode(&span.span_id),
                            parent: hex::encode(&span.parent_span_id),
                            command: string_of(&span.attributes, "chatgate.command_id"),
                            service: service.clone(),
                        });
                    }
                }
                StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("port");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, spans)
}

/// What the executor stand-in was sent: (the command's id, its `traceparent`) of each call.
fn calls(executor: &FakeServer) -> Vec<(String, String)> {
    let header = |r: &crate::fake_graph::Recorded, name: &str| r.headers.get(name).cloned().unwrap_or_default();
    executor.requests().iter().map(|r| (header(r, "x-chatgate-command-id"), header(r, "traceparent"))).collect()
}

async fn until<T>(what: &str, mut found: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(value) = found() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn whatsapp(client: &reqwest::Client, gateway: &Gateway, id: &str, text: &str) -> StatusCode {
    whatsapp_in(client, gateway, id, text, None).await
}

/// A signed WhatsApp delivery, in the caller's trace when `traceparent` is given.
async fn whatsapp_in(
    client: &reqwest::Client,
    gateway: &Gateway,
    id: &str,
    text: &str,
    traceparent: Option<&str>,
) -> StatusCode {
    use chatgate::channels::whatsapp::simulate;
    let body = simulate::notification(DEMO_NUMBER, vec![simulate::text(id, CUSTOMER, text)], vec![]);
    let bytes = body.to_string().into_bytes();
    let signature = chatgate::channels::whatsapp::signature::sign(b"demo-whatsapp-app-secret", &bytes);
    let mut request = client.post(gateway.url("/webhooks/whatsapp")).header("content-type", "application/json");
    if let Some(traceparent) = traceparent {
        request = request.header("traceparent", traceparent);
    }
    let sent = request.header("x-hub-signature-256", signature).body(bytes).send().await.expect("webhook");
    sent.status()
}

/// The shipped gateway exporting its traces to a receiver stand-in, its `orders` executor a
/// succeeding stand-in.
struct Exporting {
    _config: ConfigDir,
    gateway: Gateway,
    spans: Spans,
    executor: FakeServer,
}

impl Exporting {
    async fn start() -> Self {
        let (collector, spans) = otlp_receiver().await;
        let executor = FakeServer::succeeding_executor().await;
        let config = ConfigDir::shipped(|config| config);
        let database = format!("sqlite://{}/chatgate.db", config.dir.path().display());
        let env = [
            ("CHATGATE_DATABASE_URL", database.as_str()),
            ("CHATGATE_ORDERS_EXECUTOR_URL", executor.url.as_str()),
            ("CHATGATE_WHATSAPP_API_BASE", collector.as_str()),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ];
        let gateway = crate::process::start(&config.path(), &env).await;
        Self { _config: config, gateway, spans, executor }
    }
}

/// The spans of `command` once its dispatch and its last transition have arrived.
async fn spans_of(spans: &Spans, command: &str, last: &str) -> Vec<Received> {
    until(&format!("the spans of {command}"), || {
        let mine: Vec<Received> =
            spans.lock().expect("lock").iter().filter(|s| s.command.as_deref() == Some(command)).cloned().collect();
        let done = mine.iter().any(|s| s.name.starts_with("dispatch")) && mine.iter().any(|s| s.name.ends_with(last));
        done.then_some(mine)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spans_of_one_command_share_one_trace_across_the_gateway_and_its_executor() {
    let Exporting { _config, gateway, spans, executor } = Exporting::start().await;
    let client = reqwest::Client::new();

    // A hook caller in a trace of its own: the command continues it.
    let caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let called = client
        .post(gateway.url("/hooks/agent"))
        .bearer_auth("demo-hooks-token-change-me")
        .header("traceparent", format!("00-{caller_trace}-{caller_span}-01"))
        .json(&json!({"message": "order status 7"}))
        .send()
        .await
        .expect("hook call");
    assert_eq!(called.status(), StatusCode::ACCEPTED);
    let hooked = called.json::<serde_json::Value>().await.expect("json")["runId"].as_str().expect("runId").to_owned();
    let hooked_spans = spans_of(&spans, &hooked, "executed").await;
    assert!(hooked_spans.iter().all(|s| s.trace_id == caller_trace), "{hooked_spans:#?}");
    let webhook = until("the hook call's span", || {
        spans.lock().expect("lock").iter().find(|s| s.name == "webhook hooks/agent").cloned()
    })
    .await;
    assert_eq!((webhook.trace_id.as_str(), webhook.parent.as_str()), (caller_trace, caller_span));
    assert_eq!(webhook.service.as_deref(), Some("chatgate"), "the service is named");
    let transitions: BTreeSet<&str> =
        hooked_spans.iter().filter(|s| s.name.starts_with("transition")).map(|s| s.name.as_str()).collect();
    for expected in ["transition received → canonicalized", "transition started → executed"] {
        assert!(transitions.contains(expected), "{expected} in {transitions:?}");
    }
    // The executor was called in the dispatch span: same trace, the dispatch span its parent.
    let dispatch = hooked_spans.iter().find(|s| s.name == "dispatch orders").expect("a dispatch span");
    let traceparent = until("the executor's call", || {
        calls(&executor).into_iter().find(|(command, _)| *command == hooked).map(|(_, tp)| tp)
    })
    .await;
    assert_eq!(traceparent, format!("00-{caller_trace}-{}-01", dispatch.span_id), "the executor joins the trace");

    // A chat command confirmed in a later webhook: its confirmation and dispatch join the trace
    // of the webhook that brought it, not the one of the answer.
    assert_eq!(whatsapp(&client, &gateway, "wamid.TRACE1", "refund 1234 25.00").await, StatusCode::OK);
    let first = until("the refund's webhook span", || {
        let spans = spans.lock().expect("lock");
        spans.iter().find(|s| s.name == "webhook whatsapp").map(|s| s.trace_id.clone())
    })
    .await;
    assert_eq!(whatsapp(&client, &gateway, "wamid.TRACE2", "yes").await, StatusCode::OK);
    let refund =
        until("the refund's executor call", || calls(&executor).into_iter().find(|(command, _)| *command != hooked))
            .await;
    let refund_spans = spans_of(&spans, &refund.0, "executed").await;
    assert!(refund_spans.iter().all(|s| s.trace_id == first), "one trace: {refund_spans:#?}");
    assert!(refund_spans.iter().any(|s| s.name.ends_with("→ confirmed")), "{refund_spans:#?}");
    assert!(refund.1.starts_with(&format!("00-{first}-")), "the executor joins it: {}", refund.1);
    let answers: Vec<String> = spans
        .lock()
        .expect("lock")
        .iter()
        .filter(|s| s.name == "webhook whatsapp" && s.trace_id != first)
        .map(|s| s.trace_id.clone())
        .collect();
    assert_eq!(answers.len(), 1, "the answer's webhook is a trace of its own");
}

/// Issue 44.10: a webhook that arrives in a caller's trace (a provider's proxy or a test harness
/// sending `traceparent`) continues it to the executor: the executor's request carries a
/// `traceparent` of the same trace, whose parent is the dispatch span, a span of that trace too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhooks_trace_continues_to_the_executor() {
    let Exporting { _config, gateway, spans, executor } = Exporting::start().await;
    let client = reqwest::Client::new();
    let (trace, parent) = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
    let caller = format!("00-{trace}-{parent}-01");
    let status = whatsapp_in(&client, &gateway, "wamid.TRACED1", "order status 1234", Some(&caller)).await;
    assert_eq!(status, StatusCode::OK);
    let (command, traceparent) = until("the executor's call", || calls(&executor).into_iter().next()).await;
    assert!(traceparent.starts_with(&format!("00-{trace}-")), "the executor joins the caller's trace: {traceparent:?}");
    let mine = spans_of(&spans, &command, "executed").await;
    assert!(mine.iter().all(|s| s.trace_id == trace), "{mine:#?}");
    let dispatch = mine.iter().find(|s| s.name == "dispatch orders").expect("a dispatch span");
    assert_eq!(traceparent, format!("00-{trace}-{}-01", dispatch.span_id), "its parent is the dispatch span");
    let webhook = until("the webhook's span", || {
        spans.lock().expect("lock").iter().find(|s| s.name == "webhook whatsapp").cloned()
    })
    .await;
    assert_eq!((webhook.trace_id.as_str(), webhook.parent.as_str()), (trace, parent), "the webhook continues it");
}

/// Issue 44.10: without the variables nothing is exported, and a caller's trace is carried on as
/// it came, as OpenTelemetry's API without an SDK carries it: the executor's request has the
/// caller's `traceparent`, through the hook bridge and through a webhook's
/// inbox alike; a call that came in no trace sends none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_endpoint_nothing_is_exported_and_the_callers_trace_is_carried_on() {
    let executor = FakeServer::succeeding_executor().await;
    let executor_url = executor.url.clone();
    let config = ConfigDir::shipped(|config| config);
    let database = format!("sqlite://{}/chatgate.db", config.dir.path().display());
    let env = [("CHATGATE_DATABASE_URL", database.as_str()), ("CHATGATE_ORDERS_EXECUTOR_URL", executor_url.as_str())];
    let gateway = crate::process::start(&config.path(), &env).await;
    let client = reqwest::Client::new();
    let hooked = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let called = client
        .post(gateway.url("/hooks/agent"))
        .bearer_auth("demo-hooks-token-change-me")
        .header("traceparent", hooked)
        .json(&json!({"message": "order status 7"}))
        .send()
        .await
        .expect("hook call");
    assert_eq!(called.status(), StatusCode::ACCEPTED);
    let run = called.json::<serde_json::Value>().await.expect("json")["runId"].as_str().expect("runId").to_owned();
    let call = until("the hook's executor call", || calls(&executor).into_iter().find(|(c, _)| *c == run)).await;
    assert_eq!(call.1, hooked, "the hook caller's trace, as it came");

    let webhooked = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    assert_eq!(
        whatsapp_in(&client, &gateway, "wamid.CARRIED", "order status 8", Some(webhooked)).await,
        StatusCode::OK
    );
    let call = until("the webhook's executor call", || calls(&executor).into_iter().find(|(c, _)| *c != run)).await;
    assert_eq!(call.1, webhooked, "the webhook's trace, through the inbox");

    assert_eq!(whatsapp(&client, &gateway, "wamid.UNTRACED", "order status 9").await, StatusCode::OK);
    let third = until("the third call", || (calls(&executor).len() == 3).then(|| calls(&executor)[2].clone())).await;
    assert_eq!(third.1, "", "no trace came, none is made up");
}

/// A gateway whose `shipping` agent is `executor` (its lines of TOML), exporting its traces to a
/// receiver stand-in, after a hook call in trace `caller` (`trace id-span id`) asked it to ship
/// an order: the gateway, what was exported, and the command's id.
struct Shipping {
    _config: ConfigDir,
    _gateway: Gateway,
    spans: Spans,
    command: String,
}

async fn ship_in_a_trace(executor: &str, caller: &str) -> Shipping {
    let (collector, spans) = otlp_receiver().await;
    let config = ConfigDir::shipped(|config| {
        let shipping = format!("[executors.shipping]\n{executor}");
        config.replace("agents = [\"orders\"]", "agents = [\"orders\", \"shipping\"]") + "\n" + &shipping
    });
    let database = format!("sqlite://{}/chatgate.db", config.dir.path().display());
    let env = [
        ("CHATGATE_DATABASE_URL", database.as_str()),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    let gateway = crate::process::start(&config.path(), &env).await;
    let called = reqwest::Client::new()
        .post(gateway.url("/hooks/agent"))
        .bearer_auth("demo-hooks-token-change-me")
        .header("traceparent", format!("00-{caller}-01"))
        .json(&json!({"message": "ship order 9", "agentId": "shipping"}))
        .send()
        .await
        .expect("hook call");
    assert_eq!(called.status(), StatusCode::ACCEPTED);
    let command = called.json::<serde_json::Value>().await.expect("json")["runId"].as_str().expect("runId").to_owned();
    Shipping { _config: config, _gateway: gateway, spans, command }
}

impl Shipping {
    /// The `traceparent` the agent should have been given: the dispatch span's, in the caller's trace.
    async fn dispatch_traceparent(&self, caller_trace: &str) -> String {
        let dispatch = until("the dispatch span", || {
            let spans = self.spans.lock().expect("lock");
            spans.iter().find(|s| s.name == "dispatch shipping" && s.command.as_deref() == Some(&self.command)).cloned()
        })
        .await;
        format!("00-{caller_trace}-{}-01", dispatch.span_id)
    }
}

/// A Bloodbank agent's queue on the test exchange: what the gateway publishes for `agent`.
async fn agent_queue(url: &str, exchange: &str, queue: &str, agent: &str) -> (lapin::Connection, lapin::Consumer) {
    use lapin::options::{BasicConsumeOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
    use lapin::types::FieldTable;
    let connection = lapin::Connection::connect(url, lapin::ConnectionProperties::default()).await.expect("the broker");
    let channel = connection.create_channel().await.expect("channel");
    let durable = ExchangeDeclareOptions { durable: true, ..ExchangeDeclareOptions::default() };
    let kind = lapin::ExchangeKind::Topic;
    channel.exchange_declare(exchange.into(), kind, durable, FieldTable::default()).await.expect("exchange");
    channel.queue_declare(queue.into(), QueueDeclareOptions::default(), FieldTable::default()).await.expect("queue");
    let pattern = format!("command.{agent}.#");
    let bind = QueueBindOptions::default();
    channel
        .queue_bind(queue.into(), exchange.into(), pattern.as_str().into(), bind, FieldTable::default())
        .await
        .expect("bind");
    let consume = BasicConsumeOptions { no_ack: true, ..BasicConsumeOptions::default() };
    let consumer = channel
        .basic_consume(queue.into(), "trace-test".into(), consume, FieldTable::default())
        .await
        .expect("consume");
    (connection, consumer)
}

/// A command for a Bloodbank agent carries the dispatch's `traceparent` in the AMQP message's
/// headers, in the trace of the hook call that asked for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trace_context_travels_in_the_amqp_headers_to_bloodbank_agents() {
    use futures_util::StreamExt;
    let Ok(url) = std::env::var("CHATGATE_TEST_AMQP_URL") else {
        eprintln!("skipped: CHATGATE_TEST_AMQP_URL is not set");
        return;
    };
    let _shared = crate::e2e_amqp::BROKER.read().await;
    let run = uuid::Uuid::now_v7().simple().to_string();
    let (exchange, queue, responses) =
        (format!("test.traces.{run}"), format!("test.traces.agent.{run}"), format!("test.traces.gateway.{run}"));
    let (connection, mut consumer) = agent_queue(&url, &exchange, &queue, "shipping").await;
    let caller_trace = "0af7651916cd43dd8448eb211c80319c";
    let executor = format!("url = \"{url}\"\nexchange = \"{exchange}\"\nqueue = \"{responses}\"\n");
    let shipping = ship_in_a_trace(&executor, &format!("{caller_trace}-b7ad6b7169203331")).await;
    let delivery = tokio::time::timeout(Duration::from_secs(20), consumer.next())
        .await
        .expect("a command on the bus")
        .expect("a delivery")
        .expect("readable");
    let headers = delivery.properties.headers().clone().unwrap_or_default();
    let traceparent = match headers.inner().get("traceparent") {
        Some(lapin::types::AMQPValue::LongString(value)) => value.to_string(),
        other => panic!("no traceparent in the AMQP headers: {other:?}"),
    };
    assert_eq!(traceparent, shipping.dispatch_traceparent(caller_trace).await);
    drop(shipping);
    let channel = connection.create_channel().await.expect("channel");
    for queue in [queue, responses] {
        let _ = channel.queue_delete(queue.as_str().into(), lapin::options::QueueDeleteOptions::default()).await;
    }
    let _ = channel.exchange_delete(exchange.as_str().into(), lapin::options::ExchangeDeleteOptions::default()).await;
}

/// On NATS, the trace context rides in the CloudEvent itself (the CloudEvents distributed-tracing
/// extension): `traceparent` is the dispatch's, in the trace of the hook call, and the command still
/// validates against Bloodbank's schema (whose `traceparent` has a pattern of its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trace_context_travels_in_the_cloudevent_to_agents_on_nats() {
    use futures_util::StreamExt;
    let Ok(url) = std::env::var("CHATGATE_TEST_NATS_URL") else {
        eprintln!("skipped: CHATGATE_TEST_NATS_URL is not set");
        return;
    };
    let prefix = format!("t{}.bloodbank", uuid::Uuid::now_v7().simple());
    let client = async_nats::connect(url.as_str()).await.expect("NATS");
    let mut commands = client.subscribe(format!("{prefix}.cmd.v1.agent.invocation.start")).await.expect("subscribe");
    let caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let executor = format!("url = \"{url}\"\nsubject_prefix = \"{prefix}\"\n");
    let shipping = ship_in_a_trace(&executor, &format!("{caller_trace}-00f067aa0ba902b7")).await;
    let published =
        tokio::time::timeout(Duration::from_secs(20), commands.next()).await.expect("a command").expect("one");
    let event: serde_json::Value = serde_json::from_slice(&published.payload).expect("a JSON CloudEvent");
    assert_eq!(crate::nats_agent::Schemas::get().errors("start", &event), Vec::<String>::new());
    assert_eq!(event["traceparent"], shipping.dispatch_traceparent(caller_trace).await);
    assert_eq!(event["command_id"], shipping.command.as_str());
    drop(shipping);
    let context = async_nats::jetstream::new(client);
    let name = prefix.to_uppercase().replace('.', "_");
    for suffix in ["COMMANDS", "EVENTS"] {
        let _ = context.delete_stream(format!("{name}_{suffix}")).await;
    }
}
