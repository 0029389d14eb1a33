//! Ingress: channel adapters turn provider webhooks into [`InboundMessage`]s; [`Ingress`] routes
//! each to its tenant and actor, interprets it through the registry and admits the command, all
//! in one transaction per message. Adapters never touch the database themselves.

use std::sync::Arc;

use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::{Args, CommandRequest, ExternalId, IdempotencyClass, Intent};
use crate::domain::directory::{Actor, Tenant, UnknownSenderPolicy};
use crate::domain::lifecycle::State;
use crate::domain::message::{Content, InboundMessage, StatusUpdate};
use crate::domain::registry::{CommandSpec, Interpretation};
use crate::service::confirmations::answers::{self, AnswerOutcome, Answering};
use crate::service::confirmations::confirm::Answer;
use crate::service::engine::{Admission, Engine, EngineError};
use crate::service::ooc;
use crate::service::security::Policy;
use crate::store::{
    Admitted, DeliveryStatus, InboundOutcome, NewOutboxMessage, ReplyTo, Store, StoreError, StoredCommand,
};

mod first_moves;
mod throttled;

pub use first_moves::reply_destination;
use first_moves::{conversation_id, first_moves, inbound_row, reply_address};
use throttled::Throttled;

/// The per-message warnings a flood would repeat, at most one a second each.
static RATE_LIMITED: Throttled = Throttled::new();
static UNROUTABLE: Throttled = Throttled::new();

/// What reprocessing a stored message came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Reprocessed {
    Command(Uuid),
    /// Under the current registry and directory the message starts no command (why).
    NotACommand(&'static str),
}

/// What became of one inbound message.
#[derive(Debug, Clone, PartialEq)]
pub enum Handled {
    /// Seen before (a redelivered webhook): nothing new was written.
    Redelivered,
    /// Sent to a number no tenant owns: stored as unroutable.
    Unroutable,
    /// From someone the tenant does not list: refused (with a reply) or ignored, per policy.
    UnknownSender,
    /// Not a command (help, no match, ambiguous, media, reactions): stored, answered when useful.
    NotACommand { status: &'static str },
    /// A command was admitted, or the message repeated one (IDS replay / in progress).
    Command { command_id: Uuid, outcome: CommandOutcome },
    /// A different command under a taken key (only possible with caller-supplied keys).
    Conflict,
    /// An answer to a confirmation.
    Answer(AnswerOutcome),
    /// Over the actor's or the tenant's rate limit: stored, not acted on.
    RateLimited,
}

/// What a message that names a command came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandOutcome {
    /// A new command, in the state its first moves left it.
    Admitted(State),
    /// The same command again after it ended: its outcome is replayed (IDS).
    Replayed,
    /// The same command again while it runs: "in progress" (IDS).
    InProgress,
}

impl CommandOutcome {
    pub fn is_duplicate(self) -> bool {
        !matches!(self, Self::Admitted(_))
    }
}

impl Handled {
    /// The message was seen before (a redelivered webhook, or a repeated answer): nothing new.
    pub fn is_redelivery(&self) -> bool {
        matches!(self, Self::Redelivered | Self::Answer(AnswerOutcome::Redelivered))
    }

    /// What admitting a message's command came to.
    fn admitted(admitted: Admitted) -> Self {
        match admitted {
            Admitted::New { command_id, lifecycle, .. } => {
                Self::Command { command_id, outcome: CommandOutcome::Admitted(lifecycle.state) }
            }
            Admitted::Replayed(d) => Self::Command { command_id: d.command_id, outcome: CommandOutcome::Replayed },
            Admitted::InProgress(d) => Self::Command { command_id: d.command_id, outcome: CommandOutcome::InProgress },
            Admitted::Conflict { .. } => Self::Conflict,
            Admitted::Redelivered { .. } => Self::Redelivered,
        }
    }

