//! One reply of each kind, made of the reply types (`domain::replies`) with sample values: what
//! the template check renders every template with, so that the variables a template may read are
//! the ones some reply carries. The built-in chat commands' answers are their executors' results
//! (JSON as they answer it), shown here as they look.

use serde_json::{Value, json};
use uuid::Uuid;

use crate::domain::directory::{LinkRefusal, LinkStep};
use crate::domain::lifecycle::State;
use crate::domain::replies::{
    ApprovalAnswer, ApprovalOutcome, ApprovalRequest, ApprovalRequired, AskValue, Confirmed, Courtesy, Expired, Help,
    LinkReply, Outcome, Progress, Prompt, Rejection, RejectionReason, Reply, StepUpRequired, Suggestion, TurnsEnded,
    WaitingTurn,
};

const REF: &str = "R7K2QX";
const USAGE: &str = "refund {order_id} {amount}";

fn command_id() -> Uuid {
    Uuid::from_u128(0x0190f3a1_0000_7000_8000_000000000000)
}

/// A refund's prompt: as typed, with its executor's preview, or saying none came.
fn prompt(preview: Option<crate::domain::preview::Preview>, preview_missing: bool) -> Prompt {
    Prompt {
        command: "refund".into(),
        what: "refund 25 on order 1234".into(),
        usage: USAGE.into(),
        args: json!({"order_id": "1234", "amount": "25"}),
        step_up: false,
        code: "K7Q2".into(),
        expires_at: 1_764_000_000,
        expires_in_minutes: 5,
        preview,
        preview_missing,
    }
}

fn preview() -> crate::domain::preview::Preview {
    crate::domain::preview::Preview {
        summary: "Order 1234 — paid 80.00 on 20 Nov, already refunded 0.00; refunding 25.00 leaves 55.00".into(),
        fields: [("left".to_owned(), "55.00".to_owned())].into(),
    }
}

/// A command written in turns: each kind of value asked for, first and again after each kind
/// of wrong answer; its end; and a thank-you answered.
fn turns() -> Vec<Reply> {
    let ask = |value: &str, kind: &str, question: Option<&str>, wrong: Option<(&str, &str)>| {
        Reply::AskValue(AskValue {
            command: "refund".into(),
            value: value.into(),
            kind: kind.into(),
            question: question.map(str::to_owned),
            currency: (kind == "money").then(|| "USD".to_owned()),
            first: wrong.is_none(),
            wrong: wrong.map(|(rule, _)| rule.to_owned()),
            limit: wrong.map(|(_, limit)| limit.to_owned()),
        })
    };
    let mut turns =
        vec![ask("order_id", "id", Some("Which order? (like 1234)"), None), ask("note", "word", None, None)];
    for (rule, limit) in [
        ("type", ""),
        ("more_than", "0"),
        ("at_least", "1"),
        ("at_most", "10000"),
        ("decimals", "2"),
        ("choices", "a, b"),
    ]
    .into_iter()
    .chain([("currency", "USD"), ("pattern", "A-1")])
    {
        turns.push(ask("amount", "money", None, Some((rule, limit))));
    }
    for kind in ["int", "decimal", "id"] {
        turns.push(ask("count", kind, None, Some(("type", ""))));
    }
    for reason in crate::domain::registry::Ending::ALL {
        turns.push(Reply::TurnsEnded(TurnsEnded { reason: *reason, usage: USAGE.into() }));
    }
    turns.push(Reply::Courtesy(Courtesy {}));
    turns.extend(links());
    turns
}

/// Every step of linking a channel, and every reason a code is refused.
fn links() -> Vec<Reply> {
    let step = |step, code: Option<&str>, reason| {
        Reply::Link(LinkReply {
            step,
            code: code.map(str::to_owned),
            expires_in_minutes: code.map(|_| 60),
            channel: Some("Telegram".into()),
            reason,
        })
    };
    let mut links = vec![step(LinkStep::Code, Some("K7M2QX9P"), None)];
    links.extend([LinkStep::Linked, LinkStep::Notice, LinkStep::Undone].map(|s| step(s, None, None)));
    links.extend(LinkRefusal::ALL.iter().map(|reason| step(LinkStep::Refused, None, Some(*reason))));
    links
}

