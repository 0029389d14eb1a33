//! NATS JetStream executors (Bloodbank as it is today, delorenj/bloodbank at 59bee5d): each
//! command is published as the CloudEvent `bloodbank.v1.agent.invocation.start` ([`cloudevents`])
//! on `{prefix}.cmd.v1.agent.invocation.start`, and counts as handed over only once JetStream
//! acknowledged storing it (as RabbitMQ's publisher confirms do on the other bus). The agents'
//! `invocation.started`, `.completed` and `.failed` events on `{prefix}.evt.v1.agent.invocation.*`
//! reach the gateway through its durable consumer ([`listener`]). Where Bloodbank's streams
//! (`BLOODBANK_COMMANDS`, work queue, 1 day; `BLOODBANK_EVENTS`, 7 days) are not there yet, they
//! are made as `compose/nats/streams.json` declares them.

pub mod cloudevents;
pub mod listener;

use std::time::Duration;

use async_nats::jetstream::{self, Context};
use tokio::sync::Mutex;

/// The connection to one NATS server (or cluster) and Bloodbank's subjects on it, shared by the
/// executors that use it.
pub struct JetStream {
    pub url: String,
    /// The first word(s) of every subject (`bloodbank`).
    pub prefix: String,
    /// The gateway's durable consumer of the agents' events.
    pub consumer: String,
    /// How long connecting, publishing and waiting for the acknowledgement may take.
    pub timeout: Duration,
    context: Mutex<Option<Context>>,
}

impl std::fmt::Debug for JetStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JetStream")
            .field("prefix", &self.prefix)
            .field("consumer", &self.consumer)
            .finish_non_exhaustive()
    }
}

/// Why a publish did not happen; always worth another attempt.
pub type PublishError = String;

/// One stream as Bloodbank declares it.
struct StreamSpec {
    suffix: &'static str,
    subjects: Vec<String>,
    retention: jetstream::stream::RetentionPolicy,
    max_age: Duration,
}

impl JetStream {
    pub fn new(url: &str, prefix: &str, consumer: &str, timeout: Duration) -> Self {
        Self {
            url: url.to_owned(),
            prefix: prefix.to_owned(),
            consumer: consumer.to_owned(),
            timeout,
            context: Mutex::new(None),
        }
    }

    /// Where commands are published.
    pub fn command_subject(&self) -> String {
        format!("{}.cmd.v1.agent.invocation.start", self.prefix)
    }

    /// Where preview requests are published (on the commands' stream).
    pub fn preview_subject(&self) -> String {
        format!("{}.cmd.v1.agent.invocation.preview", self.prefix)
    }

    /// The agents' invocation events the gateway reads.
    pub fn events_filter(&self) -> String {
        format!("{}.evt.v1.agent.invocation.>", self.prefix)
    }

    /// Publishes one command and waits for JetStream's acknowledgement, within `timeout`. The event
    /// id is the message id JetStream deduplicates on, so a publish sent again after a lost
    /// acknowledgement is stored once.
    pub async fn publish(&self, event: &cloudevents::InvocationStart) -> Result<(), PublishError> {
        self.publish_on(self.command_subject(), event).await
    }

