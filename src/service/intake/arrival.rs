//! What a webhook's answer says of its messages: stored in the inbox, and — when the answer
//! waits for admission (`ingest.acknowledge = "admitted"`, or Twilio's inline TwiML) — what
//! admission made of each by the time it goes out. One piece of code for every channel, so that
//! none of them answers differently under the same configuration.

use std::time::Duration;

use super::Handled;
use super::inbox::{InboxError, Received};
use crate::config::Acknowledge;
use crate::domain::message::InboundMessage;
use crate::store::Entered;

/// How long an answer waits for its messages' admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// As `ingest.acknowledge` says: not at all (`durable`), or at most `ingest.admission_wait_ms`.
    AsConfigured,
    /// Whatever the configuration, at most this and `ingest.admission_wait_ms` (an answer that
    /// carries what admission queued: Twilio's TwiML).
    AtMost(Duration),
}

/// What one message of a delivery came to when the answer went out.
#[derive(Debug)]
pub enum Arrival {
    /// Stored before (a redelivered webhook): nothing was written.
    Redelivered,
    /// Stored now; admitted behind the answer.
    Pending,
    /// Stored now and admitted before the answer (admission may still find it recorded before:
    /// `Handled::Redelivered`).
    Admitted(Handled),
}

impl Arrival {
    fn from_received(received: Received, admitted: Option<Handled>) -> Self {
        match (received.entered, admitted) {
            (Entered::Seen, _) => Self::Redelivered,
            (Entered::New(_), Some(handled)) => Self::Admitted(handled),
            (Entered::New(_), None) => Self::Pending,
        }
    }
}

/// A delivery's arrivals, counted: the figures a provider's answer reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArrivalCounts {
    /// Stored in the inbox now (pending or admitted).
    pub stored: usize,
    pub pending: usize,
    /// Admitted before the answer as a new command.
    pub commands: usize,
    /// Admitted before the answer as a repeat of a command (replayed, or in progress).
    pub duplicates: usize,
    /// Seen before: by the inbox (nothing written), or by admission.
    pub redelivered: usize,
}

impl ArrivalCounts {
    pub fn of(arrivals: &[Arrival]) -> Self {
        let mut counts = Self::default();
        for arrival in arrivals {
            match arrival {
                Arrival::Redelivered => counts.redelivered += 1,
                Arrival::Admitted(handled) if handled.is_redelivery() => counts.redelivered += 1,
                Arrival::Pending => counts.pending += 1,
                Arrival::Admitted(Handled::Command { outcome, .. }) if outcome.is_duplicate() => counts.duplicates += 1,
                Arrival::Admitted(Handled::Command { .. }) => counts.commands += 1,
                Arrival::Admitted(_) => {}
            }
            if !matches!(arrival, Arrival::Redelivered) {
                counts.stored += 1;
            }
        }
        counts
    }
}

impl super::Ingress {
    /// Stores one delivery's `messages` in the inbox together and, as `wait` says, waits for
    /// their admission (one deadline for the delivery): what each came to, in their order.
    pub async fn arrive(&self, messages: &[InboundMessage], wait: Wait) -> Result<Vec<Arrival>, InboxError> {
        let config = self.inbox().config();
        let longest = Duration::from_millis(config.admission_wait_ms);
        let bound = match wait {
            Wait::AsConfigured if config.acknowledge == Acknowledge::Durable => None,
            Wait::AsConfigured => Some(longest),
            Wait::AtMost(bound) => Some(bound.min(longest)),
        };
        let received = self.receive(messages, bound.is_some()).await?;
        let deadline = tokio::time::Instant::now() + bound.unwrap_or_default();
        let mut arrivals = Vec::with_capacity(received.len());
        for mut received in received {
            let admitted = match received.outcome.take() {
                Some(outcome) => tokio::time::timeout_at(deadline, outcome).await.ok().and_then(Result::ok),
                None => None,
            };
            arrivals.push(Arrival::from_received(received, admitted));
        }
        Ok(arrivals)
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;
    use crate::domain::lifecycle::State;
    use crate::service::intake::CommandOutcome;

    fn command(outcome: CommandOutcome) -> Arrival {
        Arrival::Admitted(Handled::Command { command_id: Uuid::nil(), outcome })
    }

    #[test]
    fn every_arrival_is_counted_once_and_only_new_ones_as_stored() {
        let arrivals = [
            Arrival::Redelivered,
            Arrival::Pending,
            command(CommandOutcome::Admitted(State::Received)),
            command(CommandOutcome::Replayed),
            command(CommandOutcome::InProgress),
            Arrival::Admitted(Handled::UnknownSender),
            Arrival::Admitted(Handled::Redelivered),
        ];
        let counts = ArrivalCounts::of(&arrivals);
        let expected = ArrivalCounts { stored: 6, pending: 1, commands: 1, duplicates: 2, redelivered: 2 };
        assert_eq!(counts, expected);
    }

    #[test]
    fn a_message_the_inbox_had_is_a_redelivery_and_one_not_admitted_in_time_is_pending() {
        let received = Received { entered: Entered::Seen, outcome: None };
        assert!(matches!(Arrival::from_received(received, None), Arrival::Redelivered));
        let received = Received { entered: Entered::New(7), outcome: None };
        assert!(matches!(Arrival::from_received(received, None), Arrival::Pending));
    }
}
