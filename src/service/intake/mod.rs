//! Ingress: channel adapters turn provider webhooks into [`InboundMessage`]s; [`Ingress`] routes
//! each to its tenant and actor, interprets it through the registry and admits the command, all
//! in one transaction per message. Adapters never touch the database themselves.

use std::sync::Arc;

use serde_json::Value;
use time::OffsetDateTime;

use crate::domain::command::{Args, ExternalId};
use crate::domain::directory::{Actor, Tenant, UnknownSenderPolicy};
use crate::domain::locks::Resource;
use crate::domain::message::{InboundMessage, InboundStatus, NoCommand, StatusUpdate};
use crate::domain::registry::Reading;
use crate::domain::replies::{Rejection, RejectionReason, Reply};
use crate::service::confirmations::answers::{self, Answering};
use crate::service::confirmations::confirm::Answer;
use crate::service::directory::Standing;
use crate::service::engine::{Admission, Engine, EngineError};
use crate::service::live::Live;
use crate::service::replies::templates::Templates;
use crate::service::security::ratelimit::Budget;
use crate::service::security::{Policy, Spec};
use crate::store::{InboundOutcome, NOTICE_KIND, NewOutboxMessage, ReplyTo, Store, StoreError, StoredCommand};

mod admission;
mod ahead;
mod approval_taps;
mod arrival;
mod corrections;
mod first_moves;
mod from_above;
mod handled;
mod identity;
pub mod inbox;
mod interpret;
mod links;
mod lookups;
mod reprocess;
mod throttled;
mod turns;
mod unadmitted;

pub use crate::domain::message::MessageOutcome;
pub use crate::store::{Admitted, ClaimedLookup, InboxEntry, NewInbound, Released};
pub use arrival::{Arrival, ArrivalCounts, Wait};
pub use from_above::{Precheck, Refused, StoredMessages, ToCheck};
pub use handled::{CommandOutcome, Handled};
pub use reprocess::Reprocessed;
pub use turns::Turns;

use approval_taps::ApprovalTap;
pub use first_moves::reply_destination;
use first_moves::{Asking, command_request, first_moves, inbound_row, reply_address};
use identity::Writer;
use throttled::Throttled;

/// The per-message warnings a flood would repeat, at most one a second each.
static RATE_LIMITED: Throttled = Throttled::new();
static UNROUTABLE: Throttled = Throttled::new();

/// The command a message asks for: its registry entry, its values, and how it was read.
struct Asked {
    spec: Spec,
    args: Args,
    reading: Reading,
}

#[derive(Clone)]
pub struct Ingress {
    engine: Engine,
    policy: Policy,
    stored: Arc<dyn StoredMessages>,
    precheck: Arc<dyn Precheck>,
    inbox: inbox::Inbox,
    /// The reply templates, for a channel that answers in its webhook's own response (Twilio).
    templates: Live<Templates>,
    /// How commands written in turns wait and how many missed answers they take.
    turns: Turns,
    /// The conversations read ahead for the admission pass under way.
    ahead: ahead::ReadAhead,
}

impl std::fmt::Debug for Ingress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ingress").finish_non_exhaustive()
    }
}

impl Ingress {
    pub fn new(
        engine: Engine,
        policy: Policy,
        (stored, precheck): (Arc<dyn StoredMessages>, Arc<dyn Precheck>),
        (inbox, templates, turns): (inbox::Inbox, Live<Templates>, Turns),
    ) -> Self {
        Self { engine, policy, stored, precheck, inbox, templates, turns, ahead: Default::default() }
    }

    /// The reply templates now (a reload after this does not change what the caller holds).
    pub fn templates(&self) -> Arc<Templates> {
        self.templates.get()
    }

