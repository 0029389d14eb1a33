//! Answers to confirmations, and confirmations that run out.
//!
//! An answer is read (`confirm::Answer`), matched to the confirmation it names, judged against
//! IDS §X (the right actor, the right command and key, still pending, still in time) and written
//! as one step: the message, the settled confirmation, the command's moves, the evidence of the
//! answer and the replies. A step that lost a race (the same answer twice at once, the sweeper
//! expiring it meanwhile) is decided again on fresh state, so one confirmation has one effect.

use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::replies::{Expired, Progress, Rejection, RejectionReason, Reply};
use crate::service::confirmations::confirm::Answer;

use crate::service::confirmations::confirm::Named;

use crate::domain::command::ActorId;
use crate::domain::command::TenantId;
use crate::domain::evidence::EvidenceDraft;
use crate::domain::evidence::TraceBindings;
use crate::domain::lifecycle::EvidenceKind;
use crate::domain::lifecycle::State;
use crate::service::engine::Engine;
use crate::service::engine::EngineError;
use crate::service::replies::outcome::DECLINED;
use crate::service::replies::outcome::EXPIRED;
use crate::service::security::Policy;
use crate::store::{
    Confirmation, ConfirmationStatus, NewInbound, NewOutboxMessage, ReplyTo, SettleConfirmation, StepOutcome,
    StepWrite, StoredCommand,
};

/// How many times a step that lost a race is decided again before giving up (the provider's
/// redelivery then tries once more).
use super::moves::{AnswerMoves, answer_moves, expiry_move};
use crate::service::security::approval::{Asked, asks};
use crate::store::ApprovalWrite;

const ATTEMPTS: usize = 4;

/// What became of an answer; the label of `chatgate_confirmation_answers_total{outcome}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerOutcome {
    Accepted,
    Declined,
    TooLate,
    /// Names a confirmation of someone else: confirms nothing.
    WrongActor,
    /// The confirmation was used already.
    AlreadyAnswered,
    /// Names nothing this actor could answer (unknown code, nothing pending, several pending).
    Unmatched,
    Redelivered,
}

impl AnswerOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Declined => "declined",
            Self::TooLate => "too_late",
            Self::WrongActor => "wrong_actor",
            Self::AlreadyAnswered => "already_answered",
            Self::Unmatched => "unmatched",
            Self::Redelivered => "redelivered",
        }
    }
}

/// Who answered, from where, and with what message.
#[derive(Debug, Clone)]
pub struct Answering<'a> {
    pub tenant_id: &'a TenantId,
    pub actor_id: &'a ActorId,
    /// The actor's roles and scopes now (what their confirmed command is authorized on).
    pub standing: &'a crate::service::directory::Standing,
    pub reply_to: &'a ReplyTo,
    /// The message carrying the answer (recorded with the step: transport dedupe).
    pub inbound: &'a NewInbound,
    /// What decides the command's authorization once it is confirmed.
    pub policy: &'a Policy,
}

/// Handles one answer, at most one committed step.
pub async fn handle(
    engine: &Engine,
    who: &Answering<'_>,
    answer: &Answer,
    now: OffsetDateTime,
) -> Result<AnswerOutcome, EngineError> {
    for _ in 0..ATTEMPTS {
        let (outcome, step) = decide(engine, who, answer, now).await?;
        match engine.store().commands().commit_step(&step).await? {
            StepOutcome::Committed { .. } => {
                metrics::counter!("chatgate_confirmation_answers_total", "outcome" => outcome.as_str()).increment(1);
                return Ok(outcome);
            }
            StepOutcome::Redelivered { .. } => return Ok(AnswerOutcome::Redelivered),
            // These steps take no resource: `Locked` cannot come back.
            StepOutcome::Stale | StepOutcome::TokenUsed | StepOutcome::Locked { .. } => continue,
        }
    }
    Err(EngineError::Store(crate::store::StoreError::Unavailable(
        "the confirmation kept changing while its answer was written".into(),
    )))
}

/// Which confirmation the answer names, among those the tenant has.
enum Matched {
    One(Box<Confirmation>),
    Nothing { reason: RejectionReason, codes: Vec<String> },
}

async fn find(
    engine: &Engine,
    who: &Answering<'_>,
    answer: &Answer,
    now: OffsetDateTime,
) -> Result<Matched, EngineError> {
    let store = engine.store();
    let nothing = |reason| Matched::Nothing { reason, codes: vec![] };
    Ok(match &answer.named {
        Named::Nonce(nonce) => match store.confirmations().by_nonce(nonce).await? {
            Some(c) if &c.tenant_id == who.tenant_id => Matched::One(Box::new(c)),
            _ => nothing(RejectionReason::UnknownConfirmation),
        },
        Named::Code(code) => {
            let all = store.confirmations().by_code(who.tenant_id, code).await?;
            // The actor's own (a pending one first); else someone else's, which is refused.
            let own = |pending: bool| {
                all.iter()
                    .find(|c| &c.actor_id == who.actor_id && (!pending || c.status == ConfirmationStatus::Pending))
            };
            match own(true).or_else(|| own(false)).or_else(|| all.first()) {
                Some(c) => Matched::One(Box::new(c.clone())),
                None => nothing(RejectionReason::UnknownConfirmation),
            }
        }
        Named::Bare => {
            let pending = store.confirmations().pending(who.tenant_id, who.actor_id).await?;
            let (live, late): (Vec<_>, Vec<_>) = pending.into_iter().partition(|c| !c.is_expired_at(now));
            match (live.as_slice(), late.last()) {
                ([one], _) => Matched::One(Box::new(one.clone())),
                ([], Some(late)) => Matched::One(Box::new(late.clone())),
                ([], None) => nothing(RejectionReason::NothingToConfirm),
                _ => Matched::Nothing {
                    reason: RejectionReason::SeveralPending,
                    codes: live.into_iter().map(|c| c.code).collect(),
                },
            }
        }
    })
}

