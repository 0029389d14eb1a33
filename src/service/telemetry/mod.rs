//! Traces across the gateway, the bus and the executors (OpenTelemetry). A command's trace is the
//! one of the request that brought it (which continues the caller's `traceparent` when a hook
//! caller sends one): its W3C trace context is stored with the command, and every later span of
//! the command joins it, whichever request, worker or instance makes the span. Spans: one per
//! HTTP request (`webhook …` for the providers' and the hooks' calls), one per committed
//! transition, one per dispatch attempt; the dispatch's context goes to HTTP executors as a
//! `traceparent` header and to Bloodbank agents in the AMQP message's headers.
//!
//! No span is made unless traces are exported (`OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` set, see [`export`]). A caller's trace is carried on all
//! the same, as OpenTelemetry's API without an SDK carries it: its `traceparent`, unchanged, goes
//! with the command it brought — through the inbox, the command's
//! row and every dispatch — to the executor ([`carrying`]), so that the executor's spans join the
//! caller's trace.

pub mod catalog;
pub mod export;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{Span as _, SpanKind, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use uuid::Uuid;

use crate::store::{CommittedMove, MoveObserver, StoredCommand};

/// Whether traces are exported (set once, when the exporter is installed).
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// The name the gateway's spans are made under.
pub const TRACER: &str = "chatgate";

pub fn enabled() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

tokio::task_local! {
    /// The trace context carried through while no spans are made: the caller's, as it came.
    static CARRIED: Option<Carried>;
}

/// A caller's W3C `traceparent`, checked, as it came (the command keeps it; `tracestate`, which
/// it does not keep, stays behind).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Carried {
    traceparent: String,
}

impl Carried {
    /// The context `headers` carry, when their `traceparent` is a valid one.
    pub fn from_headers(headers: &http::HeaderMap) -> Option<Self> {
        let traceparent = headers.get("traceparent").and_then(|v| v.to_str().ok());
        Self::from_traceparent(traceparent)
    }

    /// A stored `traceparent` (a command's, an inbox row's), when it is a valid one.
    pub fn from_traceparent(traceparent: Option<&str>) -> Option<Self> {
        let traceparent = traceparent.filter(|tp| Self::valid(tp))?;
        Some(Self { traceparent: traceparent.to_owned() })
    }

    fn valid(traceparent: &str) -> bool {
        let carrier = HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
        TraceContextPropagator::new().extract(&carrier).span().span_context().is_valid()
    }

    fn headers(&self) -> HashMap<String, String> {
        HashMap::from([("traceparent".to_owned(), self.traceparent.clone())])
    }
}

/// Runs `work` with `carried` as the trace context in force while no spans are made.
pub async fn carrying<F: std::future::Future>(carried: Option<Carried>, work: F) -> F::Output {
    CARRIED.scope(carried, work).await
}

/// The trace context in force as W3C headers: the current span's (`traceparent`, `tracestate`) when
/// traces are exported, else the caller's `traceparent` carried on; empty when there is none.
pub fn current_headers() -> HashMap<String, String> {
    if enabled() {
        let mut headers = HashMap::new();
        TraceContextPropagator::new().inject_context(&tracing::Span::current().context(), &mut headers);
        return headers;
    }
    CARRIED.try_with(|carried| carried.as_ref().map(Carried::headers)).ok().flatten().unwrap_or_default()
}

/// The `traceparent` in force, kept with what is done later on its behalf (a webhook's messages in
/// the inbox); `None` when there is none.
pub fn current_traceparent() -> Option<String> {
    current_headers().remove("traceparent")
}

/// The span one stored message is admitted in: a child of the webhook that stored it, so that
/// the command it starts joins that webhook's trace.
pub fn admission_span(channel: &str, traceparent: Option<&str>) -> tracing::Span {
    if !enabled() {
        return tracing::Span::none();
    }
    let span = tracing::info_span!("admission", otel.name = format!("admit {channel}"), otel.kind = "consumer");
    if let Some(traceparent) = traceparent {
        let carrier = HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
        let context = TraceContextPropagator::new().extract(&carrier);
        if context.span().span_context().is_valid() {
            let _ = span.set_parent(context);
        }
    }
    span
}

