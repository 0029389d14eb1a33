//! What a step of a command's lifecycle decided, as its artifact records it: one variant per kind
//! of decision, written where the step is planned and serialized into the artifact's `decision`
//! — canonical JSON, hashed into the chain — so that each variant's fields are exactly the keys
//! those artifacts have always had. A move's implied decision (`authz`, `confirmation`) is merged
//! under the caller's by the engine. (The directory's changes, the hook bridge's submissions and a
//! sent message's record carry bodies of their own.)

use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use crate::domain::command::{Fingerprint, IdempotencyClass, IdempotencyKey, Intent};
use crate::domain::evidence::Checkpoint;
use crate::domain::lifecycle::recovery::RecoveryAction;
use crate::domain::lifecycle::{Event, State};
use crate::domain::names::named_enum;
use crate::domain::registry::ReadingRule;
use crate::domain::registry::approvals::{ApprovalStatus, Standing, Vote};

/// What an artifact records of a step-up proof, never the token: its issuer and id (which make
/// it single-use), and where authorization or an override took it, how strong and how fresh the
/// authentication was (RFC 9470's `acr` and `auth_time`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProofRecord {
    pub issuer: String,
    pub jti: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acr: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_time: Option<i64>,
}

impl ProofRecord {
    /// Which proof it was, alone (an approver's decision records no more).
    pub fn named(issuer: &str, jti: &str) -> Self {
        Self { issuer: issuer.to_owned(), jti: jti.to_owned(), acr: None, auth_time: None }
    }
}

named_enum! {
    /// An authorization's verdict.
    AuthzVerdict {
        Allow => "allow",
        Deny => "deny",
        StepUpRequired => "step_up_required",
        PolicyRefused => "policy_refused",
        ApprovalRequired => "approval_required",
    }
}

named_enum! {
    /// Where a command's confirmation stands.
    ConfirmationStep {
        Requested => "requested",
        Satisfied => "satisfied",
        AutoConfirmed => "auto_confirmed",
    }
}

named_enum! {
    /// What became of a command's preview (issue #47): shown in its prompt, missing from it (a
    /// preview that failed, where the registry allows prompting without), refused by its
    /// executor, or failed where the registry requires one.
    PreviewStep {
        Shown => "shown",
        Missing => "missing",
        Refused => "refused",
        Failed => "failed",
    }
}

named_enum! {
    /// A chat operation's precheck, which stops a command before anyone is asked to confirm it.
    Precheck {
        Refused => "refused",
    }
}

named_enum! {
    /// A started command's TTL, which stops it when no executor took it in time.
    Ttl {
        ExpiredBeforeDispatch => "expired before dispatch",
    }
}

named_enum! {
    /// What admission did with a command's key: reserved it for the first time, or, for a class
    /// that reserves none, nothing.
    Dedupe {
        FirstSeen => "first_seen",
        NotReserved => "not_reserved",
    }
}

/// How a message's text was read as its command: the rule and the pattern, never the text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReadAs {
    pub rule: ReadingRule,
    pub pattern: String,
    pub typos: usize,
}

