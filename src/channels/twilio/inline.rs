//! Replies carried by the answer to the provider's own webhook (Twilio's TwiML) rather than sent
//! through its API: the messages queued, held, for the conversation while it was handled are
//! claimed, rendered and recorded as sent, with evidence, before the answer goes back. A claim
//! that is not recorded ends with its lease and the outbox sends the message the usual way; the
//! only window left is an answer lost on its way to the provider after the record.

use std::time::Duration;

use time::OffsetDateTime;

use crate::domain::outbound::SendOutcome;
use crate::service::engine::Engine;
use crate::service::replies::outgoing::{record, render};
use crate::service::replies::templates::Templates;

/// The texts to answer with, in the order they were queued.
pub async fn take(
    engine: &Engine,
    templates: &Templates,
    destination: &str,
    lease: Duration,
    now: OffsetDateTime,
) -> Vec<String> {
    let store = engine.store();
    let held = match store.outbox().claim_held(destination, lease, now).await {
        Ok(held) => held,
        Err(error) => {
            // They go out through the API once the hold ends.
            tracing::warn!(%error, "cannot claim the replies held for this answer");
            return vec![];
        }
    };
    let mut texts = vec![];
    for message in &held {
        match render(templates, message, crate::channels::capabilities_of) {
            Ok(outgoing) => {
                let sent =
                    record(engine.pseudonymizer(), message, Some(&outgoing), None, &SendOutcome::SentInline, None);
                match store.outbox().record_sent(&sent, now).await {
                    Ok(()) => texts.push(outgoing.text),
                    Err(error) => tracing::warn!(%error, id = %message.id, "a reply is left to the outbox"),
                }
            }
            Err(problem) => {
                tracing::error!(id = %message.id, %problem, "a message cannot be rendered; giving it up");
                let errors = Some(serde_json::json!({"render": problem}));
                let failed = record(engine.pseudonymizer(), message, None, None, &SendOutcome::unrendered(), errors);
                if let Err(error) = store.outbox().record_given_up(&failed, &problem, now).await {
                    tracing::warn!(%error, id = %message.id, "cannot record a message given up");
                }
            }
        }
    }
    let labels = [("channel", "twilio"), ("outcome", "sent_inline")];
    metrics::counter!("chatgate_outbound_messages_total", &labels).increment(texts.len() as u64);
    texts
}