/// The trace a command admitted now joins, stored with it: the current span's (the request
/// that brought it), or, made outside any span, a trace named after the command itself.
pub fn admission_traceparent(command_id: Uuid) -> Option<String> {
    if !enabled() {
        // Without spans, only a caller's trace is kept: none is made up.
        return current_traceparent();
    }
    current_headers().remove("traceparent").or_else(|| Some(own_traceparent(command_id)))
}

/// A command's own trace: its 128-bit id as the trace id (a UUID is never all zeros).
fn own_traceparent(command_id: Uuid) -> String {
    let id = command_id.simple().to_string();
    format!("00-{id}-{}-01", &id[16..])
}

/// The context a command's spans are made in: its stored trace, or its own when it has none
/// (admitted before traces were exported) or the stored one is malformed.
pub fn command_context(traceparent: Option<&str>, command_id: Uuid) -> Context {
    let own = own_traceparent(command_id);
    for candidate in [traceparent, Some(own.as_str())].into_iter().flatten() {
        let carrier = HashMap::from([("traceparent".to_owned(), candidate.to_owned())]);
        let context = TraceContextPropagator::new().extract(&carrier);
        if context.span().span_context().is_valid() {
            return context;
        }
    }
    Context::new()
}

/// Continues a caller's trace: `span`'s parent becomes the context its W3C headers carry.
pub fn continue_trace(span: &tracing::Span, headers: &http::HeaderMap) {
    if !enabled() {
        return;
    }
    let context = TraceContextPropagator::new().extract(&opentelemetry_http::HeaderExtractor(headers));
    if context.span().span_context().is_valid() {
        let _ = span.set_parent(context);
    }
}

/// The span of one dispatch attempt, in the command's trace.
pub fn dispatch_span(command: &StoredCommand, executor: &str, attempt: i64) -> tracing::Span {
    if !enabled() {
        return tracing::Span::none();
    }
    let span = tracing::info_span!(
        "dispatch",
        otel.name = format!("dispatch {executor}"),
        otel.kind = "producer",
        chatgate.command_id = %command.envelope.command_id,
        chatgate.executor = executor,
        chatgate.attempt = attempt,
    );
    let _ = span.set_parent(command_context(command.trace_parent.as_deref(), command.envelope.command_id));
    span
}

/// Makes a span for each committed move, in its command's trace, from its decision to its
/// commit.
pub struct TransitionSpans;

impl MoveObserver for TransitionSpans {
    fn committed(&self, moves: &[CommittedMove<'_>]) {
        let tracer = opentelemetry::global::tracer(TRACER);
        let now = SystemTime::now();
        for committed in moves {
            let transition = committed.transition;
            let parent = command_context(committed.trace_parent, committed.command_id);
            let mut span = tracer
                .span_builder(format!("transition {} → {}", transition.from.as_str(), transition.to.as_str()))
                .with_kind(SpanKind::Internal)
                .with_start_time(SystemTime::from(committed.decided_at).min(now))
                .with_attributes([
                    KeyValue::new("chatgate.command_id", committed.command_id.to_string()),
                    KeyValue::new("chatgate.from", transition.from.as_str()),
                    KeyValue::new("chatgate.to", transition.to.as_str()),
                    KeyValue::new("chatgate.event", transition.event.as_str()),
                ])
                .start_with_context(&tracer, &parent);
            span.end_with_timestamp(now);
        }
    }
}

/// Marks traces as exported; the exporter's installer calls it.
fn exporting() {
    EXPORTING.store(true, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::TraceContextExt;
    use uuid::Uuid;

    use super::command_context;

    #[test]
    fn a_command_without_a_stored_trace_has_its_own_named_after_it() {
        let command = Uuid::parse_str("0192f1a4-7c3e-7d2a-9b1c-3e5f7a9b1c2d").expect("a uuid");
        let own = command_context(None, command);
        assert_eq!(own.span().span_context().trace_id().to_string(), command.simple().to_string());
        let malformed = command_context(Some("00-zz-zz-01"), command);
        assert_eq!(malformed.span().span_context().trace_id(), own.span().span_context().trace_id());
        let stored = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let joined = command_context(Some(stored), command);
        assert_eq!(joined.span().span_context().trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(joined.span().span_context().span_id().to_string(), "00f067aa0ba902b7");
    }
}
