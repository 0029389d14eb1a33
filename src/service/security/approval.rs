//! What a request the policy holds for approval does when it is authorized: it stays in
//! `authz_pending`, one approval row is opened in the same step (what the policy asked, until
//! when), the step's evidence says so, and the requester is told by whom it waits (roles, never
//! a person's address).

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::ShortRef;
use crate::domain::evidence::decision::Decision;
use crate::domain::outbound::{ButtonSpec, Purpose};
use crate::domain::preview::Preview;
use crate::domain::reach::reach;
use crate::domain::registry::approvals::Need;
use crate::domain::replies::{ApprovalRequest, ApprovalRequired, Reply};
use crate::service::security::Policy;
use crate::store::Search;
use crate::store::{ApprovalWrite, AskedBy, NewApproval, NewOutboxMessage, ReplyTo, StoreError, StoredCommand};

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
/// that apply, or the executor's wait, by name); `name` is the command as the person knows it.
pub fn opening(
    command: &StoredCommand,
    (needs, asked_by): (Vec<(String, Need)>, AskedBy),
    name: &str,
    now: OffsetDateTime,
) -> Opening {
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
        asked_by,
    });
    Opening { write, decision: decision.into(), notice }
}

/// Whom an approval asks: the holders of `roles`, never its requester.
#[derive(Debug, Clone)]
pub struct Asked<'a> {
    pub id: Uuid,
    pub requester: &'a str,
    pub needs: &'a [(String, Need)],
    pub roles: BTreeSet<String>,
}

impl<'a> Asked<'a> {
    /// Its approvers, as it is opened.
    pub fn approvers(approval: &'a NewApproval) -> Self {
        let roles = approval.needs.iter().flat_map(|(_, need)| need.approvers.iter().cloned()).collect();
        Self { id: approval.id, requester: &approval.requester, needs: &approval.needs, roles }
    }
}

/// The people an approval asks, each on their own channel (`domain::reach`: WhatsApp, Slack,
/// Telegram, Messenger, Instagram or SMS) with Approve and Deny buttons (ids
/// `cg:approve:<approval>` and `cg:deny:<approval>`; the channel draws them its way) and the
/// approval's code for a reply in words (`APPROVE <code>`): the active holders of the roles
/// asked, never the requester, each once. Someone reachable on none of the tenant's channels is
/// not asked here (they decide over the API or the console).
pub async fn asks(
    policy: &Policy,
    (command, preview): (&StoredCommand, Option<&Preview>),
    approval: &Asked<'_>,
    name: &str,
) -> Result<Vec<NewOutboxMessage>, StoreError> {
    let e = &command.envelope;
    let tenants = policy.tenants.get();
    let Some(tenant) = tenants.tenant(e.tenant_id.as_str()) else { return Ok(vec![]) };
    let mut asked = BTreeSet::new();
    let mut people = vec![];
    for role in &approval.roles {
        let search = Search { role: Some(role.clone()), active: Some(true), limit: 100, ..Search::default() };
        for stored in policy.people.list(&e.tenant_id, &search).await? {
            let person = stored.person;
            if person.id.as_str() != approval.requester && asked.insert(person.id.as_str().to_owned()) {
                people.push(person);
            }
        }
    }
    let requester = policy.people.actor(&e.tenant_id, approval.requester).await?;
    let request = ApprovalRequest {
        requester: requester.map_or_else(|| approval.requester.to_owned(), |actor| actor.name),
        what: command.reply_to.as_ref().and_then(|r| r.what.clone()).unwrap_or_else(|| name.to_owned()),
        command_id: e.command_id,
        rules: approval.needs.iter().map(|(rule, _)| rule.clone()).collect(),
        approvals: approval.needs.iter().map(|(_, need)| need.quorum).max().unwrap_or(1),
        within_minutes: approval.needs.iter().map(|(_, need)| need.within.as_secs() / 60).max().unwrap_or(0),
        code: ShortRef::of(approval.id).to_string(),
        preview: preview.cloned(),
    };
    let reply = Reply::ApprovalRequest(request);
    let messages = people.iter().filter_map(|person| {
        let locale = person.locale.clone().unwrap_or_else(|| tenant.locale.clone());
        let (address, conversation) = reach(person, tenant, &locale)?;
        let to = ReplyTo::to(address, conversation);
        let mut message = to.chat(&reply);
        let chat = message.message_mut();
        chat.purpose = Purpose::Prompt;
        chat.buttons = [("approve", "button_approve"), ("deny", "button_deny")]
            .into_iter()
            .map(|(verdict, template)| ButtonSpec { id: tap_id(verdict, approval.id), template: template.into() })
            .collect();
        Some(to.outbox(&message))
    });
    Ok(messages.collect())
}

/// A button's id for deciding on approval `id` (`approve` or `deny`).
pub fn tap_id(verdict: &str, id: Uuid) -> String {
    format!("cg:{verdict}:{id}")
}