    /// The `outcome` label of `chatgate_inbound_messages_total`.
    pub fn outcome(&self) -> &'static str {
        match self {
            Self::Redelivered => "redelivered",
            Self::Unroutable => "unroutable",
            Self::UnknownSender => "unknown_sender",
            Self::NotACommand { status } => status,
            Self::Command { outcome, .. } if outcome.is_duplicate() => "duplicate",
            Self::Command { .. } => "command",
            Self::Conflict => "conflict",
            Self::Answer(AnswerOutcome::Redelivered) => "redelivered",
            Self::Answer(_) => "answer",
            Self::RateLimited => "rate_limited",
        }
    }
}

#[derive(Clone)]
pub struct Ingress {
    engine: Engine,
    policy: Policy,
    stored: Arc<dyn StoredMessages>,
}

impl std::fmt::Debug for Ingress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ingress").finish_non_exhaustive()
    }
}

impl Ingress {
    pub fn new(engine: Engine, policy: Policy, stored: Arc<dyn StoredMessages>) -> Self {
        Self { engine, policy, stored }
    }

    /// A stored message read again (see [`StoredMessages`]).
    pub fn reread(&self, channel: &str, raw: &Value, conversation: &ExternalId) -> Option<InboundMessage> {
        self.stored.reread(channel, raw, conversation)
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    fn store(&self) -> &Store {
        self.engine.store()
    }

    /// Handles one message: at most one transaction, so a redelivery finds it done or not done.
    /// Every outcome is counted in `chatgate_inbound_messages_total{channel, outcome}`.
    pub async fn handle(&self, message: &InboundMessage, now: OffsetDateTime) -> Result<Handled, EngineError> {
        let handled = self.handle_uncounted(message, now).await?;
        let labels = [("channel", message.channel.to_string()), ("outcome", handled.outcome().to_owned())];
        metrics::counter!("chatgate_inbound_messages_total", &labels).increment(1);
        Ok(handled)
    }

    async fn handle_uncounted(&self, message: &InboundMessage, now: OffsetDateTime) -> Result<Handled, EngineError> {
        let Some(tenant) = self.policy.directory.tenant_for_number(&message.to) else {
            if let Some(held) = UNROUTABLE.admit_now() {
                let id = &message.provider_message_id;
                tracing::warn!(to = %message.to, %id, held, "message to an unknown number stored as unroutable");
            }
            return self.record(message, None, "unroutable", &[], Handled::Unroutable, now).await;
        };
        let reply_to = reply_address(message, tenant);
        let Some(actor) = tenant.actor(&message.from) else {
            let (status, replies) = match tenant.unknown_sender {
                UnknownSenderPolicy::Refuse => {
                    ("refused_unknown_sender", vec![reply_to.message("rejected", json!({"reason": "unknown_sender"}))])
                }
                UnknownSenderPolicy::Ignore => ("ignored_unknown_sender", vec![]),
            };
            return self.record(message, Some(tenant), status, &replies, Handled::UnknownSender, now).await;
        };
        // IDS §XV: every message counts, repeats included; over the limit it is kept, not acted
        // on, and not answered (answering a flood would only double it).
        let limits = &self.policy.security.limits;
        let verdict = limits.inbound_shared(self.engine.store(), tenant.id.as_str(), actor.id.as_str(), now).await?;
        if let Err(wait) = verdict {
            if let Some(held) = RATE_LIMITED.admit_now() {
                tracing::warn!(tenant = %tenant.id, ?wait, held, "inbound rate limit reached");
            }
            return self.record(message, Some(tenant), "rate_limited", &[], Handled::RateLimited, now).await;
        }
        if let Some(answer) = Answer::parse(&message.content) {
            let inbound = inbound_row(message, Some(tenant), "answer", now);
            let who = Answering {
                tenant_id: &tenant.id,
                actor_id: &actor.id,
                reply_to: &reply_to,
                inbound: &inbound,
                policy: &self.policy,
            };
            return Ok(Handled::Answer(answers::handle(&self.engine, &who, &answer, now).await?));
        }
        self.interpret(message, tenant, actor, reply_to, now).await
    }

    /// A message from a known actor that is not an answer: a command, help, or nothing.
    async fn interpret(
        &self,
        message: &InboundMessage,
        tenant: &Tenant,
        actor: &Actor,
        reply_to: ReplyTo,
        now: OffsetDateTime,
    ) -> Result<Handled, EngineError> {
        // Not a request (a reaction, a notice, an unreadable message): answering would be noise.
        if let Some(status) = message.content.unanswered() {
            return self.record(message, Some(tenant), status, &[], Handled::NotACommand { status }, now).await;
        }
        let interpretation = match &message.content {
            Content::Text(text) => self.policy.registry.interpret_text(text),
            Content::Reply { id, .. } => self.policy.registry.interpret_reply_id(id),
            other => {
                let vars = json!({"unsupported": other.kind(), "commands": self.help(actor)});
                let replies = [reply_to.message("help", vars)];
                let handled = Handled::NotACommand { status: "not_a_command" };
                return self.record(message, Some(tenant), "not_a_command", &replies, handled, now).await;
            }
        };
        match interpretation {
            Interpretation::Command { spec, args } => {
                self.admit(message, tenant, actor, spec, args, reply_to, now).await
            }
            Interpretation::Help | Interpretation::NoMatch => {
                let status = if interpretation == Interpretation::Help { "help" } else { "no_match" };
                let replies = [reply_to.message("help", json!({"commands": self.help(actor)}))];
                self.record(message, Some(tenant), status, &replies, Handled::NotACommand { status }, now).await
            }
            Interpretation::Ambiguous(specs) => {
                let candidates: Vec<String> = specs.iter().map(|s| s.usage()).collect();
                let vars = json!({"reason": "ambiguous", "candidates": candidates});
                let replies = [reply_to.message("rejected", vars)];
                let handled = Handled::NotACommand { status: "ambiguous" };
                self.record(message, Some(tenant), "ambiguous", &replies, handled, now).await
            }
        }
    }

    fn help(&self, actor: &Actor) -> Vec<String> {
        self.policy.registry.help_lines(&actor.scopes)
    }

    /// Stores a message that starts no command, with its replies, once.
    async fn record(
        &self,
        message: &InboundMessage,
        tenant: Option<&Tenant>,
        status: &str,
        replies: &[NewOutboxMessage],
        handled: Handled,
        now: OffsetDateTime,
    ) -> Result<Handled, EngineError> {
        let inbound = inbound_row(message, tenant, status, now);
        match self.store().inbound().record(&inbound, replies).await? {
            InboundOutcome::FirstSeen { .. } => Ok(handled),
            InboundOutcome::Duplicate { .. } => Ok(Handled::Redelivered),
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn admit(
        &self,
        message: &InboundMessage,
        tenant: &Tenant,
        actor: &Actor,
        spec: &CommandSpec,
        args: Args,
        reply_to: ReplyTo,
        now: OffsetDateTime,
    ) -> Result<Handled, EngineError> {
        self.admit_as(message, tenant, actor, spec, args, reply_to, None, now).await
    }

    /// `admit`, or, with `reprocess_of`, the same message admitted again as a new command that
    /// names the old one: no transport dedupe (the message is recorded already) and no key
    /// reservation (the old command holds the key).
    #[allow(clippy::too_many_arguments)]
    async fn admit_as(
        &self,
        message: &InboundMessage,
        tenant: &Tenant,
        actor: &Actor,
        spec: &CommandSpec,
        args: Args,
        reply_to: ReplyTo,
        reprocess_of: Option<&StoredCommand>,
        now: OffsetDateTime,
    ) -> Result<Handled, EngineError> {
        let target =
            spec.target_arg.as_ref().and_then(|name| args.get(name)).and_then(Value::as_str).map(str::to_owned);
        let request = CommandRequest {
            tenant_id: tenant.id.clone(),
            actor_id: actor.id.clone(),
            channel: message.channel.clone(),
            conversation_id: conversation_id(message),
            message_ids: vec![message.provider_message_id.clone()],
            correlation_id: reprocess_of.map(|t| t.envelope.correlation_id.clone()),
            causation_id: reprocess_of.map(|t| ExternalId::from_uuid(t.envelope.command_id)),
            intent: Intent { entity: spec.entity.clone(), action: spec.action.clone(), target },
            args: args.clone(),
            command_kind: spec.kind,
            idempotency_class: if reprocess_of.is_some() { IdempotencyClass::I0 } else { spec.idempotency_class },
            risk: spec.risk,
            supplied_key: None,
            ttl: Some(spec.ttl),
            dedupe_window: spec.dedupe_window,
            target_command_id: reprocess_of.map(|t| t.envelope.command_id),
        };
        let (command, what) = (Some(spec.name.clone()), Some(spec.reads(&args)));
        let reply_to = ReplyTo { command, what, executed_template: spec.reply.clone(), ..reply_to };
        // A reprocessed message is not asked anything: its command goes where the first one went.
        let refused = match reprocess_of {
            None => ooc::precheck(self.store(), &self.policy, &tenant.id, actor, spec, &args).await?,
            Some(_) => None,
        };
        let first = first_moves(spec, &actor.scopes, &args, &reply_to, refused, now);
        let admission = Admission {
            then: first.events,
            decision: first.decision,
            reason_code: first.reason_code.map(str::to_owned),
            inbound: reprocess_of.is_none().then(|| inbound_row(message, Some(tenant), "received", now)),
            outbox: first.outbox,
            reply_to: Some(reply_to),
            confirmation: first.confirmation,
            reply_vars: first.reply_vars,
        };
        let (_, admitted) = self.engine.accept_with(request, admission, now).await?;
        Ok(Handled::admitted(admitted))
    }

    /// Reprocessing (a recovery action): `target`'s stored message interpreted again under the
    /// current registry and directory, and admitted as a new command naming `target`.
    pub async fn reprocess(
        &self,
        target: &StoredCommand,
        message: &InboundMessage,
        now: OffsetDateTime,
    ) -> Result<Reprocessed, EngineError> {
        let Some(tenant) =
            self.policy.directory.tenant_for_number(&message.to).filter(|t| t.id == target.envelope.tenant_id)
        else {
            return Ok(Reprocessed::NotACommand("unroutable"));
        };
        let Some(actor) = tenant.actor(&message.from) else { return Ok(Reprocessed::NotACommand("unknown_sender")) };
        let interpretation = match &message.content {
            Content::Text(text) => self.policy.registry.interpret_text(text),
            Content::Reply { id, .. } => self.policy.registry.interpret_reply_id(id),
            _ => return Ok(Reprocessed::NotACommand("not_a_command")),
        };
        let Interpretation::Command { spec, args } = interpretation else {
            return Ok(Reprocessed::NotACommand("no_match"));
        };
        let reply_to = reply_address(message, tenant);
        match self.admit_as(message, tenant, actor, spec, args, reply_to, Some(target), now).await? {
            Handled::Command { command_id, .. } => Ok(Reprocessed::Command(command_id)),
            _ => Ok(Reprocessed::NotACommand("not_admitted")),
        }
    }

    /// A delivery status for a message we sent: updates its delivery record.
    pub async fn handle_status(&self, status: &StatusUpdate, now: OffsetDateTime) -> Result<(), StoreError> {
        let Some(delivery) = DeliveryStatus::parse(&status.status) else {
            tracing::debug!(status = %status.status, "status not tracked");
            return Ok(());
        };
        let found = self
            .store()
            .inbound()
            .record_delivery_status(&status.channel, &status.provider_message_id, delivery, status.errors.as_ref(), now)
            .await?;
        let labels = [
            ("channel", status.channel.to_string()),
            ("status", delivery.as_str().to_owned()),
            ("matched", found.to_string()),
        ];
        metrics::counter!("chatgate_delivery_statuses_total", &labels).increment(1);
        if !found {
            tracing::debug!(id = %status.provider_message_id, "status for a message this gateway did not send");
        }
        Ok(())
    }
}

/// Reads a stored message (as `Store::message_of` returns it) back into the message it was, for
/// reprocessing. Each channel knows its own stored form, and channels sit above this layer, so
/// the composition root hands intake a reader (`channels::StoredMessageReader`).
/// `conversation` is the command's (`{channel}:{business number}:{person}`).
pub trait StoredMessages: Send + Sync {
    fn reread(&self, channel: &str, raw: &Value, conversation: &ExternalId) -> Option<InboundMessage>;
}