/// Every kind of reply, and every template a reply is rendered with, at least once.
pub fn samples() -> Vec<Reply> {
    let mut samples = vec![
        Reply::ConfirmationPrompt(prompt(None, false)),
        Reply::WaitingTurn(WaitingTurn {
            what: "refund 30 on order 1234".into(),
            holder: REF.into(),
            entity: "order".into(),
            target: "1234".into(),
        }),
        Reply::ConfirmationPrompt(prompt(Some(preview()), false)),
        Reply::ConfirmationPrompt(prompt(None, true)),
        Reply::Confirmed(Confirmed {
            command: "refund".into(),
            what: Some("refund 25 on order 1234".into()),
            command_id: command_id(),
        }),
        Reply::Confirmed(Confirmed { command: "close_account".into(), what: None, command_id: command_id() }),
        Reply::StepUpRequired(StepUpRequired {
            command: "close_account".into(),
            command_id: command_id(),
            link: "https://chatgate.example/step-up/abc".into(),
        }),
        Reply::Expired(Expired { command: "refund".into(), code: "K7Q2".into() }),
        Reply::Progress(Progress { done: true, command_id: command_id(), state: State::Executed }),
        Reply::Progress(Progress { done: false, command_id: command_id(), state: State::Started }),
        Reply::Help(Help { commands: vec!["order status {order_id} — where an order is".into()], unsupported: None }),
        Reply::Help(Help { commands: vec![], unsupported: Some("image".into()) }),
        Reply::Suggestion(Suggestion { usage: USAGE.into(), suggestion: Some("refund 1234 25".into()) }),
        Reply::Suggestion(Suggestion { usage: USAGE.into(), suggestion: None }),
    ];
    samples.extend(turns());
    samples.extend(rejections().into_iter().map(Reply::Rejected));
    samples.extend(approvals());
    samples.extend(outcomes().into_iter().map(Reply::Outcome));
    samples
}

/// The approvals' replies: the requester told it waits, an approver asked, and one answer per
/// outcome an approver may be told.
fn approvals() -> Vec<Reply> {
    let mut samples = vec![
        Reply::ApprovalRequired(ApprovalRequired {
            command: "refund".into(),
            what: "refund 1500.00 on order 1234".into(),
            command_id: command_id(),
            roles: vec!["supervisor".into()],
            approvals: 2,
            within_minutes: 240,
        }),
        Reply::ApprovalRequest(ApprovalRequest {
            requester: "Demo customer".into(),
            what: "refund 250.00 on order 1234".into(),
            command_id: command_id(),
            rules: vec!["a customer's own limit".into(), "refund over 100.00".into()],
            approvals: 1,
            within_minutes: 240,
            code: "K7Q2XW".into(),
            preview: Some(preview()),
        }),
    ];
    samples.extend(ApprovalOutcome::ALL.iter().map(|outcome| {
        Reply::ApprovalAnswer(ApprovalAnswer {
            outcome: *outcome,
            what: "refund 250.00 on order 1234".into(),
            status: "approved".into(),
            missing: 1,
        })
    }));
    samples
}

/// The variables `reply` is rendered with, as the outbox row has them: a reply about a command
/// also carries the command's short reference (`store::outbox` adds it).
pub fn vars_of(reply: &Reply) -> Value {
    let mut vars = reply.vars();
    let about_a_command = !matches!(reply, Reply::Help(_) | Reply::Rejected(_) | Reply::Suggestion(_));
    if let (true, Some(map)) = (about_a_command, vars.as_object_mut()) {
        map.insert("ref".into(), REF.into());
    }
    vars
}

/// One rejection per reason, each with what its sentence needs (a reason added must say what here).
fn rejections() -> Vec<Rejection> {
    RejectionReason::ALL.iter().map(|reason| rejection(*reason)).collect()
}

fn rejection(reason: RejectionReason) -> Rejection {
    let plain = Rejection::because(reason);
    match reason {
        RejectionReason::Ambiguous => {
            Rejection { candidates: Some(vec![USAGE.into(), "reorder {order_id}".into()]), ..plain }
        }
        RejectionReason::InvalidValue => Rejection {
            value: Some("amount".into()),
            rule: Some("more_than".into()),
            limit: Some("0".into()),
            usage: Some(USAGE.into()),
            ..plain
        },
        RejectionReason::TwoReadings => Rejection {
            value: Some("amount".into()),
            readings: Some(vec!["1234.5".into(), "12345".into()]),
            usage: Some(USAGE.into()),
            ..plain
        },
        RejectionReason::SeveralPending => Rejection { codes: Some(vec!["K7Q2".into(), "P3XM".into()]), ..plain },
        RejectionReason::UnknownConfirmation | RejectionReason::NothingToConfirm => {
            Rejection { codes: Some(vec![]), ..plain }
        }
        RejectionReason::IdempotencyConflict => Rejection { command_id: Some(command_id()), ..plain },
        RejectionReason::Negated | RejectionReason::Several | RejectionReason::UnknownSender => plain,
    }
}

