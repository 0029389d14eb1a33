//! Messages about linking a person's channels (issue #48), read before anything else a person
//! writes: "link" from a listed person asks for a one-time code; "link CODE" from an address the
//! tenant does not list offers it, within the attempts its sender and the tenant may make (so
//! that codes cannot be guessed), and links the address to the code's person, who is told on
//! their existing channel; "stop" from the person afterwards undoes it. Each answer is written
//! with its message, once.

use time::OffsetDateTime;

use super::{Handled, Ingress};
use crate::domain::directory::{Actor, Address, AddressKind, LinkCode, LinkRefusal, LinkStep, Person, Tenant};
use crate::domain::message::{Content, InboundMessage, NoCommand};
use crate::domain::reach::reach;
use crate::domain::registry::Linking;
use crate::domain::replies::{LinkReply, Reply};
use crate::service::directory::{DirectoryError, Linked, People, STRANGER_PREFIX};
use crate::service::engine::EngineError;
use crate::service::security::ratelimit::Budget;
use crate::store::{NewOutboxMessage, ReplyTo, StoreError};

/// A reply about linking at `step`.
fn link_reply(step: LinkStep) -> LinkReply {
    LinkReply { step, code: None, expires_in_minutes: None, channel: None, reason: None }
}

/// The address `message` came from, as the directory keeps it (`tg:700000001`).
fn sender_address(message: &InboundMessage) -> Option<Address> {
    let raw = People::address_of(&message.from);
    AddressKind::of_sender(message.channel.as_str(), raw).and_then(|kind| Address::new(kind, raw).ok())
}

/// A directory change about a link that failed: the store's failure, or one to retry the message
/// for (another change kept crossing it).
fn engine_error(error: DirectoryError) -> EngineError {
    match error {
        DirectoryError::Store(error) => EngineError::Store(error),
        other => EngineError::Store(StoreError::Unavailable(format!("linking: {other}; retry the message"))),
    }
}

fn refused(reason: LinkRefusal) -> Reply {
    Reply::Link(LinkReply { reason: Some(reason), ..link_reply(LinkStep::Refused) })
}

impl Ingress {
    /// `message` from `writer` (none: a stranger) about linking, answered; `None` when it is
    /// about something else (a "stop" with no link to undo is a cancel as ever; a stranger's
    /// "link" is a stranger's message).
    pub(super) async fn linking(
        &self,
        message: &InboundMessage,
        tenant: &Tenant,
        writer: Option<&Actor>,
        reply_to: &ReplyTo,
        now: OffsetDateTime,
    ) -> Result<Option<Handled>, EngineError> {
        let Content::Text(text) = &message.content else { return Ok(None) };
        let Some(linking) = self.policy.registry.current().linking(text) else { return Ok(None) };
        // Someone handled in the tenant's role for strangers is no listed person.
        let listed = writer.map(|actor| actor.id.as_str()).filter(|id| !id.starts_with(STRANGER_PREFIX));
        let people = &self.policy.people;
        let (status, replies) = match (linking, listed) {
            (Linking::Ask, Some(id)) => {
                let issued = match people.issue_link_code(&tenant.id, id, now).await {
                    Ok(issued) => issued,
                    // Named by the tenant's identity resolver, not listed: nobody to link to.
                    Err(DirectoryError::NotFound(_)) => {
                        let reply = reply_to.message(&refused(LinkRefusal::Unknown));
                        return self.no_command(message, tenant, NoCommand::LinkRefused, &[reply], now).await.map(Some);
                    }
                    Err(error) => return Err(engine_error(error)),
                };
                let minutes = people.link_rules().code_ttl.as_secs().div_ceil(60);
                let code = Some(issued.code.as_str().to_owned());
                let reply = LinkReply { code, expires_in_minutes: Some(minutes), ..link_reply(LinkStep::Code) };
                (NoCommand::LinkCode, vec![reply_to.message(&Reply::Link(reply))])
            }
            (Linking::Offer(_), Some(_)) => {
                (NoCommand::LinkRefused, vec![reply_to.message(&refused(LinkRefusal::Listed))])
            }
            (Linking::Offer(code), None) => self.offered(message, tenant, &code, reply_to, now).await?,
            (Linking::NotMe, Some(id)) => match self.undo_link(message, tenant, id, now).await? {
                Some(unlinked) => {
                    let channel = Some(unlinked.address.kind.channel_name().to_owned());
                    let reply = Reply::Link(LinkReply { channel, ..link_reply(LinkStep::Undone) });
                    (NoCommand::Unlinked, vec![reply_to.message(&reply)])
                }
                None => return Ok(None),
            },
            (Linking::Ask | Linking::NotMe, None) => return Ok(None),
        };
        self.no_command(message, tenant, status, &replies, now).await.map(Some)
    }

