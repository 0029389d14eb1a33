//! The systems that do the work. An HTTP executor gets the command envelope as JSON, with the
//! command's idempotency key (the same on every attempt, so an executor that honours it applies
//! the effect once), a correlation id and a Standard Webhooks signature; its answer is read as a
//! delivery ACK, possibly with the execution ACK. Built-in executors serve demos and tests.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use std::sync::Arc;

use crate::executors::acks::error_of;
use crate::executors::bus::bloodbank;

use crate::config::{ExecutorConfig, ExecutorTarget};
use crate::domain::command::CommandEnvelope;
use crate::domain::retry::parse_retry_after;
use crate::domain::standard_webhooks;
use crate::executors::bus::Bus;
use crate::executors::jetstream::{JetStream, cloudevents};

pub use crate::domain::delivery::CallOutcome;
use crate::domain::delivery::{ApprovalGrant, ApprovalWait};
use crate::domain::preview::BoundPreview;

#[derive(Debug, Clone)]
pub enum Executor {
    Echo,
    /// The demo's shop (`builtin:shop`): orders, their previews and refunds, in memory.
    Shop(Arc<crate::executors::shop::Shop>),
    /// The gateway itself: the registry's built-in chat commands (`status`, `why`, recovery
    /// actions, ...), which the dispatcher runs through [`crate::service::ooc::Gateway`].
    Gateway,
    Fail {
        code: String,
    },
    Http {
        url: String,
        secret: Option<Vec<u8>>,
        client: reqwest::Client,
        cancel_url: Option<String>,
        /// Where it is asked for previews, and how long one may take.
        preview: Option<(String, Duration)>,
    },
    Amqp {
        bus: Arc<Bus>,
        agent: String,
        announce_cancel: bool,
    },
    /// Bloodbank on NATS JetStream; `agent` is the invocation's `target_agent_id`.
    Nats {
        stream: Arc<JetStream>,
        agent: String,
    },
}

/// Which hand-over a call is: the delivery (the same for every dispatch of this command to this
/// executor), the outbox row (the same for every attempt of one dispatch) and the attempt.
#[derive(Debug, Clone, Copy)]
pub struct CallIds {
    pub delivery: Uuid,
    pub message: Uuid,
    pub attempt: i64,
}

impl Executor {
    /// The executor `name` as configured, with its HTTP client or its bus.
    pub fn from_config(name: &str, config: &ExecutorConfig) -> Result<Self, String> {
        let timeout = Duration::from_millis(config.request_timeout_ms);
        Ok(match config.target(name)? {
            ExecutorTarget::Echo => Self::Echo,
            ExecutorTarget::Shop => Self::Shop(Arc::default()),
            ExecutorTarget::Gateway => Self::Gateway,
            ExecutorTarget::Fail { code } => Self::Fail { code },
            ExecutorTarget::Amqp { url, exchange, queue, agent } => {
                let bus = Arc::new(Bus::new(&url, &exchange, &queue, timeout));
                Self::Amqp { bus, agent, announce_cancel: config.announce_cancel }
            }
            ExecutorTarget::Nats { url, subject_prefix, consumer, agent } => {
                let stream = Arc::new(JetStream::new(&url, &subject_prefix, &consumer, timeout));
                Self::Nats { stream, agent }
            }
            ExecutorTarget::Http { url, secret, cancel_url, preview_url } => {
                let client = reqwest::Client::builder()
                    .timeout(timeout)
                    .connect_timeout(timeout)
                    .build()
                    .map_err(|e| format!("executors.{name}: {e}"))?;
                let preview = preview_url.map(|url| (url, Duration::from_millis(config.preview_timeout_ms)));
                Self::Http { url, secret, client, cancel_url, preview }
            }
        })
    }

