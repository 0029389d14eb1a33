//! The engine drives commands through the lifecycle: it asks the pure machine what a move
//! means, builds the evidence SMCL §IX requires for it, and has the store persist both in one
//! transaction. Every caller (channels, the API, workers) moves commands through here, so the
//! rules hold whichever door a command came in by.

mod evidence;
mod locks;
pub use locks::WAIT_POLL;
use locks::may_hold_lock;

use std::sync::Arc;

use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::CommandEnvelope;
use crate::domain::replies::OutcomeDetail;

use crate::domain::command::CommandRequest;

use crate::domain::command::TenantId;
use crate::domain::evidence::Pseudonymizer;
use crate::domain::evidence::TraceBindings;
use crate::domain::lifecycle;
use crate::domain::lifecycle::ConfirmationGate;
use crate::domain::lifecycle::Event;
use crate::domain::lifecycle::InvalidTransition;
use crate::domain::lifecycle::Lifecycle;
use crate::domain::lifecycle::State;
use crate::domain::lifecycle::Transition;
use crate::domain::locks::Resource;
use crate::domain::registry::Reading;
use crate::service::database::Database;
use crate::service::replies::outcome::{duplicate_reply, outcome_reply};
use crate::store::{
    AdmissionWrite, Admitted, DuplicateReply, NewConfirmation, NewInbound, NewOutboxMessage, ReplyTo, Store,
    StoreError, StoredCommand, TransitionWrite,
};

pub use evidence::transition_evidence;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("command {0} not found")]
    NotFound(Uuid),
    /// The move was refused and recorded as `invalid_transition_attempt`; nothing changed.
    #[error("{error}")]
    InvalidTransition { error: InvalidTransition, state: State, evidence_id: Uuid },
    /// The caller asked to admit a command with moves the machine refuses: a programming error,
    /// reported without touching the store.
    #[error("invalid admission plan: {0}")]
    InvalidPlan(InvalidTransition),
}

/// What a channel writes together with a new command.
#[derive(Debug, Clone, Default)]
pub struct Admission<'a> {
    /// Moves after `canonicalize`, in the same transaction.
    pub then: &'a [Event],
    /// The decision behind those moves (an early authorization refusal, say).
    pub decision: Option<Value>,
    /// The reason code of the last move, and of the command (a refusal's reason).
    pub reason_code: Option<String>,
    pub inbound: Option<NewInbound>,
    pub outbox: Vec<NewOutboxMessage>,
    pub reply_to: Option<ReplyTo>,
    /// The confirmation the first moves ask for.
    pub confirmation: Option<NewConfirmation>,
    /// Variables for the outcome reply when the first moves end the command (a refusal's `error`).
    pub reply_detail: Option<OutcomeDetail>,
    /// How the message was read as this command, recorded with its canonicalization.
    pub reading: Option<Reading>,
    /// What the command changes (`Resource::held_by`): held until it ends, and a command that
    /// finds it held by another is refused, told which — or, with `lock_waits`, waits its turn.
    pub lock: Option<Resource>,
    pub lock_waits: bool,
}

/// What a move carries besides its event.
#[derive(Debug, Clone, Default)]
pub struct MoveContext {
    pub reason_code: Option<String>,
    /// The decision behind the move (authz scopes compared, confirmation nonce, ...).
    pub decision: Option<Value>,
    /// Effects to perform once the move is committed.
    pub outbox: Vec<NewOutboxMessage>,
    /// Variables for the outcome reply when the move ends the command (`result`, `code`).
    pub reply_detail: Option<OutcomeDetail>,
}

/// A committed move.
#[derive(Debug, Clone, PartialEq)]
pub struct Moved {
    pub transition: Transition,
    pub version: i64,
    pub evidence_ids: Vec<Uuid>,
}

#[derive(Clone, Debug)]
pub struct Engine {
    database: Database,
    pseudonymizer: Pseudonymizer,
}

impl Engine {
    pub fn new(database: impl Into<Database>, pseudonymizer: Pseudonymizer) -> Self {
        Self { database: database.into(), pseudonymizer }
    }

    /// The repositories, for the service's own modules; above, the engine's moves and the
    /// service's façades are the way in.
    pub(in crate::service) fn store(&self) -> &Store {
        self.database.store()
    }

    /// The handle the service's functions take.
    pub fn database(&self) -> &Database {
        &self.database
    }