    /// A code offered from an address nobody lists: counted against the sender's and the
    /// tenant's attempts before it is looked up; linked, or refused without saying why a code
    /// was wrong. A refusal past the attempts is sent only within the tenant's budget of replies
    /// to strangers.
    async fn offered(
        &self,
        message: &InboundMessage,
        tenant: &Tenant,
        code: &str,
        reply_to: &ReplyTo,
        now: OffsetDateTime,
    ) -> Result<(NoCommand, Vec<NewOutboxMessage>), EngineError> {
        let (store, limits) = (self.engine.store(), &self.policy.security.limits);
        let sender = format!("{}:{}", message.channel, message.from);
        if limits.link_attempt(store, tenant.id.as_str(), &sender, now).await?.is_err() {
            let labels = [("tenant", tenant.id.to_string())];
            metrics::counter!("chatgate_link_attempts_refused_total", &labels).increment(1);
            let budget = limits.take(self.engine.database(), Budget::UnknownSenderReplies, tenant.id.as_str(), now);
            let told = budget.await?.is_ok().then(|| reply_to.message(&refused(LinkRefusal::TooMany)));
            return Ok((NoCommand::LinkRefused, told.into_iter().collect()));
        }
        let (Some(code), Some(address)) = (LinkCode::parse(code), sender_address(message)) else {
            return Ok((NoCommand::LinkRefused, vec![reply_to.message(&refused(LinkRefusal::Wrong))]));
        };
        let linked =
            self.policy.people.redeem_link_code(&tenant.id, &code, address, now).await.map_err(engine_error)?;
        let channel = |address: &Address| Some(address.kind.channel_name().to_owned());
        Ok(match linked {
            Linked::Now { before, address } => {
                let told = Reply::Link(LinkReply { channel: channel(&address), ..link_reply(LinkStep::Linked) });
                let mut replies = vec![reply_to.message(&told)];
                replies.extend(self.link_notice(&before, tenant, &address));
                (NoCommand::Linked, replies)
            }
            Linked::Refused(reason) => (NoCommand::LinkRefused, vec![reply_to.message(&refused(reason))]),
        })
    }

    /// "stop" from a listed person: their latest link undone, if one may be and it is not the
    /// address writing.
    async fn undo_link(
        &self,
        message: &InboundMessage,
        tenant: &Tenant,
        id: &str,
        now: OffsetDateTime,
    ) -> Result<Option<crate::service::directory::Unlinked>, EngineError> {
        let from = sender_address(message).map(|a| a.value).unwrap_or_default();
        self.policy.people.undo_link(&tenant.id, id, &from, now).await.map_err(engine_error)
    }

    /// The notice to the person on a channel they had before the link: "your Telegram was
    /// linked; not you? reply STOP". None when the tenant reaches them on none of those.
    fn link_notice(&self, before: &Person, tenant: &Tenant, linked: &Address) -> Option<NewOutboxMessage> {
        let locale = before.locale.clone().unwrap_or_else(|| tenant.locale.clone());
        let (address, conversation) = reach(before, tenant, &locale)?;
        let channel = Some(linked.kind.channel_name().to_owned());
        let notice = Reply::Link(LinkReply { channel, ..link_reply(LinkStep::Notice) });
        // A message, not a notice that waits behind others: it may be the person's only warning.
        Some(ReplyTo::to(address, conversation).message(&notice))
    }
}
