//! An approver's tap on an approval request (`cg:approve:<approval>`, `cg:deny:<approval>`):
//! decided as a decision over the API is — as the person who tapped, once, only if theirs to
//! decide — and the approver told what it came to. The requester hears through their command's
//! own replies. The message is recorded with the answer (a redelivered tap finds it).

use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::directory::{Actor, Tenant};
use crate::domain::message::{Content, InboundStatus};
use crate::domain::replies::{ApprovalAnswer, Reply};
use crate::service::approvals::decide::{Decided, Deciding, decide};
use crate::service::engine::EngineError;
use crate::service::intake::{Handled, Ingress};
use crate::store::ReplyTo;

/// A tap on an approval request's button.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ApprovalTap {
    pub(super) approval_id: Uuid,
    pub(super) approve: bool,
}

impl ApprovalTap {
    /// Reads a button reply as a tap, or `None` when it is something else.
    pub(super) fn parse(content: &Content) -> Option<Self> {
        let Content::Reply { id, .. } = content else { return None };
        let mut parts = id.splitn(3, ':');
        let (prefix, verdict, approval) = (parts.next()?, parts.next()?, parts.next()?);
        let approve = match (prefix, verdict) {
            ("cg", "approve") => true,
            ("cg", "deny") => false,
            _ => return None,
        };
        Some(Self { approval_id: approval.parse().ok()?, approve })
    }
}

impl Ingress {
    /// Decides `tap` as `actor` and tells them what it came to.
    pub(super) async fn approval_tap(
        &self,
        (message, tenant, actor): (&crate::domain::message::InboundMessage, &Tenant, &Actor),
        tap: ApprovalTap,
        reply_to: &ReplyTo,
        now: OffsetDateTime,
    ) -> Result<Handled, EngineError> {
        let deciding = Deciding {
            tenant: &tenant.id,
            approval_id: tap.approval_id,
            approver: actor.id.as_str(),
            approve: tap.approve,
            reason: None,
            via: message.channel.as_str(),
        };
        let decided = decide(self.engine(), self.policy(), &deciding, now).await?;
        let shown = crate::service::approvals::view::approval(self.engine(), &tenant.id, tap.approval_id).await?;
        let what = shown.as_ref().map(|a| a.what.clone()).unwrap_or_default();
        let (status, missing) = match &decided {
            Decided::Waiting(missing) => (String::new(), missing.iter().map(|m| m.approvals).sum()),
            Decided::Settled { status } => (status.as_str().to_owned(), 0),
            _ => (String::new(), 0),
        };
        let outcome = decided.outcome();
        let answer = ApprovalAnswer { outcome, what, status, missing };
        let reply = reply_to.message(&Reply::ApprovalAnswer(answer));
        self.record(message, Some(tenant), InboundStatus::Answer, &[reply], Handled::ApprovalDecision(outcome), now)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tap_names_its_approval_and_the_decision() {
        let id = Uuid::now_v7();
        let tap = |button: String| ApprovalTap::parse(&Content::Reply { id: button, title: "Approve".into() });
        assert_eq!(tap(format!("cg:approve:{id}")), Some(ApprovalTap { approval_id: id, approve: true }));
        assert_eq!(tap(format!("cg:deny:{id}")), Some(ApprovalTap { approval_id: id, approve: false }));
        assert_eq!(tap(format!("cg:yes:{id}")), None, "a confirmation's button");
        assert_eq!(tap("cg:approve:not-an-id".into()), None);
        assert_eq!(ApprovalTap::parse(&Content::Text(format!("cg:approve:{id}"))), None);
    }
}