/// A step's decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Decision {
    /// An admitted command's key, seen for the first time, and how its text was read (IDS §XII).
    FirstSeen {
        dedupe: Dedupe,
        idempotency_key: IdempotencyKey,
        idempotency_class: IdempotencyClass,
        fingerprint: Fingerprint,
        registry_version: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        read_as: Option<ReadAs>,
    },
    /// An authorization: the scopes the command needs, those held, those missing.
    Authorization {
        authz: AuthzVerdict,
        command: String,
        required: Vec<String>,
        held: Vec<String>,
        missing: Vec<String>,
        step_up: bool,
        /// The approval policy's rules that refused or asked for approval (none: no key).
        #[serde(skip_serializing_if = "Option::is_none")]
        policy: Option<Vec<String>>,
    },
    /// A verdict alone (a security move's implied decision), with why when it has no command.
    Authz {
        authz: AuthzVerdict,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A confirmation asked for: its code and when it runs out.
    ConfirmationRequested {
        confirmation: ConfirmationStep,
        code: String,
        expires_at: i64,
        /// Whether the prompt shows a preview, and the digest it is bound to (absent for commands
        /// that ask for none, as artifacts written before previews read).
        #[serde(skip_serializing_if = "Option::is_none")]
        preview: Option<PreviewStep>,
        #[serde(skip_serializing_if = "Option::is_none")]
        preview_digest: Option<String>,
    },
    /// A command stopped at its preview: the executor refused it, or a required preview failed.
    PreviewStopped { preview: PreviewStep, code: String, message: String },
    /// A confirmation satisfied or auto-confirmed (a move's implied decision).
    Confirmation { confirmation: ConfirmationStep },
    /// A confirmation that ran out, canceling its command.
    ConfirmationExpired { confirmation_id: Uuid, expired_at: i64 },
    /// A request corrected while it waited for its confirmation ("no, 30"), canceling it: the
    /// confirmation closed, and the message whose correction is a new request in its place.
    Corrected { confirmation_id: Uuid, corrected_by: String },
    /// A chat operation refused before its confirmation, with what can be done instead.
    Precheck { precheck: Precheck, error: Value },
    /// A started command canceled because its TTL ran out before dispatch.
    Ttl { ttl: Ttl, expires_at: Option<i64> },
    /// The targets the command is handed to (`started`).
    Dispatch { dispatch: Vec<String> },
    /// What the target answered (`executed`).
    Executed { target: String, result: Value },
    /// Why the target failed (`failed`).
    ExecutionFailed { target: String, error: Value },
    /// The command that compensated this one.
    Compensated { compensated_by: Uuid, compensation: Intent },
    /// A move the command's state does not allow, refused (SMCL §VI.B).
    Refused { refused: bool, attempted_event: Event, from: State, version: i64, detail: String },
    /// An operator's cancel, on the command it cancels.
    CanceledBy { recovery_command_id: Uuid, by: String, reason: String },
    /// A recovery command done: what it did to its target.
    Recovered { target_command_id: Uuid, target_state: State },
    /// A recovery command's admission: the action, by whom, why, on which command.
    Recovery { recovery: RecoveryAction, by: String, reason: String, target_command_id: Uuid },
    /// On the target's record: the recovery command that acts on it.
    RecoveryRequested {
        recovery: RecoveryAction,
        recovery_command_id: Uuid,
        by: String,
        reason: String,
        #[serde(flatten)]
        follows: Follows,
    },
    /// A request began waiting for approval: which rules apply, the roles that decide, how many
    /// approvals in all, and when the wait ends.
    ApprovalRequested { approval_id: Uuid, rules: Vec<String>, roles: Vec<String>, quorum: u32, expires_at: i64 },
    /// One person's decision on an approval (the approver by pseudonym): whether it counted, and
    /// where the approval stands after it.
    ApprovalDecided {
        approval_id: Uuid,
        approver: String,
        decision: Vote,
        via: String,
        standing: Standing,
        /// The approver's step-up proof, when a rule asked for one.
        #[serde(skip_serializing_if = "Option::is_none")]
        step_up_proof: Option<ProofRecord>,
    },
    /// An approval settled (approved, denied, expired) and what it did to its command.
    ApprovalSettled { approval_id: Uuid, status: ApprovalStatus, by: Option<String> },
    /// An approval's escalation came due: the roles now asked too, how many people that was,
    /// and when the next escalation is due (Unix seconds; none: no more).
    ApprovalEscalated { approval_id: Uuid, roles: Vec<String>, asked: usize, next: Option<i64> },
    /// Break-glass: the operator (by pseudonym) who overrode a pending approval, why, and their
    /// step-up proof (never the token).
    ApprovalOverridden { approval_id: Uuid, operator: String, reason: String, step_up_proof: ProofRecord },
    /// A mutation refused because what it changes is held by another command under way (its id
    /// and its reference, which the person is told).
    Locked { resource: String, holder: Uuid, holder_ref: String },
    /// An operator (by pseudonym) released the lock a command held, and why.
    LockReleased { resource: String, operator: String, reason: String },
    /// A purge overwrote the texts received or sent before `texts_before` (RFC 3339): how many
    /// messages, replies and prompts.
    TextsExpired { texts_before: String, messages: u64, replies: u64, prompts: u64 },
    /// A purge deleted the records of commands that ended before `records_before` (RFC 3339),
    /// and the rows of none past it, and cut the chain at `checkpoint` (its place and hash):
    /// the artifact that says where, and what the export of the cut part must end with.
    RecordsDeleted {
        records_before: String,
        commands: u64,
        deliveries: u64,
        messages: u64,
        replies: u64,
        idempotency_keys: u64,
        evidence: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        checkpoint: Option<Checkpoint>,
    },
}

/// What a recovery command is to the command it follows.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Follows {
    /// A retry, carrying the target's key to its executor unreserved.
    Retry { idempotency_key: IdempotencyKey },
    /// The registry's compensation command, by name.
    Compensation { command: String },
    /// The target's stored message, read again.
    Reprocess {},
}

impl Follows {
    pub fn action(&self) -> RecoveryAction {
        match self {
            Follows::Retry { .. } => RecoveryAction::Retry,
            Follows::Compensation { .. } => RecoveryAction::Compensate,
            Follows::Reprocess {} => RecoveryAction::Reprocess,
        }
    }
}

impl From<Decision> for Value {
    fn from(decision: Decision) -> Value {
        // Every field is a string, a number, a list or a map with string keys: nothing fails.
        serde_json::to_value(decision).unwrap_or_else(|_| Value::Object(serde_json::Map::new()))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_decision_has_the_keys_its_artifacts_always_had() {
        let implied = Decision::Authz { authz: AuthzVerdict::Allow, reason: None };
        assert_eq!(Value::from(implied), json!({"authz": "allow"}));
        let requested = Decision::ConfirmationRequested {
            confirmation: ConfirmationStep::Requested,
            code: "K7".into(),
            expires_at: 9,
            preview: None,
            preview_digest: None,
        };
        assert_eq!(Value::from(requested), json!({"confirmation": "requested", "code": "K7", "expires_at": 9}));
        let ttl = Decision::Ttl { ttl: Ttl::ExpiredBeforeDispatch, expires_at: None };
        assert_eq!(Value::from(ttl), json!({"ttl": "expired before dispatch", "expires_at": null}));
        let refused = Decision::Refused {
            refused: true,
            attempted_event: Event::Start,
            from: State::Executed,
            version: 4,
            detail: "no".into(),
        };
        let refused = Value::from(refused);
        assert_eq!((refused["attempted_event"].as_str(), refused["from"].as_str()), (Some("start"), Some("executed")));
        let link = |follows| {
            Value::from(Decision::RecoveryRequested {
                recovery: RecoveryAction::Compensate,
                recovery_command_id: Uuid::nil(),
                by: "op".into(),
                reason: "why".into(),
                follows,
            })
        };
        let compensation = link(Follows::Compensation { command: "refund_reversal".into() });
        assert_eq!(compensation["command"], "refund_reversal");
        let reprocess = link(Follows::Reprocess {});
        let keys: Vec<&String> = reprocess.as_object().map(|m| m.keys().collect()).unwrap_or_default();
        assert_eq!(keys, ["by", "reason", "recovery", "recovery_command_id"]);
    }
}
