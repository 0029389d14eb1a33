//! The evidence kinds of SMCL §IX and IDS §XII, and which ones each new state requires.

use crate::domain::lifecycle::state::State;
use crate::domain::names::named_enum;

named_enum! {
    /// The `kind` of an evidence artifact.
    EvidenceKind {
        CommandAccepted => "command.accepted",
        ConfirmationRequested => "command.confirmation.requested",
        ConfirmationSatisfied => "command.confirmation.satisfied",
        // Not named by the seed: entering `authz_pending` records that a decision is awaited.
        AuthzRequested => "authz.requested",
        AuthzDecided => "authz.decided",
        ExecutionStarted => "execution.started",
        ExecutionExecuted => "execution.executed",
        ExecutionFailed => "execution.failed",
        ExecutionRejected => "execution.rejected",
        // Not named by the seed: the end of a command that never finished executing.
        CommandCanceled => "command.canceled",
        CompensationCompensated => "compensation.compensated",
        InvalidTransitionAttempt => "invalid_transition_attempt",
        // IDS §XII: a duplicate that was answered from the existing command.
        DedupeDecided => "dedupe.decided",
        // The conversation: an answer to a confirmation (accepted, declined, refused, too late,
        // and from whom), and each prompt or reply the provider took or refused.
        ConfirmationAnswered => "command.confirmation.answered",
        MessageSent => "conversation.message.sent",
        MessageFailed => "conversation.message.failed",
        // A recovery command was made for this command (it links to it; the recovery's own
        // artifacts link back through `target_command_id`).
        RecoveryRequested => "recovery.requested",
        // The directory: a person or a role made, changed, deactivated, deleted or erased (who
        // changed whom, from what to what; the person named by their keyed pseudonym).
        DirectoryChanged => "directory.changed",
        // Approvals (issue #46): a request began waiting for other people's approval (which
        // rules, whose roles, how many, until when), and each person's decision on it (counted
        // or not, and why).
        ApprovalRequested => "approval.requested",
        ApprovalDecided => "approval.decided",
        // Break-glass: an operator settled a pending approval without its approvers, with a
        // step-up proof of their own and a written reason.
        ApprovalOverridden => "approval.overridden",
        // An approval's escalation came due: the holders of its roles were asked too.
        ApprovalEscalated => "approval.escalated",
        // Locks (issue #47): an operator released what a command held before it ended.
        LockReleased => "lock.released",
        // Retention (issue #50): a purge overwrote this tenant's texts older than its cut (how
        // many messages, replies and prompts).
        RetentionPurged => "retention.purged",
    }
}

impl EvidenceKind {
    /// SMCL §IX's minimum evidence map. `rejected` appears twice in the seed's map (an authz
    /// decision and an execution outcome), so it writes both.
    pub fn for_state(state: State) -> &'static [EvidenceKind] {
        use EvidenceKind as K;
        match state {
            // `received` is pre-envelope: no command exists yet to carry evidence.
            State::Received => &[],
            State::Canonicalized => &[K::CommandAccepted],
            State::ConfirmationRequired => &[K::ConfirmationRequested],
            State::Confirmed => &[K::ConfirmationSatisfied],
            State::AuthzPending => &[K::AuthzRequested],
            State::Authorized => &[K::AuthzDecided],
            State::Rejected => &[K::AuthzDecided, K::ExecutionRejected],
            State::Started => &[K::ExecutionStarted],
            State::Executed => &[K::ExecutionExecuted],
            State::Failed => &[K::ExecutionFailed],
            State::Canceled => &[K::CommandCanceled],
            State::Compensated => &[K::CompensationCompensated],
        }
    }
}