    /// The sending path (the outbox's sender, a webhook's inline answer).
    pub fn sending(&self) -> crate::service::replies::sending::Sending<'_> {
        crate::service::replies::sending::Sending::new(self.store(), &self.pseudonymizer)
    }

    /// What the layers above read (the API, the console, the executors).
    pub fn reads(&self) -> crate::service::reads::Reads<'_> {
        self.database.reads()
    }

    /// The keyed hash that stands for a person (or any identifier) in evidence.
    /// The keyed hash evidence names people and conversations with.
    pub fn pseudonymizer(&self) -> &Pseudonymizer {
        &self.pseudonymizer
    }

    pub fn pseudonym(&self, value: &str) -> String {
        self.pseudonymizer.pseudonym(value)
    }

    pub fn trace_for(&self, envelope: &CommandEnvelope) -> Arc<TraceBindings> {
        Arc::new(TraceBindings::for_envelope(envelope, &self.pseudonymizer))
    }

    /// Canonicalizes a request and admits it once per idempotency key, applying `then` (for
    /// example `request_confirmation`) in the same transaction. A duplicate is answered from the
    /// command that holds the key, with its decision recorded; a different command under a taken
    /// key is refused as `idempotency_conflict`.
    pub async fn accept(
        &self,
        request: CommandRequest,
        then: &[Event],
        now: OffsetDateTime,
    ) -> Result<(CommandEnvelope, Admitted), EngineError> {
        self.accept_with(request, Admission { then, ..Admission::default() }, now).await
    }

    /// `accept` with everything a channel writes in the same transaction: the carrying message,
    /// the first moves' decision and effects, and where to answer a duplicate.
    pub async fn accept_with(
        &self,
        request: CommandRequest,
        admission: Admission<'_>,
        now: OffsetDateTime,
    ) -> Result<(CommandEnvelope, Admitted), EngineError> {
        // Kept to decide again should what it changes be held.
        let again = admission.lock.as_ref().map(|resource| (request.clone(), admission.clone(), resource.clone()));
        let write = self.plan(request, admission, now)?;
        let envelope = write.envelope.clone();
        match (self.store().commands().admit(write).await?, again) {
            (Admitted::Locked { holder }, Some((request, admission, resource))) => {
                let (request, admission) = if admission.lock_waits {
                    locks::waiting(request, admission, (&resource, holder))
                } else {
                    metrics::counter!("chatgate_lock_refusals_total").increment(1);
                    locks::refused(request, admission, (&resource, holder))
                };
                let write = self.plan(request, admission, now)?;
                let envelope = write.envelope.clone();
                Ok((envelope, self.store().commands().admit(write).await?))
            }
            (admitted, _) => Ok((envelope, admitted)),
        }
    }

    /// Everything an admission writes, decided without I/O: the envelope, its moves and their
    /// evidence, the message and the effects.
    pub fn plan(
        &self,
        request: CommandRequest,
        admission: Admission<'_>,
        now: OffsetDateTime,
    ) -> Result<AdmissionWrite, EngineError> {
        let dedupe_window = request.dedupe_window;
        let envelope = CommandEnvelope::canonicalize(request, now);
        let trace = self.trace_for(&envelope);
        let then = admission.then;
        let mut current =
            Lifecycle { state: State::Received, kind: envelope.command_kind, confirmation: ConfirmationGate::Pending };
        let mut moves = Vec::with_capacity(then.len() + 1);
        let mut decision = admission.decision;
        for (i, &event) in std::iter::once(&Event::Canonicalize).chain(then).enumerate() {
            let transition = lifecycle::apply(current, event).map_err(EngineError::InvalidPlan)?;
            let last = i == then.len();
            // Each move after the first records the admission's decision; the last takes it.
            let decision = match i {
                0 => Some(evidence::first_seen(&envelope, admission.reading.as_ref())),
                _ if last => decision.take(),
                _ => decision.clone(),
            };
            let reason = if last && i > 0 { admission.reason_code.clone() } else { None };
            moves.push((transition, transition_evidence(&transition, envelope.command_id, &trace, decision, reason)));
            current = transition.after(envelope.command_kind);
        }
        let mut outbox = admission.outbox;
        if let Some(reply_to) = &admission.reply_to {
            let reason = admission.reason_code.as_deref();
            let extra = admission.reply_detail.as_ref();
            outbox.extend(outcome_reply(reply_to, envelope.command_id, current.state, reason, extra));
        }
        let trace_parent = crate::service::telemetry::admission_traceparent(envelope.command_id);
        Ok(AdmissionWrite {
            envelope,
            moves,
            reason_code: admission.reason_code,
            dedupe_window,
            trace,
            inbound: admission.inbound,
            outbox,
            duplicate_reply: admission.reply_to.is_some().then_some(duplicate_reply as DuplicateReply),
            reply_to: admission.reply_to,
            confirmation: admission.confirmation,
            at: now,
            trace_parent,
            // A command its first moves end holds nothing.
            lock: admission.lock.filter(|_| !current.state.is_terminal()),
        })
    }

    /// Applies one event to a stored command. A refused event changes nothing and leaves
    /// `invalid_transition_attempt` evidence; a command that moved concurrently is reported as
    /// `StaleVersion`, never overwritten.
    pub async fn advance(
        &self,
        tenant_id: &TenantId,
        command_id: Uuid,
        event: Event,
        context: MoveContext,
        now: OffsetDateTime,
    ) -> Result<Moved, EngineError> {
        let command = self.command(tenant_id, command_id).await?;
        let write = match self.plan_moves(&command, vec![(event, context)], now) {
            Ok(mut writes) => writes.remove(0),
            Err(error) => {
                let draft = evidence::invalid_attempt(&command, event, &error, self.trace_for(&command.envelope));
                let ids = self.store().evidence().record(tenant_id.as_str(), &[draft], now).await?;
                let evidence_id = ids.first().copied().unwrap_or_default();
                return Err(EngineError::InvalidTransition { error, state: command.lifecycle.state, evidence_id });
            }
        };
        let transition = write.transition;
        let committed = self.store().commands().commit_transition(&write).await?;
        Ok(Moved { transition, version: committed.version, evidence_ids: committed.evidence_ids })
    }

    /// Decides moves of a stored command, in order, each on the version the one before leaves,
    /// without I/O: their evidence and effects, and the outcome reply when one ends the command
    /// (so that the person hears the outcome once, in the transaction that decides it).
    pub fn plan_moves(
        &self,
        command: &StoredCommand,
        moves: Vec<(Event, MoveContext)>,
        now: OffsetDateTime,
    ) -> Result<Vec<TransitionWrite>, InvalidTransition> {
        let trace = self.trace_for(&command.envelope);
        let (mut current, mut version) = (command.lifecycle, command.version);
        let mut writes = Vec::with_capacity(moves.len());
        for (event, context) in moves {
            let transition = lifecycle::apply(current, event)?;
            let evidence = transition_evidence(
                &transition,
                command.envelope.command_id,
                &trace,
                context.decision,
                context.reason_code.clone(),
            );
            let mut outbox = context.outbox;
            if let Some(reply_to) = &command.reply_to {
                let reason = context.reason_code.as_deref();
                let extra = context.reply_detail.as_ref();
                outbox.extend(outcome_reply(reply_to, command.envelope.command_id, transition.to, reason, extra));
            }
            writes.push(TransitionWrite {
                tenant_id: command.envelope.tenant_id.clone(),
                command_id: command.envelope.command_id,
                expected_version: version,
                transition,
                reason_code: context.reason_code,
                evidence,
                outbox,
                at: now,
                trace_parent: command.trace_parent.clone(),
                may_hold_lock: may_hold_lock(&command.envelope),
            });
            current = transition.after(command.envelope.command_kind);
            version += 1;
        }
        Ok(writes)
    }

    /// Records that something asked of `command` was refused because of its state (a recovery
    /// its state does not allow, say): `invalid_transition_attempt` evidence (SMCL §XIII), with
    /// what was asked in `decision`. Nothing else changes.
    pub async fn record_refusal(
        &self,
        command: &StoredCommand,
        reason_code: &str,
        decision: Value,
        now: OffsetDateTime,
    ) -> Result<Uuid, EngineError> {
        let draft = evidence::refusal(command, reason_code, decision, self.trace_for(&command.envelope));
        let ids = self.store().evidence().record(command.envelope.tenant_id.as_str(), &[draft], now).await?;
        Ok(ids.first().copied().unwrap_or_default())
    }

    pub async fn command(&self, tenant_id: &TenantId, command_id: Uuid) -> Result<StoredCommand, EngineError> {
        self.store().commands().get(tenant_id, command_id).await?.ok_or(EngineError::NotFound(command_id))
    }
}
