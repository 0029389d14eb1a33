//! What an answer that counts does to its command: confirm (then authorize, ask for a step-up
//! or refuse) or decline, and what a late answer or the sweeper does to an expired one.

use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::domain::evidence::decision::{AuthzVerdict, Decision};
use crate::domain::replies::{Confirmed, OutcomeDetail, Reply, StepUpRequired};
use crate::service::confirmations::confirm::Answer;

use crate::domain::lifecycle::Event;
use crate::service::confirmations::confirm::Verdict;
use crate::service::dispatch;
use crate::service::engine::MoveContext;
use crate::service::replies::outcome::DECLINED;
use crate::service::replies::outcome::EXPIRED;
use crate::service::security::approval::opening;
use crate::service::security::authz::APPROVAL_REQUIRED;
use crate::service::security::{Authorization, AuthzDecision};
use crate::store::{ApprovalWrite, AskedBy, Confirmation, ConfirmationStatus, StoredCommand};

/// How many times a step that lost a race is decided again before giving up (the provider's
/// redelivery then tries once more).
use super::answers::{AnswerOutcome, Answering};

/// What a counted answer does: the command's moves, the confirmation's new status, and the
/// approval it opens when the policy holds the command for one.
pub(super) struct AnswerMoves {
    pub(super) outcome: AnswerOutcome,
    pub(super) status: ConfirmationStatus,
    pub(super) moves: Vec<(Event, MoveContext)>,
    pub(super) approval: Option<ApprovalWrite>,
}

pub(super) fn answer_moves(
    who: &Answering<'_>,
    (answer, confirmation, authorization): (&Answer, &Confirmation, Option<Authorization>),
    command: &StoredCommand,
    name: &str,
    via: &str,
    now: OffsetDateTime,
) -> AnswerMoves {
    let answered = |outcome, status, moves, approval| AnswerMoves { outcome, status, moves, approval };
    if confirmation.is_expired_at(now) {
        // Late, and the sweeper has not got to it: expire it now (the expired reply is the
        // command's outcome reply).
        return answered(AnswerOutcome::TooLate, ConfirmationStatus::Expired, vec![expiry_move(confirmation)], None);
    }
    let bound = json!({
        "confirmation_id": confirmation.id, "code": confirmation.code, "via": via,
        "idempotency_key": confirmation.idempotency_key.as_str(),
    });
    match answer.verdict {
        Verdict::Yes => {
            let confirm = MoveContext { decision: Some(bound), ..MoveContext::default() };
            let mut moves = vec![(Event::Confirm, confirm)];
            let (authorized, approval) = authorization_moves(who, command, authorization, (name, now));
            moves.extend(authorized);
            answered(AnswerOutcome::Accepted, ConfirmationStatus::Accepted, moves, approval)
        }
        Verdict::No => {
            let cancel =
                MoveContext { reason_code: Some(DECLINED.into()), decision: Some(bound), ..MoveContext::default() };
            answered(AnswerOutcome::Declined, ConfirmationStatus::Declined, vec![(Event::Cancel, cancel)], None)
        }
    }
}

/// What follows a confirmation: `authz_pending`, then the decision — allowed (and the person
/// told it is confirmed), waiting for a step-up proof (and the person sent the link), waiting for
/// other people's approval (opened in the same step, and the person told by whom), or refused
/// (the refusal is the command's outcome reply).
pub(super) fn authorization_moves(
    who: &Answering<'_>,
    command: &StoredCommand,
    authorization: Option<Authorization>,
    (name, now): (&str, OffsetDateTime),
) -> (Vec<(Event, MoveContext)>, Option<ApprovalWrite>) {
    let command_id = command.envelope.command_id;
    let context = |reason: Option<&str>, decision: &Value, outbox| MoveContext {
        reason_code: reason.map(str::to_owned),
        decision: Some(decision.clone()),
        outbox,
        reply_detail: None,
    };
    // Refused: `authz_pending`, then `rejected` (the refusal is the command's outcome reply).
    let refused = |decision: &Value, reason: &str| {
        let moves = vec![
            (Event::SubmitForAuthorization, context(None, decision, vec![])),
            (Event::Deny, context(Some(reason), decision, vec![])),
        ];
        (moves, None)
    };
    let Some(authorization) = authorization else {
        let reason = Some("the registry no longer has this command".to_owned());
        return refused(&Decision::Authz { authz: AuthzVerdict::Deny, reason }.into(), "unknown_command");
    };
    let evidence = authorization.evidence();
    let reason = authorization.decision.reason_code().unwrap_or("missing_scope");
    match authorization.decision {
        AuthzDecision::Allow => {
            let what = command.reply_to.as_ref().and_then(|r| r.what.as_deref()).unwrap_or(name);
            let confirmed = Confirmed { command: name.to_owned(), what: Some(what.to_owned()), command_id };
            let confirmed = who.reply_to.message(&Reply::Confirmed(confirmed));
            let moves = vec![
                (Event::SubmitForAuthorization, context(None, &evidence, vec![confirmed])),
                (Event::Allow, context(None, &evidence, vec![])),
                dispatch::start(&authorization.spec.targets),
            ];
            (moves, None)
        }
        AuthzDecision::StepUp => {
            let nonce = crate::service::confirmations::confirm::new_nonce();
            let link = who.policy.security.stepup.link(command_id, &nonce);
            let decision = super::step_up::with_nonce(evidence, &nonce);
            let step_up = StepUpRequired { command: name.to_owned(), command_id, link };
            let reply = who.reply_to.message(&Reply::StepUpRequired(step_up));
            (vec![(Event::SubmitForAuthorization, context(Some("step_up_required"), &decision, vec![reply]))], None)
        }
        AuthzDecision::Approval { needs } => {
            let opening = opening(command, (needs, AskedBy::Policy), name, now);
            let mut decision = evidence;
            decision["approval"] = opening.decision;
            let waiting = context(Some(APPROVAL_REQUIRED), &decision, opening.notice.into_iter().collect());
            (vec![(Event::SubmitForAuthorization, waiting)], Some(opening.write))
        }
        AuthzDecision::Refused { .. } | AuthzDecision::Deny { .. } => refused(&evidence, reason),
    }
}

/// The reason code of a request canceled because its person corrected it before confirming.
pub const CORRECTED: &str = "corrected";

/// The cancel move of a request its person corrected ("no, 30") before confirming it: the
/// corrected request, admitted from `message_id`, takes its place.
pub fn correction_move(confirmation: &Confirmation, message_id: &str) -> (Event, MoveContext) {
    let decision = Decision::Corrected { confirmation_id: confirmation.id, corrected_by: message_id.to_owned() };
    (
        Event::Cancel,
        MoveContext { reason_code: Some(CORRECTED.into()), decision: Some(decision.into()), ..MoveContext::default() },
    )
}

/// The cancel move of a confirmation that ran out; its outcome reply says so with the code.
pub(super) fn expiry_move(confirmation: &Confirmation) -> (Event, MoveContext) {
    (
        Event::Cancel,
        MoveContext {
            reason_code: Some(EXPIRED.into()),
            decision: Some(
                Decision::ConfirmationExpired {
                    confirmation_id: confirmation.id,
                    expired_at: confirmation.expires_at.unix_timestamp(),
                }
                .into(),
            ),
            reply_detail: Some(OutcomeDetail::Code(confirmation.code.clone())),
            ..MoveContext::default()
        },
    )
}