/// An outcome reply with `template`, `state` and `reason`.
fn outcome(template: &str, command: &str, state: State, reason: &str) -> Outcome {
    Outcome {
        template: template.into(),
        command: command.into(),
        what: "refund 25 on order 1234".into(),
        command_id: command_id(),
        state,
        reason: reason.into(),
        result: Value::Null,
        error: None,
        code: None,
    }
}

fn outcomes() -> Vec<Outcome> {
    let failed = json!({"code": "not_allowed", "ref": REF, "state": "executed", "allowed": ["compensate"]});
    let mut outcomes = vec![
        Outcome { result: json!({"refund_id": "R-1"}), ..outcome("executed", "refund", State::Executed, "executed") },
        Outcome { error: Some(failed), ..outcome("failed", "retry", State::Rejected, "not_allowed") },
        outcome("failed", "refund", State::Failed, "executor_timeout"),
        outcome("rejected", "close_account", State::Rejected, "missing_scope"),
        outcome("declined", "refund", State::Canceled, "confirmation_declined"),
        Outcome { code: Some("K7Q2".into()), ..outcome("expired", "refund", State::Canceled, "confirmation_expired") },
        outcome("canceled", "refund", State::Canceled, "ttl_expired"),
    ];
    for (template, result) in chat_answers() {
        outcomes.push(Outcome { result, ..outcome(template, template, State::Executed, "executed") });
    }
    outcomes
}

/// The built-in chat commands' answers (`service::ooc`), each with the template the registry
/// names for it.
fn chat_answers() -> Vec<(&'static str, Value)> {
    let line = json!({"ref": REF, "command": "refund", "state": "failed", "at": "11-23 09:41 UTC",
        "reason": "executor_timeout", "actor": "*******0001"});
    let about = |extra: Value| {
        let mut about = json!({"ref": REF, "command": "refund", "state": "failed", "at": "11-23 09:41 UTC",
            "reason": "executor_timeout"});
        if let (Some(map), Value::Object(extra)) = (about.as_object_mut(), extra) {
            map.extend(extra);
        }
        about
    };
    vec![
        ("requests", json!({"list": "failures", "page": 2, "items": [line], "more": true})),
        ("agents", json!({"items": [{"agent": "orders", "state": "paused"}]})),
        (
            "recovered",
            json!({"action": "retry", "target_ref": REF, "target_state": "failed", "recovery_ref": "P3XM9A",
            "state": "started"}),
        ),
        ("agent_changed", json!({"agent": "orders", "state": "paused"})),
        (
            "request_status",
            about(json!({"actor": "*******0001", "terminal": true,
            "next": [{"action": "retry", "say": "retry R7K2QX"}, {"action": "wait", "say": "why R7K2QX"}]})),
        ),
        (
            "why",
            about(json!({
            "steps": [{"step": "received", "at": "11-23 09:40 UTC", "reason": null, "outcome": null},
                      {"step": "answered", "at": "11-23 09:40 UTC", "reason": null, "outcome": "accepted"},
                      {"step": "failed", "at": "11-23 09:41 UTC", "reason": "executor_timeout", "outcome": null}],
            "more_steps": 2,
            "deliveries": [{"target": "orders", "state": "failed", "failure_class": "executor_timeout",
                "attempts": 3}]})),
        ),
        (
            "trace",
            about(json!({"reason": null, "commands": 2, "messages": 1, "replies": 3, "more_lines": 1,
            "lines": [{"at": "11-23 09:40 UTC", "kind": "command", "ref": REF, "what": "order.refund",
                "state": "failed", "reason": null},
                      {"at": "11-23 09:41 UTC", "kind": "transition", "ref": null, "what": null, "state": "failed",
                          "reason": "executor_timeout"},
                      {"at": "11-23 09:41 UTC", "kind": "delivery", "ref": null, "what": "orders", "state": "failed",
                          "reason": null}]})),
        ),
        (
            "evidence",
            about(json!({"reason": null, "count": 9, "more_items": 1, "items": [{"seq": 3,
            "kind": "execution.failed", "reason": "executor_timeout", "hash": "9f2c1a0b7e"}]})),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::service::replies::REQUIRED;

    #[test]
    fn the_samples_render_every_required_template_and_no_other() {
        let mut rendered = BTreeSet::new();
        for sample in samples() {
            rendered.insert(sample.template().to_owned());
            rendered.extend(sample.button_templates().iter().map(|b| (*b).to_owned()));
        }
        let required: BTreeSet<String> = REQUIRED.iter().map(|r| (*r).to_owned()).collect();
        assert_eq!(rendered, required);
    }
}
