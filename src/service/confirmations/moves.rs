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
use crate::service::security::{Authorization, AuthzDecision};
use crate::store::{Confirmation, ConfirmationStatus, StoredCommand};

/// How many times a step that lost a race is decided again before giving up (the provider's
/// redelivery then tries once more).
use super::answers::{AnswerOutcome, Answering};

/// What a counted answer does: the command's moves and the confirmation's new status.
pub(super) fn answer_moves(
    who: &Answering<'_>,
    (answer, confirmation, authorization): (&Answer, &Confirmation, Option<Authorization>),
    command: &StoredCommand,
    name: &str,
    via: &str,
    now: OffsetDateTime,
) -> (AnswerOutcome, ConfirmationStatus, Vec<(Event, MoveContext)>) {
    if confirmation.is_expired_at(now) {
        // Late, and the sweeper has not got to it: expire it now (the expired reply is the
        // command's outcome reply).
        return (AnswerOutcome::TooLate, ConfirmationStatus::Expired, vec![expiry_move(confirmation)]);
    }
    let bound = json!({
        "confirmation_id": confirmation.id, "code": confirmation.code, "via": via,
        "idempotency_key": confirmation.idempotency_key.as_str(),
    });
    match answer.verdict {
        Verdict::Yes => {
            let confirm = MoveContext { decision: Some(bound), ..MoveContext::default() };
            let mut moves = vec![(Event::Confirm, confirm)];
            moves.extend(authorization_moves(who, command, authorization, name));
            (AnswerOutcome::Accepted, ConfirmationStatus::Accepted, moves)
        }
        Verdict::No => {
            let cancel =
                MoveContext { reason_code: Some(DECLINED.into()), decision: Some(bound), ..MoveContext::default() };
            (AnswerOutcome::Declined, ConfirmationStatus::Declined, vec![(Event::Cancel, cancel)])
        }
    }
}

/// What follows a confirmation: `authz_pending`, then the decision — allowed (and the person
/// told it is confirmed), waiting for a step-up proof (and the person sent the link), or refused
/// (the refusal is the command's outcome reply).
pub(super) fn authorization_moves(
    who: &Answering<'_>,
    command: &StoredCommand,
    authorization: Option<Authorization>,
    name: &str,
) -> Vec<(Event, MoveContext)> {
    let command_id = command.envelope.command_id;
    let context = |reason: Option<&str>, decision: &Value, outbox| MoveContext {
        reason_code: reason.map(str::to_owned),
        decision: Some(decision.clone()),
        outbox,
        reply_detail: None,
    };
    let Some(authorization) = authorization else {
        let reason = Some("the registry no longer has this command".to_owned());
        let decision: Value = Decision::Authz { authz: AuthzVerdict::Deny, reason }.into();
        return vec![
            (Event::SubmitForAuthorization, context(None, &decision, vec![])),
            (Event::Deny, context(Some("unknown_command"), &decision, vec![])),
        ];
    };
    let evidence = authorization.evidence();
    match authorization.decision {
        AuthzDecision::Allow => {
            let what = command.reply_to.as_ref().and_then(|r| r.what.as_deref()).unwrap_or(name);
            let confirmed = Confirmed { command: name.to_owned(), what: Some(what.to_owned()), command_id };
            let confirmed = who.reply_to.message(&Reply::Confirmed(confirmed));
            vec![
                (Event::SubmitForAuthorization, context(None, &evidence, vec![confirmed])),
                (Event::Allow, context(None, &evidence, vec![])),
                dispatch::start(&authorization.spec.targets),
            ]
        }
        AuthzDecision::StepUp => {
            let nonce = crate::service::confirmations::confirm::new_nonce();
            let link = who.policy.security.stepup.link(command_id, &nonce);
            let decision = super::step_up::with_nonce(evidence, &nonce);
            let step_up = StepUpRequired { command: name.to_owned(), command_id, link };
            let reply = who.reply_to.message(&Reply::StepUpRequired(step_up));
            vec![(Event::SubmitForAuthorization, context(Some("step_up_required"), &decision, vec![reply]))]
        }
        AuthzDecision::Deny { .. } => vec![
            (Event::SubmitForAuthorization, context(None, &evidence, vec![])),
            (Event::Deny, context(Some("missing_scope"), &evidence, vec![])),
        ],
    }
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