async fn decide(
    engine: &Engine,
    who: &Answering<'_>,
    answer: &Answer,
    now: OffsetDateTime,
) -> Result<(AnswerOutcome, StepWrite), EngineError> {
    let via = via(&answer.named);
    let (mut step, mut decision, mut trace) = opening(engine, who, answer, via, now);

    let confirmation = match find(engine, who, answer, now).await? {
        Matched::One(c) => *c,
        Matched::Nothing { reason, codes } => {
            decision.outcome = Some(AnswerOutcome::Unmatched.as_str());
            step.evidence.push(answer_evidence(None, None, trace, &decision, Some(reason.as_str())));
            let rejection = Rejection { codes: Some(codes), ..Rejection::because(reason) };
            step.outbox.push(who.reply_to.message(&Reply::Rejected(rejection)));
            return Ok((AnswerOutcome::Unmatched, step));
        }
    };
    let command = engine.command(who.tenant_id, confirmation.command_id).await?;
    step.command_id = Some(command.envelope.command_id);
    trace.conversation = Some(engine.pseudonym(command.envelope.conversation_id.as_str()));
    trace.correlation_id = Some(command.envelope.correlation_id.as_str().to_owned());
    decision.confirmation_id = Some(confirmation.id.to_string());
    let stage = Some(command.lifecycle.state);
    // Every answer ends here: its evidence (with the outcome, and why when it was refused) and
    // the reply it gets, if the moves do not bring their own.
    let conclude =
        |mut step: StepWrite, mut decision: Answered, outcome: AnswerOutcome, reason: Option<&str>, reply| {
            decision.outcome = Some(outcome.as_str());
            step.evidence.push(answer_evidence(Some(confirmation.command_id), stage, trace.clone(), &decision, reason));
            step.outbox.extend(reply);
            (outcome, step)
        };

    let name = command.asked_name();
    if let Some((outcome, reason, reply)) = refused(who, &confirmation, &command, &name) {
        // Answered as a made-up code is: no reference to that command tells the sender it exists.
        step.command_id =
            step.command_id.filter(|_| !matches!(outcome, AnswerOutcome::WrongActor | AnswerOutcome::Unmatched));
        return Ok(conclude(step, decision, outcome, Some(reason), Some(reply)));
    }
    // A yes authorizes under the registry entry the command was admitted with.
    let answered = (answer, &confirmation, who.policy.authorize(&command, who.standing.clone(), false).await?);
    let AnswerMoves { outcome, status, moves, approval } = answer_moves(who, answered, &command, &name, via, now);
    let Ok(writes) = engine.plan_moves(&command, moves, now) else {
        // The command moved on without this confirmation (an operator canceled it, say).
        let reply = where_it_stands(who.reply_to, &command);
        return Ok(conclude(step, decision, AnswerOutcome::AlreadyAnswered, Some("command_moved"), Some(reply)));
    };
    step.settle = Some(SettleConfirmation {
        id: confirmation.id,
        status,
        answered_by: (outcome != AnswerOutcome::TooLate).then(|| who.actor_id.clone()),
    });
    step.moves = writes;
    held_for_approval(engine, &mut step, who, (&command, &name), approval).await?;
    Ok(conclude(step, decision, outcome, reason_of(outcome), None))
}

/// A command the policy holds for approval: the approval opened in the answer's step, and its
/// approvers asked in it.
async fn held_for_approval(
    engine: &Engine,
    step: &mut StepWrite,
    who: &Answering<'_>,
    (command, name): (&StoredCommand, &str),
    approval: Option<ApprovalWrite>,
) -> Result<(), EngineError> {
    if let Some(ApprovalWrite::Open(opened)) = &approval {
        // The approvers see the preview the requester confirmed.
        let preview = engine.reads().preview_of(command.envelope.command_id).await?;
        let asked = (command, preview.as_ref());
        step.outbox.extend(asks(who.policy, asked, &Asked::approvers(opened), name).await?);
    }
    step.approval = approval;
    Ok(())
}

/// The reason code an answer that moved its command records, if any.
fn reason_of(outcome: AnswerOutcome) -> Option<&'static str> {
    match outcome {
        AnswerOutcome::TooLate => Some(EXPIRED),
        AnswerOutcome::Declined => Some(DECLINED),
        _ => None,
    }
}

