//! What a request the policy holds for approval does when it is authorized: it stays in
//! `authz_pending`, one approval row is opened in the same step (what the policy asked, until
//! when), the step's evidence says so, and the requester is told by whom it waits (roles, never
//! a person's address).

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::evidence::decision::Decision;
use crate::domain::registry::approvals::Need;
use crate::domain::replies::{ApprovalRequired, Reply};
use crate::store::{ApprovalWrite, NewApproval, NewOutboxMessage, StoredCommand};

/// An approval about to be opened for a command.
#[derive(Debug, Clone, PartialEq)]
pub struct Opening {
    pub write: ApprovalWrite,
    /// The decision the move (or the step's evidence) records.
    pub decision: Value,
    /// The requester's notice, when the command has somewhere to reply.
    pub notice: Option<NewOutboxMessage>,
}

/// Opens an approval for `command`, requested by its actor, asking `needs` (the policy's rules
/// that apply, by name); `name` is the command as the person knows it.
pub fn opening(command: &StoredCommand, needs: Vec<(String, Need)>, name: &str, now: OffsetDateTime) -> Opening {
    let e = &command.envelope;
    let longest = needs.iter().map(|(_, need)| need.within).max().unwrap_or(Duration::from_secs(3600));
    let expires_at = now + longest;
    let roles: BTreeSet<String> = needs.iter().flat_map(|(_, need)| need.approvers.iter().cloned()).collect();
    let quorum = needs.iter().map(|(_, need)| need.quorum).max().unwrap_or(1);
    let id = Uuid::now_v7();
    let decision = Decision::ApprovalRequested {
        approval_id: id,
        rules: needs.iter().map(|(rule, _)| rule.clone()).collect(),
        roles: roles.iter().cloned().collect(),
        quorum,
        expires_at: expires_at.unix_timestamp(),
    };
    let what = command.reply_to.as_ref().and_then(|r| r.what.clone()).unwrap_or_else(|| name.to_owned());
    let notice = command.reply_to.as_ref().map(|reply_to| {
        reply_to.message(&Reply::ApprovalRequired(ApprovalRequired {
            command: name.to_owned(),
            what,
            command_id: e.command_id,
            roles: roles.into_iter().collect(),
            approvals: quorum,
            within_minutes: longest.as_secs() / 60,
        }))
    });
    let write = ApprovalWrite::Open(NewApproval {
        id,
        idempotency_key: e.idempotency_key.clone(),
        requester: e.actor_id.as_str().to_owned(),
        needs,
        expires_at,
    });
    Opening { write, decision: decision.into(), notice }
}
