//! What a person is told, as types: one variant per kind of reply, carrying the variables its
//! template is rendered with — the contract between the code that queues a reply and the people
//! who write templates. A reply is written to the outbox as its template's name and these
//! variables (the row's JSON) and rendered later by name; the template check renders every
//! template at start with samples of these same types (`service::replies::templates::samples`),
//! so a template that reads a variable no reply carries fails there, not in a conversation.

use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use crate::domain::lifecycle::State;
use crate::domain::names::named_enum;

/// A reply to a person, before it is written to the outbox.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Reply {
    /// A command ended, or a built-in chat command answered with its result.
    Outcome(Outcome),
    /// A duplicate of a command that ended (`already_done`) or is under way (`in_progress`).
    Progress(Progress),
    /// A message that is no command, or an answer that confirms nothing (`rejected`).
    Rejected(Rejection),
    /// The person's yes was taken and the command allowed (`confirmed`).
    Confirmed(Confirmed),
    /// The command waits for a step-up proof (`step_up_required`).
    StepUpRequired(StepUpRequired),
    /// The command waits for other people's approval (`approval_required`).
    ApprovalRequired(ApprovalRequired),
    /// An approver is asked to decide (`approval_request`, with approve and deny buttons).
    ApprovalRequest(ApprovalRequest),
    /// What an approver's decision came to (`approval_answer`).
    ApprovalAnswer(ApprovalAnswer),
    /// An answer to a confirmation that ran out (`expired`).
    Expired(Expired),
    /// What the person can ask (`help`).
    Help(Help),
    /// "Did you mean …?" (`suggestion`, with a `button_accept` button when there is a command).
    Suggestion(Suggestion),
    /// A mutation asks its person to confirm (`confirmation_prompt`, with yes and no buttons).
    ConfirmationPrompt(Prompt),
    /// A mutation waits its turn for what another request is changing (`waiting_turn`).
    WaitingTurn(WaitingTurn),
    /// A command written in turns asks for its next value (`ask_value`).
    AskValue(AskValue),
    /// A command written in turns was given up: cancelled, or too many answers missed (`turns_ended`).
    TurnsEnded(TurnsEnded),
    /// A message of courtesy alone, a thank-you or an emoji (`courtesy`): a short answer, not the help.
    Courtesy(Courtesy),
    /// About linking another channel: a code, a link made or refused, its notice, its undoing (`link`).
    Link(LinkReply),
}

impl Reply {
    /// The template it is rendered with.
    pub fn template(&self) -> &str {
        match self {
            Reply::Outcome(outcome) => &outcome.template,
            Reply::Progress(progress) if progress.done => "already_done",
            Reply::Progress(_) => "in_progress",
            Reply::Rejected(_) => "rejected",
            Reply::Confirmed(_) => "confirmed",
            Reply::StepUpRequired(_) => "step_up_required",
            Reply::ApprovalRequired(_) => "approval_required",
            Reply::ApprovalRequest(_) => "approval_request",
            Reply::ApprovalAnswer(_) => "approval_answer",
            Reply::Expired(_) => "expired",
            Reply::Help(_) => "help",
            Reply::Suggestion(_) => "suggestion",
            Reply::ConfirmationPrompt(_) => "confirmation_prompt",
            Reply::WaitingTurn(_) => "waiting_turn",
            Reply::AskValue(_) => "ask_value",
            Reply::TurnsEnded(_) => "turns_ended",
            Reply::Courtesy(_) => "courtesy",
            Reply::Link(_) => "link",
        }
    }

    /// The templates of its buttons' titles, rendered with the same variables.
    pub fn button_templates(&self) -> &'static [&'static str] {
        match self {
            Reply::ConfirmationPrompt(_) => &["button_yes", "button_no"],
            Reply::Suggestion(_) => &["button_accept"],
            Reply::ApprovalRequest(_) => &["button_approve", "button_deny"],
            _ => &[],
        }
    }

    /// Its variables, as the outbox row keeps them.
    pub fn vars(&self) -> Value {
        // Every field is a string, a number, a list or a map with string keys: nothing fails.
        serde_json::to_value(self).unwrap_or_else(|_| Value::Object(serde_json::Map::new()))
    }
}