    /// Hands the command to the executor once. The delivery id is the Standard Webhooks message id
    /// (the same on every attempt); the outbox row's is the CloudEvent's (a declined command handed
    /// over again is a new event, a publish sent again after a lost acknowledgement is not). With
    /// `resume`, it tells the executor that its waiting execution was approved: the same command,
    /// idempotency key and delivery, the grant beside them, as a message of its own (the row's id).
    /// An HTTP executor also gets the preview the person confirmed, if the command had one.
    pub async fn call(&self, envelope: &CommandEnvelope, ids: CallIds, attached: &Attached) -> CallOutcome {
        let (resume, preview) = (attached.resume.as_ref(), attached.preview.as_ref());
        match self {
            Self::Echo => CallOutcome::Executed { succeeded: true, detail: json!(envelope.args) },
            Self::Shop(shop) => shop.call(envelope, preview),
            // The dispatcher runs the gateway's commands itself (they read the store).
            Self::Gateway => CallOutcome::Refused {
                status: 500,
                error: json!({"error": {
                    "code": "gateway_not_wired",
                    "message": "built-in commands run in the dispatcher",
                }}),
            },
            Self::Fail { code } => CallOutcome::Executed {
                succeeded: false,
                detail: json!({"code": code, "message": "the built-in failing executor always fails"}),
            },
            Self::Amqp { bus, agent, .. } => {
                let now = OffsetDateTime::now_utc();
                let message = bloodbank::command_event(agent, envelope, (resume, preview), &bus.host, now);
                match bus.publish(&message).await {
                    Ok(()) => CallOutcome::Handed,
                    Err(error) => CallOutcome::Retry { error, retry_after: None },
                }
            }
            Self::Nats { stream, agent } => {
                let address = (ids.message, stream.command_subject());
                let mut event = cloudevents::invocation_start(agent, envelope, address, OffsetDateTime::now_utc());
                event.data.context.approval = resume.cloned();
                event.data.context.preview = preview.cloned();
                match stream.publish(&event).await {
                    Ok(()) => CallOutcome::Handed,
                    Err(error) => CallOutcome::Retry { error, retry_after: None },
                }
            }
            Self::Http { url, secret, client, .. } => {
                let body = match carried_body(envelope, resume, preview) {
                    Ok(body) => body,
                    Err(e) => return CallOutcome::Refused { status: 0, error: json!({"message": e.to_string()}) },
                };
                let id = format!("msg_{}", if resume.is_some() { ids.message } else { ids.delivery }.simple());
                let request = client
                    .post(url)
                    .header("x-chatgate-attempt", ids.attempt.to_string())
                    .header("x-chatgate-delivery-id", ids.delivery.to_string());
                let request = match preview {
                    Some(bound) => request.header("x-chatgate-preview-digest", bound.digest.as_str()),
                    None => request,
                };
                post_signed(request, secret.as_deref(), &id, envelope, body).await
            }
        }
    }

    /// Whether the executor runs inside the gateway (built in): nothing outside it acknowledges
    /// its deliveries, so their routing needs no commit of its own before the call and goes on
    /// record with the call's outcome, one transaction fewer per batch.
    pub fn in_process(&self) -> bool {
        matches!(self, Self::Echo | Self::Shop(_) | Self::Gateway | Self::Fail { .. })
    }

    /// Whether this executor can be told that an operator canceled a command it has.
    pub fn supports_cancel(&self) -> bool {
        match self {
            Self::Http { cancel_url, .. } => cancel_url.is_some(),
            Self::Amqp { announce_cancel, .. } => *announce_cancel,
            // Bloodbank's v1 contract has no command that cancels an invocation.
            Self::Echo | Self::Shop(_) | Self::Fail { .. } | Self::Gateway | Self::Nats { .. } => false,
        }
    }

    /// Tells the executor that `envelope`'s command was canceled (best effort, retried like a
    /// dispatch): `Executed` when it took note, `Handed` when the bus took the notice.
    pub async fn notify_cancel(&self, envelope: &CommandEnvelope, reason: &str, notice_id: Uuid) -> CallOutcome {
        match self {
            Self::Http { cancel_url: Some(url), secret, client, .. } => {
                let key = &envelope.idempotency_key;
                let body = json!({"command_id": envelope.command_id, "idempotency_key": key, "reason": reason});
                let id = format!("msg_{}", notice_id.simple());
                match post_signed(client.post(url), secret.as_deref(), &id, envelope, body.to_string().into_bytes())
                    .await
                {
                    CallOutcome::Delivered { .. } | CallOutcome::Executed { .. } => {
                        CallOutcome::Executed { succeeded: true, detail: Value::Null }
                    }
                    other => other,
                }
            }
            Self::Amqp { bus, agent, announce_cancel: true } => {
                let now = OffsetDateTime::now_utc();
                let mut message = bloodbank::cancel_event(agent, envelope, reason, &bus.host, now);
                // The notice row's id: a notice sent again is the same event.
                message.event_id = notice_id;
                match bus.publish(&message).await {
                    Ok(()) => CallOutcome::Handed,
                    Err(error) => CallOutcome::Retry { error, retry_after: None },
                }
            }
            _ => CallOutcome::Executed {
                succeeded: true,
                detail: json!({"skipped": "the executor is not told of cancels"}),
            },
        }
    }
}

/// What a dispatch carries besides the envelope: the grant when it resumes a waiting execution,
/// the preview the person confirmed when the command had one.
#[derive(Debug, Clone, Default)]
pub struct Attached {
    pub resume: Option<ApprovalGrant>,
    pub preview: Option<BoundPreview>,
}

/// The envelope as JSON, with the grant as `approval` and the preview as `preview` when there are.
fn carried_body(
    envelope: &CommandEnvelope,
    resume: Option<&ApprovalGrant>,
    preview: Option<&BoundPreview>,
) -> Result<Vec<u8>, serde_json::Error> {
    if resume.is_none() && preview.is_none() {
        return serde_json::to_vec(envelope);
    }
    let mut body = serde_json::to_value(envelope)?;
    if let Some(fields) = body.as_object_mut() {
        if let Some(grant) = resume {
            fields.insert("approval".into(), serde_json::to_value(grant)?);
        }
        if let Some(preview) = preview {
            fields.insert("preview".into(), serde_json::to_value(preview)?);
        }
    }
    serde_json::to_vec(&body)
}

