//! The preview phase of the executor contract (issue #47, docs/EXECUTORS.md): before a person is
//! asked to confirm a mutation whose registry entry says `preview`, its executor is asked what the
//! command would do. Over HTTP, a signed POST of the envelope to the executor's `preview_url`,
//! answered at once, within `preview_timeout_ms`; the answer is read by
//! [`crate::domain::preview::read_answer`] (bounded, for this command only). An executor without
//! a preview phase has none to give, and the command goes on as its rule says. On RabbitMQ, a
//! `command.{agent}.{action}.preview` event; the agent's `.previewed` comes back on the gateway's
//! queue, and the request's row, due again after `preview_timeout_ms`, says whether it came.

use reqwest::StatusCode;
use time::OffsetDateTime;
use uuid::Uuid;

use futures_util::future::join_all;

use crate::domain::command::{CommandEnvelope, TenantId};
use crate::domain::lifecycle::State;
use crate::domain::preview::{MAX_ANSWER_BYTES, PreviewAnswer, PreviewFault, read_answer};
use crate::executors::bus::bloodbank;
use crate::executors::dispatcher::Dispatcher;
use crate::executors::executor::{Executor, command_request};
use crate::executors::jetstream::cloudevents;
use crate::service::dispatch::handover::{ClaimedMessage, OutboxSettle};
use crate::service::dispatch::{PREVIEW_KIND, is_again};
use crate::service::engine::EngineError;
use crate::service::previews;

impl Dispatcher {
    /// Claims and asks one batch of preview requests, side by side (a person waits for each
    /// prompt), and moves each command on with its answer; returns how many were claimed. A
    /// preview is asked once: one that fails or times out leads where the command's rule says,
    /// never to a retry behind which the person waits. A crash between the answer and its step
    /// leaves the row to be claimed again when its lease ends, and the preview asked again.
    pub async fn preview_due(&self, now: OffsetDateTime) -> Result<usize, EngineError> {
        let handover = self.engine().database().handover();
        let claimed = handover.claim(PREVIEW_KIND, self.batch_limit(), self.lease(), now).await?;
        let asked = join_all(claimed.iter().map(|row| self.preview_one(row))).await;
        for (row, result) in claimed.iter().zip(asked) {
            if let Err(error) = result {
                tracing::warn!(%error, id = %row.id, "preview not recorded; it is asked again when its lease ends");
            }
        }
        Ok(claimed.len())
    }

    async fn preview_one(&self, row: &ClaimedMessage) -> Result<(), EngineError> {
        let handover = self.engine().database().handover();
        let command = match (row.command_id, TenantId::parse(&row.tenant_id)) {
            (Some(id), Ok(tenant)) => self.engine().reads().command(&tenant, id).await?,
            _ => None,
        };
        let Some(command) = command else {
            let dead = OutboxSettle::Dead { id: row.id, error: "a preview request without its command".into() };
            return Ok(handover.settle(&dead, OffsetDateTime::now_utc()).await?);
        };
        let spec = self.policy().known_spec_of(&command);
        if is_again(&row.payload) {
            if let (State::Failed, Some(spec)) = (command.lifecycle.state, &spec) {
                previews::ask_again(self.engine(), spec, &command, OffsetDateTime::now_utc()).await?;
            }
            return Ok(handover.settle(&OutboxSettle::Done(row.id), OffsetDateTime::now_utc()).await?);
        }
        // Answered before (a row claimed again after its step), or the command ended meanwhile.
        if command.lifecycle.state != State::Canonicalized {
            return Ok(handover.settle(&OutboxSettle::Done(row.id), OffsetDateTime::now_utc()).await?);
        }
        let now = OffsetDateTime::now_utc();
        let outcome = match self.target(&row.destination) {
            None => Err(PreviewFault::NotOffered),
            // Asked on the bus before, and not answered in time (an answer moves the command).
            Some(target) if target.executor.previews_later() && row.attempt > 1 => {
                Err(PreviewFault::Unavailable("no answer in time".into()))
            }
            Some(target) => match target.executor.preview(&command.envelope, row.id).await {
                PreviewCall::Answered(outcome) => outcome,
                PreviewCall::Published => {
                    let error = "waiting for the agent's preview".to_owned();
                    let wait = OutboxSettle::Retry { id: row.id, at: now + target.preview_timeout, error };
                    return Ok(handover.settle(&wait, now).await?);
                }
            },
        };
        let done = Some(OutboxSettle::Done(row.id));
        previews::settle(self.engine(), spec.as_ref(), &command, outcome, done, OffsetDateTime::now_utc()).await
    }
}

