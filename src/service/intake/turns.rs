//! Commands written in turns (issue #48): "refund", then "1234", then "25.00". A text message
//! from a person who is writing one is read first as its next value; "cancel" ends it; a message
//! that is itself a whole command starts that command instead. The conversation lives in the
//! database (`store::conversations`), moved with the message that moves it, so that it survives a
//! restart and any instance takes the next turn.

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;

use crate::config::IngestConfig;
use crate::domain::directory::{Actor, Tenant};
use crate::domain::message::{InboundMessage, InboundStatus, NoCommand};
use crate::domain::registry::{BrokenRule, CommandSpec, Interpretation, Missing, PlaceholderType, Registry, Turn};
use crate::domain::replies::{AskValue, Reply, TurnsEndReason, TurnsEnded};
use crate::service::engine::EngineError;
use crate::service::security::Spec;
use crate::store::{Conversation, ConversationKey, ConversationMove, InboundOutcome, NewOutboxMessage, TurnWrite};

use super::first_moves::inbound_row;
use super::{Asked, Handled, Ingress};

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

/// What a text message does in its sender's conversation.
pub(super) enum Taken {
    /// Not a turn: read as usual. `open`: the turn of the conversation found, which ends with it.
    Read { open: Option<i64> },
    /// Answered in the conversation; the move is written with the message.
    Answered { status: NoCommand, reply: Box<Reply>, change: ConversationMove },
    /// Its last value: the command, to admit; then the conversation, at `turn`, ends.
    Complete { asked: Asked, turn: i64 },
}

/// Whose conversation a message is in.
pub(super) fn key_of(message: &InboundMessage, tenant: &Tenant, actor: &Actor) -> ConversationKey {
    ConversationKey { tenant: tenant.id.clone(), actor: actor.id.clone(), channel: message.channel.clone() }
}

impl Ingress {
    /// `text` read in the conversation `key` has open, if it has one.
    pub(super) async fn take_turn(
        &self,
        text: &str,
        (tenant, key): (&Tenant, &ConversationKey),
        registry: &Arc<Registry>,
        now: OffsetDateTime,
    ) -> Result<Taken, EngineError> {
        let Some(open) = self.store().conversation(key, now).await? else { return Ok(Taken::Read { open: None }) };
        let audience = tenant.audience();
        let Some(spec) = registry.get(&open.begun.command) else { return Ok(Taken::Read { open: Some(open.turn) }) };
        if registry.is_cancel(text) {
            let ended = TurnsEnded { reason: TurnsEndReason::Cancelled, usage: spec.usage() };
            let (status, reply) = (NoCommand::TurnsEnded, Box::new(Reply::TurnsEnded(ended)));
            return Ok(Taken::Answered { status, reply, change: ConversationMove::End });
        }
        // A whole command is that command, whatever was being written.
        if matches!(registry.interpret_text_for(text, &audience), Interpretation::Command { .. }) {
            return Ok(Taken::Read { open: Some(open.turn) });
        }
        Ok(match registry.next_turn(&open.begun, text, &audience) {
            Turn::Complete(Interpretation::Command { at, args, reading, .. }) => {
                Taken::Complete { asked: Asked { spec: Spec::at(registry, at), args, reading }, turn: open.turn }
            }
            Turn::Complete(_) | Turn::Gone => Taken::Read { open: Some(open.turn) },
            Turn::Next { begun, missing } => {
                let to =
                    Conversation { begun, tries: 0, turn: open.turn + 1, expires_at: now + self.turns.idle, ..open };
                let reply = Box::new(ask(spec, &missing, tenant, None, false));
                Taken::Answered {
                    status: NoCommand::AskedValue,
                    reply,
                    change: ConversationMove::Advance { after: to.turn - 1, to },
                }
            }
            Turn::Wrong { missing, broken } => self.missed(open, (spec, tenant), &missing, broken.as_ref(), now),
        })
    }

    /// An answer that is not the value asked for: asked again, or, past the tries, the end.
    fn missed(
        &self,
        open: Conversation,
        (spec, tenant): (&CommandSpec, &Tenant),
        missing: &Missing,
        broken: Option<&BrokenRule>,
        now: OffsetDateTime,
    ) -> Taken {
        let tries = open.tries + 1;
        if tries >= self.turns.tries {
            let ended = TurnsEnded { reason: TurnsEndReason::Tries, usage: spec.usage() };
            return Taken::Answered {
                status: NoCommand::TurnsEnded,
                reply: Box::new(Reply::TurnsEnded(ended)),
                change: ConversationMove::End,
            };
        }
        let after = open.turn;
        let to = Conversation { tries, turn: after + 1, expires_at: now + self.turns.idle, ..open };
        let wrong =
            Some(broken.map_or(("type".to_owned(), None), |b| (b.rule.as_str().to_owned(), Some(b.limit.clone()))));
        let reply = Box::new(ask(spec, missing, tenant, wrong, false));
        Taken::Answered { status: NoCommand::AskedValue, reply, change: ConversationMove::Advance { after, to } }
    }

    /// The conversation `text` begins, when it names a command `actor` may ask for and leaves
    /// only values to write: its first question, and the conversation to write with the message.
    pub(super) fn begin_turns(
        &self,
        text: &str,
        (tenant, actor): (&Tenant, &Actor),
        registry: &Registry,
        now: OffsetDateTime,
    ) -> Option<(Reply, ConversationMove)> {
        let may = |spec: &CommandSpec| spec.scopes.is_subset(&actor.scopes);
        let (begun, missing) = registry.begin(text, &tenant.audience(), may)?;
        let spec = registry.get(&begun.command)?;
        let reply = ask(spec, &missing, tenant, None, true);
        let expires_at = now + self.turns.idle;
        let conversation = Conversation { begun, tries: 0, turn: 1, started_at: now, expires_at, held: None };
        Some((reply, ConversationMove::Begin(conversation)))
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

/// The question for `missing`, first or again (`wrong`: the rule the last answer broke, or `type`).
fn ask(
    spec: &CommandSpec,
    missing: &Missing,
    tenant: &Tenant,
    wrong: Option<(String, Option<String>)>,
    first: bool,
) -> Reply {
    let money = missing.kind == PlaceholderType::Money;
    let (wrong, limit) = wrong.map_or((None, None), |(rule, limit)| (Some(rule), limit));
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