/// POSTs a JSON body with the command's idempotency key, correlation id and a Standard Webhooks
/// signature, and reads the answer.
async fn post_signed(
    request: reqwest::RequestBuilder,
    secret: Option<&[u8]>,
    id: &str,
    envelope: &CommandEnvelope,
    body: Vec<u8>,
) -> CallOutcome {
    let now = OffsetDateTime::now_utc();
    match command_request(request, secret, id, envelope, body, now).send().await {
        Err(error) => CallOutcome::Retry { error: format!("network: {error}"), retry_after: None },
        Ok(response) => {
            let status = response.status();
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| parse_retry_after(v, now));
            match response.text().await {
                Ok(text) => classify(status, retry_after, &text),
                Err(error) => CallOutcome::Retry { error: format!("reading the answer: {error}"), retry_after },
            }
        }
    }
}

/// A signed JSON POST about `envelope`: its idempotency key, correlation id and command id, the
/// caller's trace context, a Standard Webhooks signature.
pub(super) fn command_request(
    request: reqwest::RequestBuilder,
    secret: Option<&[u8]>,
    id: &str,
    envelope: &CommandEnvelope,
    body: Vec<u8>,
    now: OffsetDateTime,
) -> reqwest::RequestBuilder {
    let request = request
        .header("content-type", "application/json")
        .header("idempotency-key", envelope.idempotency_key.as_str())
        .header("x-correlation-id", envelope.correlation_id.as_str())
        .header("x-chatgate-command-id", envelope.command_id.to_string());
    // The dispatch's trace context (W3C), when traces are exported.
    let request = crate::service::telemetry::current_headers()
        .into_iter()
        .fold(request, |request, (name, value)| request.header(name, value));
    signed(request, secret, id, now, body)
}

/// Reads an executor's HTTP answer.
pub fn classify(status: StatusCode, retry_after: Option<Duration>, body: &str) -> CallOutcome {
    let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    if status.is_success() {
        if status == StatusCode::ACCEPTED {
            return CallOutcome::Delivered { working: false };
        }
        return match parsed["status"].as_str() {
            Some("succeeded") => CallOutcome::Executed { succeeded: true, detail: parsed["result"].clone() },
            Some("failed") => CallOutcome::Executed { succeeded: false, detail: error_of(&parsed) },
            Some("in_progress") => CallOutcome::Delivered { working: true },
            // `waiting` with what it waits for; an executor that says only that it waits asks the
            // command's own approvers (`ExecutionResult.waiting("approval_required")`).
            Some("waiting") => match serde_json::from_value::<Option<ApprovalWait>>(parsed["waiting"].clone()) {
                Ok(wait) => CallOutcome::Waiting(wait.unwrap_or_else(ApprovalWait::required)),
                Err(error) => CallOutcome::Executed {
                    succeeded: false,
                    detail: json!({"code": "executor_error", "message": format!("an unreadable `waiting`: {error}")}),
                },
            },
            _ => CallOutcome::Delivered { working: false },
        };
    }
    let retryable =
        status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::REQUEST_TIMEOUT;
    if retryable {
        CallOutcome::Retry { error: format!("{status}: {}", truncate(body, 300)), retry_after }
    } else {
        let error = if parsed.is_object() { parsed } else { json!({"body": truncate(body, 300)}) };
        CallOutcome::Refused { status: status.as_u16(), error }
    }
}

fn truncate(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// `request` with `body` and its Standard Webhooks headers.
pub fn signed(
    request: reqwest::RequestBuilder,
    key: Option<&[u8]>,
    id: &str,
    now: OffsetDateTime,
    body: Vec<u8>,
) -> reqwest::RequestBuilder {
    let headers = standard_webhooks::headers(key, id, now.unix_timestamp(), &body);
    headers.into_iter().fold(request, |request, (name, value)| request.header(name, value)).body(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_as_the_seed_acks() {
        let ok = |body: &str| classify(StatusCode::OK, None, body);
        assert_eq!(
            ok(r#"{"status":"succeeded","result":{"id":1}}"#),
            CallOutcome::Executed { succeeded: true, detail: json!({"id": 1}) }
        );
        let failed = ok(r#"{"status":"failed","error":{"code":"nope"}}"#);
        assert!(matches!(failed, CallOutcome::Executed { succeeded: false, detail } if detail["code"] == "nope"));
        assert_eq!(ok(r#"{"status":"in_progress"}"#), CallOutcome::Delivered { working: true });
        assert_eq!(ok(""), CallOutcome::Delivered { working: false });
        assert_eq!(classify(StatusCode::ACCEPTED, None, "{}"), CallOutcome::Delivered { working: false });
        for status in [
            StatusCode::REQUEST_TIMEOUT,
            StatusCode::TOO_MANY_REQUESTS,
            StatusCode::INTERNAL_SERVER_ERROR,
            StatusCode::BAD_GATEWAY,
        ] {
            assert!(matches!(classify(status, None, ""), CallOutcome::Retry { .. }), "{status}");
        }
        assert!(matches!(
            classify(StatusCode::UNPROCESSABLE_ENTITY, None, "{}"),
            CallOutcome::Refused { status: 422, .. }
        ));
    }
}