    pub fn inbox(&self) -> &inbox::Inbox {
        &self.inbox
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
    /// `released` says what let it go when it was parked for the tenant's identity resolver.
    /// Every outcome is counted in `chatgate_inbound_messages_total{channel, outcome}`.
    pub async fn handle(
        &self,
        message: &InboundMessage,
        released: Option<Released>,
        now: OffsetDateTime,
    ) -> Result<Handled, EngineError> {
        let handled = self.handle_uncounted(message, released, now).await?;
        let labels = [("channel", message.channel.to_string()), ("outcome", handled.outcome().as_str().to_owned())];
        metrics::counter!("chatgate_inbound_messages_total", &labels).increment(1);
        Ok(handled)
    }

    async fn handle_uncounted(
        &self,
        message: &InboundMessage,
        released: Option<Released>,
        now: OffsetDateTime,
    ) -> Result<Handled, EngineError> {
        let tenants = self.policy.tenants.get();
        let Some(tenant) = tenants.tenant_for_number(&message.to) else {
            if let Some(held) = UNROUTABLE.admit_now() {
                let id = &message.provider_message_id;
                tracing::warn!(to = %message.to, %id, held, "message to an unknown number stored as unroutable");
            }
            return self.record(message, None, InboundStatus::Unroutable, &[], Handled::Unroutable, now).await;
        };
        // A message that cannot be read is kept and never answered, whoever sent it (its sender
        // may be the part that could not be read).
        if message.content.unreadable_reason().is_some() {
            return self.no_command(message, tenant, NoCommand::Unreadable, &[], now).await;
        }
        let writer = self.who_wrote(message, tenant, released, now).await?;
        self.handle_as(message, tenant, writer, now).await
    }

    /// A message from `writer`: kept for the resolver, a stranger's, or a person's.
    async fn handle_as(
        &self,
        message: &InboundMessage,
        tenant: &Tenant,
        writer: Writer,
        now: OffsetDateTime,
    ) -> Result<Handled, EngineError> {
        let reply_to = reply_address(message, tenant);
        let actor = match writer {
            Writer::Wait => return self.wait(message, tenant, now).await,
            Writer::Stranger => return self.handle_stranger(message, tenant, &reply_to, now).await,
            Writer::Known(actor) => actor,
        };
        // IDS §XV: every message counts, repeats included; over the limit it is kept, not acted
        // on, and not answered (answering a flood would only double it).
        let limits = &self.policy.security.limits;
        let verdict = limits.inbound_shared(self.engine.store(), tenant.id.as_str(), actor.id.as_str(), now).await?;
        if let Err(wait) = verdict {
            if let Some(held) = RATE_LIMITED.admit_now() {
                tracing::warn!(tenant = %tenant.id, ?wait, held, "inbound rate limit reached");
            }
            return self
                .record(message, Some(tenant), InboundStatus::RateLimited, &[], Handled::RateLimited, now)
                .await;
        }
        if let Some(handled) = self.linking(message, tenant, Some(&actor), &reply_to, now).await? {
            return Ok(handled);
        }
        if let Some(tap) = ApprovalTap::parse(&message.content) {
            return self.approval_tap((message, tenant, &actor), tap, &reply_to, now).await;
        }
        if let Some(answer) = Answer::parse(&message.content) {
            let inbound = inbound_row(message, Some(tenant), InboundStatus::Answer, now);
            let standing = Standing { roles: actor.roles.iter().cloned().collect(), scopes: actor.scopes.clone() };
            let who = Answering {
                tenant_id: &tenant.id,
                actor_id: &actor.id,
                standing: &standing,
                reply_to: &reply_to,
                inbound: &inbound,
                policy: &self.policy,
            };
            return Ok(Handled::Answer(answers::handle(&self.engine, &who, &answer, now).await?));
        }
        self.interpret(message, tenant, &actor, reply_to, now).await
    }

    /// A message from someone the tenant does not list. Their messages count against the same
    /// limits as an actor's (each address its own budget); a refusal is sent only within the
    /// tenant's budget of them (each one is a paid conversation), as a notice that waits for
    /// known people's messages to leave first; past it the message is kept and counted.
    async fn handle_stranger(
        &self,
        message: &InboundMessage,
        tenant: &Tenant,
        reply_to: &ReplyTo,
        now: OffsetDateTime,
    ) -> Result<Handled, EngineError> {
        if let Some(limited) = self.stranger_limited(message, tenant, now).await? {
            return Ok(limited);
        }
        if let Some(handled) = self.linking(message, tenant, None, reply_to, now).await? {
            return Ok(handled);
        }
        let (database, limits) = (self.engine.database(), &self.policy.security.limits);
        let (status, refusal) = match tenant.unknown_sender {
            // Handled as a person in the role (`sender`); one whose address is not an id is ignored.
            UnknownSenderPolicy::Ignore | UnknownSenderPolicy::AsRole(_) => (InboundStatus::IgnoredUnknownSender, None),
            UnknownSenderPolicy::Refuse => {
                let budget = limits.take(database, Budget::UnknownSenderReplies, tenant.id.as_str(), now).await?;
                if budget.is_err() {
                    let labels = [("tenant", tenant.id.to_string())];
                    metrics::counter!("chatgate_unknown_sender_refusals_unsent_total", &labels).increment(1);
                }
                let reply = reply_to.message(&Reply::Rejected(Rejection::because(RejectionReason::UnknownSender)));
                (
                    InboundStatus::RefusedUnknownSender,
                    budget.ok().map(|()| NewOutboxMessage { kind: NOTICE_KIND.into(), ..reply }),
                )
            }
        };
        let replies: Vec<NewOutboxMessage> = refusal.into_iter().collect();
        self.record(message, Some(tenant), status, &replies, Handled::UnknownSender, now).await
    }

    fn help(&self, actor: &Actor) -> Vec<String> {
        self.policy.registry.current().help_lines(&actor.scopes)
    }

    /// Stores a message of `tenant` that is no command, and why, with its replies, once.
    async fn no_command(
        &self,
        message: &InboundMessage,
        tenant: &Tenant,
        status: NoCommand,
        replies: &[NewOutboxMessage],
        now: OffsetDateTime,
    ) -> Result<Handled, EngineError> {
        self.record(
            message,
            Some(tenant),
            InboundStatus::NoCommand(status),
            replies,
            Handled::NotACommand { status },
            now,
        )
        .await
    }

    /// Stores a message that starts no command, with its replies, once.
    async fn record(
        &self,
        message: &InboundMessage,
        tenant: Option<&Tenant>,
        status: InboundStatus,
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

    /// A message admitted as the command it asks for, or, with `reprocess_of`, the same message
    /// admitted again as a new command that names the old one: no transport dedupe (the message
    /// is recorded already) and no key reservation (the old command holds the key).
    #[allow(clippy::too_many_arguments)]
    async fn admit_as(
        &self,
        message: &InboundMessage,
        tenant: &Tenant,
        actor: &Actor,
        asked: Asked,
        reply_to: ReplyTo,
        reprocess_of: Option<&StoredCommand>,
        now: OffsetDateTime,
    ) -> Result<Handled, EngineError> {
        let Asked { spec, args, reading } = asked;
        let spec = &spec;
        let request = command_request(message, (tenant, actor), spec, &args, reprocess_of);
        let lock = Resource::held_by(spec.lock, spec.kind, &request.intent);
        let (command, what) = (Some(spec.name.clone()), Some(spec.reads_in(&args, &tenant.locale)));
        let reply_to = ReplyTo { command, what, executed_template: spec.reply.clone(), ..reply_to };
        // A reprocessed message is not asked anything: its command goes where the first one went.
        let refused = match reprocess_of {
            None => {
                let asked = ToCheck { tenant: &tenant.id, actor, spec, args: &args };
                self.precheck.refused(self.engine.database(), &self.policy, asked).await?
            }
            Some(_) => None,
        };
        let roles = actor.roles.iter().cloned().collect();
        let asking = Asking { must_confirm: reading.needs_confirmation(), previewed: self.policy.previews(spec) };
        let first = first_moves(spec, (&actor.scopes, &roles), &args, &reply_to, refused, asking, now);
        let admission = Admission {
            then: first.events,
            decision: first.decision,
            reason_code: first.reason_code.map(str::to_owned),
            inbound: reprocess_of.is_none().then(|| inbound_row(message, Some(tenant), InboundStatus::Received, now)),
            outbox: first.outbox,
            reply_to: Some(reply_to),
            confirmation: first.confirmation,
            reply_detail: first.reply_detail,
            reading: Some(reading),
            lock,
            lock_waits: spec.lock == crate::domain::locks::LockRule::Wait,
        };
        let (_, admitted) = self.engine.accept_with(request, admission, now).await?;
        Ok(Handled::admitted(admitted))
    }

    /// A delivery status for a message we sent: updates its delivery record.
    pub async fn handle_status(&self, status: &StatusUpdate, now: OffsetDateTime) -> Result<(), StoreError> {
        let Some(delivery) = status.status else {
            tracing::debug!(status = %status.reported, "status not tracked");
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