/// What asking for a preview came to: the answer (HTTP answers at once), or a request published
/// on the bus, whose answer the listener applies when it comes.
pub enum PreviewCall {
    Answered(Result<PreviewAnswer, PreviewFault>),
    Published,
}

impl Executor {
    /// Asks for `envelope`'s preview; `request` names this request (the same on every try: the
    /// Standard Webhooks message id, the bus event's id).
    pub async fn preview(&self, envelope: &CommandEnvelope, request: Uuid) -> PreviewCall {
        let published = match self {
            Self::Http { .. } => return PreviewCall::Answered(self.preview_over_http(envelope, request).await),
            Self::Shop(shop) => return PreviewCall::Answered(Ok(shop.preview(envelope))),
            Self::Amqp { bus, agent, .. } => {
                let event = bloodbank::preview_event(agent, envelope, request, &bus.host, OffsetDateTime::now_utc());
                bus.publish(&event).await
            }
            Self::Nats { stream, agent } => {
                let address = (request, stream.preview_subject());
                let event = cloudevents::invocation_preview(agent, envelope, address, OffsetDateTime::now_utc());
                stream.publish_on(stream.preview_subject(), &event).await
            }
            _ => return PreviewCall::Answered(Err(PreviewFault::NotOffered)),
        };
        match published {
            Ok(()) => PreviewCall::Published,
            Err(error) => PreviewCall::Answered(Err(PreviewFault::Unavailable(error))),
        }
    }

    /// Whether its preview answers come later, on the bus, rather than with the request.
    fn previews_later(&self) -> bool {
        matches!(self, Self::Amqp { .. } | Self::Nats { .. })
    }

    async fn preview_over_http(
        &self,
        envelope: &CommandEnvelope,
        request: Uuid,
    ) -> Result<PreviewAnswer, PreviewFault> {
        let Self::Http { secret, client, preview: Some((url, timeout)), .. } = self else {
            return Err(PreviewFault::NotOffered);
        };
        let body = serde_json::to_vec(envelope).map_err(|e| PreviewFault::Malformed(e.to_string()))?;
        let id = format!("msg_{}", request.simple());
        let now = OffsetDateTime::now_utc();
        let post = client.post(url).timeout(*timeout).header("x-chatgate-phase", "preview");
        let sent = command_request(post, secret.as_deref(), &id, envelope, body, now).send().await;
        let mut response = sent.map_err(|e| PreviewFault::Unavailable(unreached(&e)))?;
        let status = response.status();
        let mut body = Vec::new();
        // Read no more than an answer may hold: an executor that sends more is refused unread.
        while let Some(chunk) = response.chunk().await.map_err(|e| PreviewFault::Unavailable(unreached(&e)))? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_ANSWER_BYTES {
                return Err(PreviewFault::Oversized(format!("an answer of more than {MAX_ANSWER_BYTES} bytes")));
            }
        }
        read_status(status, &body, envelope.command_id)
    }
}

/// A success or a refusal (4xx with a refusal's body) is read as an answer; anything else means
/// the preview is not available now.
fn read_status(status: StatusCode, body: &[u8], command_id: Uuid) -> Result<PreviewAnswer, PreviewFault> {
    if status.is_success() {
        return read_answer(body, command_id);
    }
    if status.is_client_error()
        && let Ok(refused @ PreviewAnswer::Refused(_)) = read_answer(body, command_id)
    {
        return Ok(refused);
    }
    Err(PreviewFault::Unavailable(format!("the executor answered {status}")))
}

fn unreached(error: &reqwest::Error) -> String {
    if error.is_timeout() { "no answer in time".to_owned() } else { format!("not reached: {error}") }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn refusals_come_with_a_client_error_and_anything_else_is_unavailable() {
        let id = Uuid::now_v7();
        let refusal = json!({"command_id": id, "status": "refused", "error": {"code": "no"}}).to_string();
        assert!(matches!(read_status(StatusCode::CONFLICT, refusal.as_bytes(), id), Ok(PreviewAnswer::Refused(_))));
        let fault = |status, body: &str| read_status(status, body.as_bytes(), id).expect_err("a fault").code();
        assert_eq!(fault(StatusCode::BAD_REQUEST, "{}"), "preview_unavailable");
        assert_eq!(fault(StatusCode::SERVICE_UNAVAILABLE, &refusal), "preview_unavailable");
        assert_eq!(fault(StatusCode::OK, "{}"), "preview_malformed");
    }
}