/// `confirmation.answered`'s decision: the answer, how it named its confirmation, who gave it
/// (a pseudonym), the confirmation it found and what became of the answer.
#[derive(Debug, Clone, serde::Serialize)]
struct Answered {
    answer: &'static str,
    via: &'static str,
    from: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    confirmation_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<&'static str>,
}

/// The answer's step, the decision its evidence records and its trace, before its confirmation
/// is known.
fn opening(
    engine: &Engine,
    who: &Answering<'_>,
    answer: &Answer,
    via: &'static str,
    now: OffsetDateTime,
) -> (StepWrite, Answered, TraceBindings) {
    let step = StepWrite { inbound: Some(who.inbound.clone()), ..StepWrite::new(who.tenant_id.clone(), None, now) };
    let actor = engine.pseudonym(who.actor_id.as_str());
    let decision =
        Answered { answer: answer.verdict.as_str(), via, from: actor.clone(), confirmation_id: None, outcome: None };
    let trace = TraceBindings {
        actor: Some(actor),
        message_ids: vec![who.inbound.provider_message_id.as_str().to_owned()],
        ..TraceBindings::default()
    };
    (step, decision, trace)
}

/// How the answer named its confirmation, for the evidence.
fn via(named: &Named) -> &'static str {
    match named {
        Named::Nonce(_) => "button",
        Named::Code(_) => "code",
        Named::Bare => "bare",
    }
}

/// Why an answer to `confirmation` counts for nothing, with the reply it gets; `None` when it
/// counts.
fn refused(
    who: &Answering<'_>,
    confirmation: &Confirmation,
    command: &StoredCommand,
    name: &str,
) -> Option<(AnswerOutcome, &'static str, NewOutboxMessage)> {
    let unknown = || {
        let rejection = Rejection { codes: Some(vec![]), ..Rejection::because(RejectionReason::UnknownConfirmation) };
        who.reply_to.message(&Reply::Rejected(rejection))
    };
    // IDS §X: another person's answer confirms nothing. The reply does not say whose it was.
    if &confirmation.actor_id != who.actor_id {
        return Some((AnswerOutcome::WrongActor, "wrong_actor", unknown()));
    }
    // Bound to the command's key as well as its id: a confirmation never carries over.
    if confirmation.idempotency_key != command.envelope.idempotency_key {
        return Some((AnswerOutcome::Unmatched, "binding_mismatch", unknown()));
    }
    match confirmation.status {
        ConfirmationStatus::Accepted | ConfirmationStatus::Declined | ConfirmationStatus::Closed => {
            Some((AnswerOutcome::AlreadyAnswered, "already_answered", where_it_stands(who.reply_to, command)))
        }
        ConfirmationStatus::Expired => {
            let expired = Expired { command: name.to_owned(), code: confirmation.code.clone() };
            let reply = who.reply_to.message(&Reply::Expired(expired));
            Some((AnswerOutcome::TooLate, EXPIRED, reply))
        }
        ConfirmationStatus::Pending => None,
    }
}

/// What a person is told when their answer comes after the command moved on.
fn where_it_stands(reply_to: &ReplyTo, command: &StoredCommand) -> NewOutboxMessage {
    let state = command.lifecycle.state;
    let progress = Progress { done: state.is_terminal(), command_id: command.envelope.command_id, state };
    reply_to.message(&Reply::Progress(progress))
}

fn answer_evidence(
    command_id: Option<Uuid>,
    stage: Option<State>,
    trace: TraceBindings,
    decision: &Answered,
    reason: Option<&str>,
) -> EvidenceDraft {
    EvidenceDraft {
        kind: EvidenceKind::ConfirmationAnswered,
        command_id,
        stage,
        from: None,
        event: None,
        trace: trace.into(),
        decision: serde_json::to_value(decision).ok(),
        reason_code: reason.map(str::to_owned),
    }
}

/// Cancels the commands whose confirmations ran out unanswered (each with its expired reply);
/// returns how many. Run periodically: expiry must not wait for someone to answer.
pub async fn expire_due(engine: &Engine, now: OffsetDateTime, limit: i64) -> Result<usize, EngineError> {
    let mut expired = 0;
    for confirmation in engine.store().confirmations().expired(now, limit).await? {
        let command = engine.command(&confirmation.tenant_id, confirmation.command_id).await?;
        // A command that already left `confirmation_required` only needs its confirmation closed.
        let moves = engine.plan_moves(&command, vec![expiry_move(&confirmation)], now).unwrap_or_default();
        let settle = SettleConfirmation { id: confirmation.id, status: ConfirmationStatus::Expired, answered_by: None };
        let step = StepWrite {
            settle: Some(settle),
            moves,
            ..StepWrite::new(confirmation.tenant_id.clone(), Some(confirmation.command_id), now)
        };
        // Stale: answered or moved meanwhile; the next sweep sees the new state.
        if let StepOutcome::Committed { .. } = engine.store().commands().commit_step(&step).await? {
            expired += 1;
            metrics::counter!("chatgate_confirmations_expired_total").increment(1);
        }
    }
    Ok(expired)
}
