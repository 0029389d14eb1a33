//! A person's decision on an approval. It counts once per person (a redelivered tap, a double tap
//! or a tap on a second channel finds their first), only from someone who may decide (a holder of
//! an approver's role, or of the escalation's once it is due; never the requester), and only
//! while the approval is pending. The tally decides: every rule with its quorum allows the
//! command and dispatches it, a denial or the end of the wait rejects it — settled by a
//! compare-and-set in the step that moves the command, so once, whichever instance gets there.

use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::TenantId;
use crate::domain::evidence::decision::{Decision, ProofRecord};
use crate::domain::evidence::{EvidenceDraft, TraceBindings};
use crate::domain::lifecycle::{EvidenceKind, State};
use crate::domain::registry::approvals::{self, Decided as Counted, Missing, Tally, Vote};
use crate::domain::replies::ApprovalOutcome;
use crate::service::engine::{Engine, EngineError};
use crate::service::security::Policy;
use crate::service::security::StepUpError;
use crate::store::{
    ApprovalDecision, ApprovalStatus, ConsumedToken, DecisionRecorded, Recording, StepWrite, StoredApproval,
};

use super::settle::{Settling, settle};

/// Who decides what on which approval, and where.
#[derive(Debug, Clone)]
pub struct Deciding<'a> {
    pub tenant: &'a TenantId,
    pub approval_id: Uuid,
    /// The person, as the directory knows them.
    pub approver: &'a str,
    pub vote: Vote,
    pub reason: Option<String>,
    /// `api`, or the channel they answered on.
    pub via: &'a str,
    /// Their step-up token, for an approval a rule asks its approvers to step up for.
    pub step_up: Option<&'a str>,
}

/// What a decision came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Decided {
    /// Counted; the approval still waits for these.
    Waiting(Vec<Missing>),
    /// It completed the approval: the command was allowed and dispatched.
    Approved,
    /// It denied the request: the command was rejected.
    Denied,
    /// They had decided before; that decision stands.
    AlreadyDecided { vote: Vote },
    /// The approval was settled before (approved, denied, expired, overridden, closed).
    Settled { status: ApprovalStatus },
    /// Not theirs to decide.
    NotYours(NotYours),
    /// A rule they decide asks for their step-up proof: none came, it does not hold, or it was
    /// used before. Nothing was recorded.
    ProofWanted(Option<ProofRefused>),
    /// No such approval in the tenant.
    NotFound,
}

impl Decided {
    /// What the decision came to, as the approver is told and the API answers.
    pub fn outcome(&self) -> ApprovalOutcome {
        match self {
            Decided::Waiting(_) => ApprovalOutcome::Recorded,
            Decided::Approved => ApprovalOutcome::Approved,
            Decided::Denied => ApprovalOutcome::Denied,
            Decided::AlreadyDecided { .. } => ApprovalOutcome::AlreadyDecided,
            Decided::Settled { .. } => ApprovalOutcome::Settled,
            Decided::NotYours(NotYours::OwnRequest) => ApprovalOutcome::OwnRequest,
            Decided::NotYours(NotYours::NotAnApprover) => ApprovalOutcome::NotAnApprover,
            Decided::ProofWanted(_) => ApprovalOutcome::StepUpRequired,
            Decided::NotFound => ApprovalOutcome::Unknown,
        }
    }
}

/// Why someone may not decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotYours {
    /// They asked for it: no one approves their own request.
    OwnRequest,
    /// They hold no role that decides it (now).
    NotAnApprover,
}

/// Why an approver's step-up proof was not taken.
#[derive(Debug, Clone, PartialEq)]
pub enum ProofRefused {
    Invalid(StepUpError),
    Used,
}

/// Records `deciding` and settles the approval when the tally says so.
pub async fn decide(
    engine: &Engine,
    policy: &Policy,
    deciding: &Deciding<'_>,
    now: OffsetDateTime,
) -> Result<Decided, EngineError> {
    let store = engine.store();
    let Some(approval) = store.approvals().get(deciding.tenant, deciding.approval_id).await? else {
        return Ok(Decided::NotFound);
    };
    if approval.status != ApprovalStatus::Pending {
        return Ok(Decided::Settled { status: approval.status });
    }
    if deciding.approver == approval.requester {
        return Ok(Decided::NotYours(NotYours::OwnRequest));
    }
    let standing = policy.people.standing_of(deciding.tenant, deciding.approver, None).await?;
    let waited = waited(&approval, now);
    let may = |(_, need): &(String, _)| {
        approvals::may_decide(need, &approval.requester, deciding.approver, &standing.roles, waited)
    };
    if !approval.needs.iter().any(may) {
        return Ok(Decided::NotYours(NotYours::NotAnApprover));
    }
    if now >= approval.expires_at {
        return settled(engine, policy, &approval, Tally::Expired { rule: String::new() }, vec![], now).await;
    }
    let asks_proof = approval.needs.iter().any(|entry| entry.1.step_up && may(entry));
    let proof = match proof_of(policy, &approval, deciding, asks_proof, now) {
        Ok(proof) => proof,
        Err(refused) => return Ok(Decided::ProofWanted(refused)),
    };
    let decision = ApprovalDecision {
        approver: deciding.approver.to_owned(),
        roles: standing.roles,
        vote: deciding.vote,
        via: deciding.via.to_owned(),
        reason: deciding.reason.clone(),
        decided_at: now,
        proof,
    };
    let recorded = match store.approvals().record(approval.id, &decision).await? {
        Recording::Recorded(recorded) => recorded,
        Recording::ProofUsed => return Ok(Decided::ProofWanted(Some(ProofRefused::Used))),
        Recording::NotPending => return status_now(engine, &approval).await,
    };
    if !recorded.fresh {
        let first = recorded.decisions.iter().find(|d| d.approver == deciding.approver);
        return Ok(Decided::AlreadyDecided { vote: first.map_or(Vote::Deny, |d| d.vote) });
    }
    counted(engine, policy, (&approval, &decision), (deciding, &recorded), now).await
}

