//! Approvals (issue #46): a request its command's policy holds for other people's approval waits
//! in `authz_pending` (DESIGN §5b: part of authorization, no new SMCL state) with one approval
//! row; people who may decide approve or deny it, each once; when every rule has its quorum the
//! command is allowed and dispatched, a denial or the end of the wait rejects it. Evaluating the
//! policy is the domain's (`domain::registry::approvals`), opening one is authorization's
//! (`security::approval`); this is its life after.

pub mod break_glass;
pub mod decide;
pub mod escalate;
pub mod execution;
pub mod expire;
mod settle;
pub mod view;

pub use crate::store::ApprovalStatus;
pub use settle::{APPROVAL_DENIED, APPROVAL_EXPIRED};