/// What the mover of an ended command knows beyond its state and reason.
#[derive(Debug, Clone, PartialEq)]
pub enum OutcomeDetail {
    /// What the executor answered (an executed command, a built-in's answer).
    Result(Value),
    /// Why it could not be done, with what can be done instead (a refusal that explains itself).
    Error(Value),
    /// The code of the confirmation that ran out.
    Code(String),
}

/// An ended command's reply: the state's template, or the registry's `reply` for an executed one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    #[serde(skip)]
    pub template: String,
    /// The name the person knows the command by.
    pub command: String,
    /// How the command reads ("refund 25 on order 1234").
    pub what: String,
    pub command_id: Uuid,
    pub state: State,
    /// The reason code, else the state's name.
    pub reason: String,
    /// The executor's answer; null for an outcome without one.
    pub result: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// Where a command a duplicate repeats stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Progress {
    /// Ended (`already_done`), else under way (`in_progress`).
    #[serde(skip)]
    pub done: bool,
    pub command_id: Uuid,
    pub state: State,
}

named_enum! {
    /// Why a message or an answer was turned down before any command (the `rejected` template's
    /// `reason`; a refused command's reply says its own reason code instead).
    RejectionReason {
        InvalidValue => "invalid_value",
        TwoReadings => "two_readings",
        Negated => "negated",
        Several => "several",
        Ambiguous => "ambiguous",
        UnknownSender => "unknown_sender",
        IdempotencyConflict => "idempotency_conflict",
        UnknownConfirmation => "unknown_confirmation",
        NothingToConfirm => "nothing_to_confirm",
        SeveralPending => "several_pending",
    }
}

/// Why nothing was done. Each reason carries what its sentence needs, and only that.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rejection {
    pub reason: RejectionReason,
    /// The command a reused key belongs to (`idempotency_conflict`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_id: Option<Uuid>,
    /// The codes of the confirmations waiting (`several_pending`, `unknown_confirmation`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub codes: Option<Vec<String>>,
    /// The commands the message could be (`ambiguous`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidates: Option<Vec<String>>,
    /// The value that broke its rule (`invalid_value`) or reads two ways (`two_readings`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
    /// The two ways it reads (`two_readings`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readings: Option<Vec<String>>,
    /// How the command is written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<String>,
}