    /// Publishes `event` on `subject`, as [`JetStream::publish`] does.
    pub async fn publish_on(&self, subject: String, event: &cloudevents::InvocationStart) -> Result<(), PublishError> {
        let body = serde_json::to_vec(event).map_err(|e| format!("the command does not serialize: {e}"))?;
        let attempt = async {
            let context = self.context().await?;
            let message = jetstream::message::PublishMessage::build()
                .payload(body.into())
                .message_id(event.id.to_string())
                .header("content-type", "application/cloudevents+json; charset=utf-8");
            let ack = context.send_publish(subject, message).await.map_err(|e| format!("publish: {e}"))?;
            ack.await.map(|_| ()).map_err(|e| format!("JetStream did not store it: {e}"))
        };
        match tokio::time::timeout(self.timeout, attempt).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(error),
            Err(_) => Err(format!("JetStream did not acknowledge within {} ms", self.timeout.as_millis())),
        }
    }

    /// The JetStream context, connecting (and making sure of the streams and the gateway's
    /// consumer, so that no agent event can be published before it is there) when there is none.
    /// The client itself reconnects after a server restart.
    pub async fn context(&self) -> Result<Context, PublishError> {
        let mut held = self.context.lock().await;
        if let Some(context) = held.as_ref() {
            return Ok(context.clone());
        }
        let client = async_nats::ConnectOptions::new()
            .connection_timeout(self.timeout)
            .connect(self.url.as_str())
            .await
            .map_err(|e| format!("cannot reach NATS: {e}"))?;
        let context = jetstream::new(client);
        self.ensure(&context).await?;
        *held = Some(context.clone());
        Ok(context)
    }

    /// Bloodbank's two streams (found by subject, made where missing) and the gateway's durable
    /// consumer on the events.
    async fn ensure(&self, context: &Context) -> Result<(), PublishError> {
        use jetstream::stream::RetentionPolicy::{Limits, WorkQueue};
        let prefix = &self.prefix;
        // As `compose/nats/streams.json` (59bee5d) declares them, every subject: the commands and
        // their replies; the v1 events and the one v2 event Bloodbank registers.
        let commands = StreamSpec {
            suffix: "COMMANDS",
            subjects: vec![format!("{prefix}.cmd.v1.>"), format!("{prefix}.rpy.v1.>")],
            retention: WorkQueue,
            max_age: Duration::from_secs(86_400),
        };
        let events = StreamSpec {
            suffix: "EVENTS",
            subjects: vec![format!("{prefix}.evt.v1.>"), format!("{prefix}.evt.v2.repo.maintenance.failed")],
            retention: Limits,
            max_age: Duration::from_secs(7 * 86_400),
        };
        self.stream(context, &commands, &self.command_subject()).await?;
        let events = self.stream(context, &events, &format!("{prefix}.evt.v1.agent.invocation.started")).await?;
        let config = jetstream::consumer::pull::Config {
            durable_name: Some(self.consumer.clone()),
            filter_subject: self.events_filter(),
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            // A new consumer starts from now: what agents said before the gateway was there is
            // about commands it never sent.
            deliver_policy: jetstream::consumer::DeliverPolicy::New,
            ack_wait: Duration::from_secs(30),
            ..Default::default()
        };
        events.get_or_create_consumer(&self.consumer, config).await.map_err(|e| format!("consumer: {e}"))?;
        Ok(())
    }

    /// The stream that holds `subject`, made as `spec` says when none does.
    async fn stream(
        &self,
        context: &Context,
        spec: &StreamSpec,
        subject: &str,
    ) -> Result<jetstream::stream::Stream, String> {
        if let Ok(name) = context.stream_by_subject(subject).await {
            return context.get_stream(&name).await.map_err(|e| format!("stream {name}: {e}"));
        }
        let name = format!("{}_{}", self.prefix.to_uppercase().replace(['.', '-'], "_"), spec.suffix);
        let config = jetstream::stream::Config {
            name: name.clone(),
            subjects: spec.subjects.clone(),
            retention: spec.retention,
            storage: jetstream::stream::StorageType::File,
            discard: jetstream::stream::DiscardPolicy::Old,
            max_age: spec.max_age,
            num_replicas: 1,
            ..Default::default()
        };
        context.get_or_create_stream(config).await.map_err(|e| format!("stream {name}: {e}"))
    }

    /// The events stream's durable consumer of the gateway.
    pub async fn consumer(&self) -> Result<jetstream::consumer::PullConsumer, String> {
        let context = self.context().await?;
        // Made again if the server lost them (a new, empty server behind the same address).
        self.ensure(&context).await?;
        let subject = format!("{}.evt.v1.agent.invocation.started", self.prefix);
        let name = context.stream_by_subject(subject).await.map_err(|e| format!("events stream: {e}"))?;
        let stream = context.get_stream(&name).await.map_err(|e| format!("stream {name}: {e}"))?;
        stream.get_consumer(&self.consumer).await.map_err(|e| format!("consumer {}: {e}", self.consumer))
    }
}