/// A fresh decision counted with every one before it: the approval still waits (the decision's
/// evidence alone), or the tally settles it.
async fn counted(
    engine: &Engine,
    policy: &Policy,
    (approval, decision): (&StoredApproval, &ApprovalDecision),
    (deciding, recorded): (&Deciding<'_>, &DecisionRecorded),
    now: OffsetDateTime,
) -> Result<Decided, EngineError> {
    let counted: Vec<Counted> = recorded
        .decisions
        .iter()
        .map(|d| Counted { approver: d.approver.clone(), roles: d.roles.clone(), vote: d.vote })
        .collect();
    let tally = approvals::tally(&approval.needs, &approval.requester, &counted, waited(approval, now));
    let evidence = vec![decided_evidence(engine, (approval, decision.proof.as_ref()), deciding, &tally)];
    match tally {
        Tally::Waiting(missing) => {
            let step =
                StepWrite { evidence, ..StepWrite::new(approval.tenant_id.clone(), Some(approval.command_id), now) };
            engine.store().commands().commit_step(&step).await?;
            Ok(Decided::Waiting(missing))
        }
        tally => settled(engine, policy, approval, tally, evidence, now).await,
    }
}

/// The approver's step-up proof when a rule they decide asks for one: bound to them, the
/// approval's command and its idempotency key; `Err` when it is missing or does not hold.
fn proof_of(
    policy: &Policy,
    approval: &StoredApproval,
    deciding: &Deciding<'_>,
    asks_proof: bool,
    now: OffsetDateTime,
) -> Result<Option<ConsumedToken>, Option<ProofRefused>> {
    if !asks_proof {
        return Ok(None);
    }
    let token = deciding.step_up.ok_or(None)?;
    let binding = (approval.command_id, approval.idempotency_key.as_str());
    let proof = policy.security.stepup.verify_binding(token, deciding.approver, binding, now);
    let proof = proof.map_err(|error| Some(ProofRefused::Invalid(error)))?;
    Ok(Some(proof.consumed()))
}

/// How long the approval has waited at `now`.
pub(super) fn waited(approval: &StoredApproval, now: OffsetDateTime) -> std::time::Duration {
    (now - approval.requested_at).try_into().unwrap_or_default()
}

/// Settles the approval as the tally says; a step that lost the race answers how it stands.
async fn settled(
    engine: &Engine,
    policy: &Policy,
    approval: &StoredApproval,
    tally: Tally,
    evidence: Vec<EvidenceDraft>,
    now: OffsetDateTime,
) -> Result<Decided, EngineError> {
    let (status, by) = match &tally {
        Tally::Approved => (ApprovalStatus::Approved, None),
        Tally::Denied { by } => (ApprovalStatus::Denied, Some(by.clone())),
        _ => (ApprovalStatus::Expired, None),
    };
    let settling = Settling { approval, status, by, evidence: evidence.clone(), consume: None };
    if settle(engine, policy, settling, now).await? {
        return Ok(match status {
            ApprovalStatus::Approved => Decided::Approved,
            ApprovalStatus::Denied => Decided::Denied,
            status => Decided::Settled { status },
        });
    }
    // Another decision settled it first (on another instance, say): this one was recorded while
    // it was pending, and its evidence says so.
    if !evidence.is_empty() {
        let step = StepWrite { evidence, ..StepWrite::new(approval.tenant_id.clone(), Some(approval.command_id), now) };
        engine.store().commands().commit_step(&step).await?;
    }
    status_now(engine, approval).await
}

/// Where the approval stands now (another decision or the sweeper settled it meanwhile).
async fn status_now(engine: &Engine, approval: &StoredApproval) -> Result<Decided, EngineError> {
    let now = engine.store().approvals().get(&approval.tenant_id, approval.id).await?;
    Ok(Decided::Settled { status: now.map_or(ApprovalStatus::Closed, |a| a.status) })
}

/// The evidence of one counted decision: who (by pseudonym), what, where, and where it left the
/// approval.
fn decided_evidence(
    engine: &Engine,
    (approval, proof): (&StoredApproval, Option<&ConsumedToken>),
    deciding: &Deciding<'_>,
    tally: &Tally,
) -> EvidenceDraft {
    let approver = engine.pseudonym(deciding.approver);
    let decision = Decision::ApprovalDecided {
        approval_id: approval.id,
        approver: approver.clone(),
        decision: deciding.vote,
        via: deciding.via.to_owned(),
        standing: tally.standing(),
        step_up_proof: proof.map(|p| ProofRecord::named(&p.issuer, &p.jti)),
    };
    let trace = TraceBindings { actor: Some(approver), ..TraceBindings::default() };
    let mut draft = EvidenceDraft::new(EvidenceKind::ApprovalDecided, approval.command_id, trace);
    draft.stage = Some(State::AuthzPending);
    draft.decision = Some(decision.into());
    draft
}
