//! An approver's tap on an approval request (`cg:approve:<approval>`, `cg:deny:<approval>`):
//! decided as a decision over the API is — as the person who tapped, once, only if theirs to
//! decide — and the approver told what it came to. The requester hears through their command's
//! own replies. The message is recorded with the answer (a redelivered tap finds it).

use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::{ShortRef, TenantId};
use crate::domain::directory::{Actor, Tenant};
use crate::domain::message::{Content, InboundStatus};
use crate::domain::registry::approvals::Vote;
use crate::domain::replies::{ApprovalAnswer, Reply};
use crate::service::approvals::decide::{Decided, Deciding, decide};
use crate::service::engine::EngineError;
use crate::service::intake::{Handled, Ingress};
use crate::store::ReplyTo;

/// A tap on an approval request's button, or a reply in words (`APPROVE K7Q2XW`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ApprovalTap {
    pub(super) approval: Named,
    pub(super) vote: Vote,
}

/// How a tap names its approval: a button carries its id, words its short code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Named {
    Id(Uuid),
    Code(ShortRef),
}

impl ApprovalTap {
    /// Reads a button reply or a text as a tap, or `None` when it is something else.
    pub(super) fn parse(content: &Content) -> Option<Self> {
        match content {
            Content::Reply { id, .. } => {
                let mut parts = id.splitn(3, ':');
                let (prefix, verdict, approval) = (parts.next()?, parts.next()?, parts.next()?);
                if prefix != "cg" {
                    return None;
                }
                let vote = verdict.parse().ok()?;
                Some(Self { approval: Named::Id(approval.parse().ok()?), vote })
            }
            // SMS and any channel without buttons: the verdict and the code the request gave.
            Content::Text(text) => {
                let mut words = text.split_whitespace();
                let (verdict, code) = (words.next()?, words.next()?);
                let vote = verdict.to_ascii_lowercase().parse().ok()?;
                let code = ShortRef::parse(code).ok().filter(|_| words.next().is_none())?;
                Some(Self { approval: Named::Code(code), vote })
            }
            _ => None,
        }
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
        let approval_id = match &tap.approval {
            Named::Id(id) => *id,
            Named::Code(code) => self.pending_approval(&tenant.id, code).await?.unwrap_or(Uuid::nil()),
        };
        let deciding = Deciding {
            tenant: &tenant.id,
            approval_id,
            approver: actor.id.as_str(),
            vote: tap.vote,
            reason: None,
            via: message.channel.as_str(),
            step_up: None,
        };
        let decided = decide(self.engine(), self.policy(), &deciding, now).await?;
        let shown = crate::service::approvals::view::approval(self.engine(), &tenant.id, approval_id).await?;
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

impl Ingress {
    /// The tenant's pending approval whose short code is `code`.
    async fn pending_approval(&self, tenant: &TenantId, code: &ShortRef) -> Result<Option<Uuid>, EngineError> {
        let pending = self.engine().store().approvals().pending(tenant, PENDING_SEARCHED).await?;
        Ok(pending.into_iter().map(|a| a.id).find(|id| ShortRef::of(*id) == *code))
    }
}

/// How many of a tenant's pending approvals a code is looked for among (oldest first).
const PENDING_SEARCHED: i64 = 1_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tap_names_its_approval_and_the_decision() {
        let id = Uuid::now_v7();
        let tap = |button: String| ApprovalTap::parse(&Content::Reply { id: button, title: "Approve".into() });
        assert_eq!(tap(format!("cg:approve:{id}")), Some(ApprovalTap { approval: Named::Id(id), vote: Vote::Approve }));
        assert_eq!(tap(format!("cg:deny:{id}")), Some(ApprovalTap { approval: Named::Id(id), vote: Vote::Deny }));
        assert_eq!(tap(format!("cg:yes:{id}")), None, "a confirmation's button");
        assert_eq!(tap("cg:approve:not-an-id".into()), None);
        assert_eq!(ApprovalTap::parse(&Content::Text(format!("cg:approve:{id}"))), None);
    }

    #[test]
    fn words_name_an_approval_by_its_code() {
        let said = |text: &str| ApprovalTap::parse(&Content::Text(text.into()));
        let code = ShortRef::of(Uuid::nil());
        let approve = Some(ApprovalTap { approval: Named::Code(code.clone()), vote: Vote::Approve });
        assert_eq!(said(&format!("APPROVE {code}")), approve);
        assert_eq!(said(&format!("approve {}", code.as_str().to_lowercase())), approve, "typed loosely");
        assert_eq!(said(&format!("Deny {code}")).map(|t| t.vote), Some(Vote::Deny));
        assert_eq!(said("approve"), None);
        assert_eq!(said(&format!("approve {code} please")), None, "only the verdict and the code");
        assert_eq!(said("refund 1234 25.00"), None);
    }
}