impl Rejection {
    /// A rejection for `reason` that needs nothing else.
    pub fn because(reason: RejectionReason) -> Self {
        Self {
            reason,
            command_id: None,
            codes: None,
            candidates: None,
            value: None,
            rule: None,
            limit: None,
            readings: None,
            usage: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Confirmed {
    pub command: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub what: Option<String>,
    pub command_id: Uuid,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepUpRequired {
    pub command: String,
    pub command_id: Uuid,
    /// The page where the person proves who they are.
    pub link: String,
}

/// A request waiting for approval: by whom (roles, never a person's address) and how many.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalRequired {
    pub command: String,
    /// How the command reads ("refund 250.00 on order 1234").
    pub what: String,
    pub command_id: Uuid,
    /// The roles whose holders decide.
    pub roles: Vec<String>,
    /// How many distinct people must approve (the largest quorum of the rules that apply).
    pub approvals: u32,
    /// How long it may wait, in minutes.
    pub within_minutes: u64,
}

/// An approver asked to decide: who asks (by name), for what, and why it needs them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalRequest {
    /// The requester as the directory names them.
    pub requester: String,
    pub what: String,
    pub command_id: Uuid,
    /// The policy's rules that apply.
    pub rules: Vec<String>,
    /// How many distinct people must approve in all.
    pub approvals: u32,
    pub within_minutes: u64,
    /// The approval's short code, for a reply in words (`APPROVE <code>`, `DENY <code>`).
    pub code: String,
    /// The preview the requester confirmed, when the command had one: approvers see the same.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview: Option<crate::domain::preview::Preview>,
}

named_enum! {
    /// What an approver's decision came to, as they are told.
    ApprovalOutcome {
        Recorded => "recorded",
        Approved => "approved",
        Denied => "denied",
        AlreadyDecided => "already_decided",
        Settled => "settled",
        OwnRequest => "own_request",
        NotAnApprover => "not_an_approver",
        // A rule asks its approvers to prove who they are: not by a tap.
        StepUpRequired => "step_up_required",
        Unknown => "unknown",
    }
}

/// What an approver's decision came to: `status` is how a settled one ended, `missing` how many
/// more approvals a recorded one waits for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalAnswer {
    pub outcome: ApprovalOutcome,
    pub what: String,
    pub status: String,
    pub missing: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Expired {
    pub command: String,
    pub code: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Help {
    /// The usage of each command the person may ask.
    pub commands: Vec<String>,
    /// The kind of message that could not be read (an image, say).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsupported: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Suggestion {
    pub usage: String,
    /// The whole command meant, when the message held it all; null without.
    pub suggestion: Option<String>,
}

/// A request that waits its turn: which request holds what it would change (by reference only).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WaitingTurn {
    /// How the request reads ("refund 25 on order 1234").
    pub what: String,
    /// The holding request's reference (`R7K2QX`), never whose it is.
    pub holder: String,
    pub entity: String,
    pub target: String,
}

/// The next value of a command written in turns, asked for (every field present, `null` when unset).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AskValue {
    /// The registry's name of the command.
    pub command: String,
    /// The value's placeholder (`order_id`).
    pub value: String,
    /// Its type (`id`, `money`, `int`, ...).
    pub kind: String,
    /// The registry's question for it (`asks`), else the template words one by its type.
    pub question: Option<String>,
    /// The tenant's currency, for an amount.
    pub currency: Option<String>,
    /// The first question of the conversation (it says how to stop).
    pub first: bool,
    /// Why the last answer was not taken: the rule it broke (`more_than`, ...), or `type`.
    pub wrong: Option<String>,
    /// The broken rule's limit.
    pub limit: Option<String>,
}

/// A command written in turns, given up; `usage` says how to send it whole.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnsEnded {
    pub reason: crate::domain::registry::Ending,
    pub usage: String,
}

/// A thank-you or an emoji, answered in a few words.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Courtesy {}

/// About linking a person's channels (every field present, `null` when unset).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkReply {
    pub step: crate::domain::directory::LinkStep,
    /// The code to send from the other channel (`code`).
    pub code: Option<String>,
    pub expires_in_minutes: Option<u64>,
    /// The channel linked or undone, as people call it (`Telegram`).
    pub channel: Option<String>,
    /// Why a code was not taken (`refused`).
    pub reason: Option<crate::domain::directory::LinkRefusal>,
}

/// A confirmation prompt: the command as it reads, and the confirmation's code and time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prompt {
    pub command: String,
    pub what: String,
    pub usage: String,
    /// The command's values by name, as the person gave them.
    pub args: Value,
    /// The command also needs a step-up proof.
    pub step_up: bool,
    pub code: String,
    /// Seconds since the epoch.
    pub expires_at: i64,
    pub expires_in_minutes: u64,
    /// What the executor said the command would do, when it was asked (issue #47).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview: Option<crate::domain::preview::Preview>,
    /// Asked for a preview but none came: the prompt says it goes on without one.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub preview_missing: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_names_its_template_and_carries_only_its_own_variables() {
        let id = Uuid::nil();
        let progress = Reply::Progress(Progress { done: true, command_id: id, state: State::Executed });
        assert_eq!(progress.template(), "already_done");
        assert_eq!(progress.vars(), serde_json::json!({"command_id": id, "state": "executed"}));
        let rejected = Reply::Rejected(Rejection {
            codes: Some(vec![]),
            ..Rejection::because(RejectionReason::UnknownConfirmation)
        });
        assert_eq!(rejected.vars(), serde_json::json!({"reason": "unknown_confirmation", "codes": []}));
        let suggestion = Reply::Suggestion(Suggestion { usage: "refund {order_id} {amount}".into(), suggestion: None });
        assert_eq!(suggestion.vars()["suggestion"], Value::Null, "no command meant: null, as the template asks");
        assert_eq!(suggestion.button_templates(), ["button_accept"]);
    }
}
