//! Commands written in turns (issue #48): "refund", then "1234", then "25.00", each message read
//! in its sender's conversation by `Registry::step` (a value asked for, taken or missed; "cancel";
//! a whole command instead), and what a step writes, here. The conversation lives in the
//! database (`store::conversations`), moved with the message that moves it, so that it survives a
//! restart and any instance takes the next turn.

use std::time::Duration;

use time::OffsetDateTime;

use crate::config::IngestConfig;
use crate::domain::directory::{Actor, Tenant};
use crate::domain::message::{InboundMessage, InboundStatus, NoCommand};
use crate::domain::registry::{CommandSpec, Missed, Missing, Open, PlaceholderType, Registry, Step};
use crate::domain::replies::{AskValue, Reply, TurnsEnded};
use crate::service::engine::EngineError;
use crate::store::{Conversation, ConversationKey, ConversationMove, InboundOutcome, NewOutboxMessage, TurnWrite};

use super::first_moves::inbound_row;
use super::{Handled, Ingress};

/// How long a conversation waits, how many missed answers it takes, and how long its question
/// waits for a next message sent in the same burst.
#[derive(Debug, Clone, Copy)]
pub struct Turns {
    pub idle: Duration,
    pub tries: u32,
    pub burst: Duration,
}

impl From<&IngestConfig> for Turns {
    fn from(ingest: &IngestConfig) -> Self {
        Self {
            idle: Duration::from_secs(ingest.conversation_idle_secs),
            tries: ingest.conversation_tries.max(1),
            burst: Duration::from_millis(ingest.conversation_burst_ms),
        }
    }
}

/// What a step within a conversation writes: the message's outcome, its reply, and the move.
pub(super) struct TurnAnswer {
    pub(super) status: NoCommand,
    pub(super) reply: Reply,
    pub(super) change: ConversationMove,
}

impl Ingress {
    /// What `text` from `actor` is in their conversation on its channel (`key`), and the
    /// conversation it was read in, if one was open.
    pub(super) async fn step<'r>(
        &self,
        text: &str,
        (tenant, actor, key): (&Tenant, &Actor, &ConversationKey),
        registry: &'r Registry,
        now: OffsetDateTime,
    ) -> Result<(Step<'r>, Option<Conversation>), EngineError> {
        let open = self.open_conversation(key, now).await?;
        let may = |spec: &CommandSpec| spec.scopes.is_subset(&actor.scopes);
        let reading = open.as_ref().map(|c| Open { begun: &c.begun, tries: c.tries });
        let step = registry.step(reading, text, &tenant.audience(), may, self.turns.tries);
        Ok((step, open))
    }

    /// The answer and the move of a step that asks for a value or ends the conversation (`None`
    /// for the others, which are read as commands or as no command).
    pub(super) fn turn_answer(
        &self,
        step: &Step<'_>,
        open: Option<&Conversation>,
        (registry, tenant): (&Registry, &Tenant),
        now: OffsetDateTime,
    ) -> Option<TurnAnswer> {
        let expires_at = now + self.turns.idle;
        match step {
            Step::Ask { begun, missing, first, tries, missed } => {
                let spec = registry.get(&begun.command)?;
                let reply = ask(spec, missing, tenant, missed.as_ref(), *first);
                let to = |turn, started_at| Conversation {
                    begun: begun.clone(),
                    tries: *tries,
                    turn,
                    started_at,
                    expires_at,
                    held: None,
                };
                let change = match open {
                    Some(open) => {
                        ConversationMove::Advance { after: open.turn, to: to(open.turn + 1, open.started_at) }
                    }
                    None => ConversationMove::Begin(to(1, now)),
                };
                Some(TurnAnswer { status: NoCommand::AskedValue, reply, change })
            }
            Step::Ended(ending) => {
                let usage = registry.get(&open?.begun.command).map_or_else(String::new, CommandSpec::usage);
                let reply = Reply::TurnsEnded(TurnsEnded { reason: *ending, usage });
                Some(TurnAnswer { status: NoCommand::TurnsEnded, reply, change: ConversationMove::End })
            }
            Step::Alone(_) | Step::Complete(_) => None,
        }
    }

    /// Stores a message that moved its sender's conversation, with its reply and the move, once. A
    /// question is held for the burst window: the person's next message, if it comes first,
    /// withdraws it, and only the last question (or the prompt) of a burst is sent.
    pub(super) async fn answer_turn(
        &self,
        (message, tenant, key): (&InboundMessage, &Tenant, &ConversationKey),
        (status, reply): (NoCommand, NewOutboxMessage),
        change: &ConversationMove,
        now: OffsetDateTime,
    ) -> Result<Handled, EngineError> {
        let inbound = inbound_row(message, Some(tenant), InboundStatus::NoCommand(status), now);
        let question = (status == NoCommand::AskedValue && !self.turns.burst.is_zero()).then(|| NewOutboxMessage {
            hold: Some(reply.hold.unwrap_or_default().max(self.turns.burst)),
            ..reply.clone()
        });
        let replies = if question.is_some() { vec![] } else { vec![reply] };
        let turn = TurnWrite { key, change, question: question.as_ref() };
        match self.store().inbound().record_turn(&inbound, &replies, Some(turn)).await? {
            InboundOutcome::FirstSeen { .. } => Ok(Handled::NotACommand { status }),
            InboundOutcome::Duplicate { .. } => Ok(Handled::Redelivered),
        }
    }

    /// Ends the conversation at `turn` after its command, or a whole one, was admitted.
    pub(super) async fn end_turns(
        &self,
        key: &ConversationKey,
        turn: Option<i64>,
        now: OffsetDateTime,
    ) -> Result<(), EngineError> {
        if let Some(turn) = turn {
            self.store().end_conversation(key, turn, now).await?;
        }
        Ok(())
    }
}

/// The question for `missing`, first or again (`missed`: why the last answer was not it).
fn ask(spec: &CommandSpec, missing: &Missing, tenant: &Tenant, missed: Option<&Missed>, first: bool) -> Reply {
    let money = missing.kind == PlaceholderType::Money;
    let (wrong, limit) = match missed {
        None => (None, None),
        Some(Missed::NotOfItsType) => (Some("type".to_owned()), None),
        Some(Missed::Broken(broken)) => (Some(broken.rule.as_str().to_owned()), Some(broken.limit.clone())),
    };
    Reply::AskValue(AskValue {
        command: spec.name.clone(),
        value: missing.name.clone(),
        kind: missing.kind.as_str().to_owned(),
        question: spec.question(&missing.name, &tenant.locale).map(str::to_owned),
        currency: tenant.currency.clone().filter(|_| money),
        first,
        wrong,
        limit,
    })
}
