//! Who wrote a message, when the directory may not say: the person it lists, the person the
//! tenant's identity resolver named, someone in the tenant's role for strangers, or a stranger —
//! and, while the resolver has not answered, nobody yet: the message is kept and acknowledged,
//! and handled (in the order its sender's messages came) once it answers, or past the tenant's
//! `give_up_after` as a stranger's. Meanwhile nothing is said to the person.

use time::OffsetDateTime;

use super::{Handled, Ingress};
use crate::domain::directory::{Actor, Tenant};
use crate::domain::message::InboundMessage;
use crate::service::directory::{People, Resolution};
use crate::service::engine::EngineError;
use crate::store::{NewWait, StoreError};

/// Who wrote a message, as far as is known now.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Writer {
    /// A person: listed, named by the resolver, or in the tenant's role for strangers.
    Known(Actor),
    Stranger,
    /// The resolver is asked; the message waits for its answer.
    Wait,
}

impl Ingress {
    pub(super) async fn who_wrote(
        &self,
        message: &InboundMessage,
        tenant: &Tenant,
        now: OffsetDateTime,
    ) -> Result<Writer, StoreError> {
        let people = &self.policy.people;
        let address = People::address_of(&message.from);
        if let Some(actor) = people.find(&tenant.id, address).await? {
            return Ok(Writer::Known(actor));
        }
        if tenant.resolver.is_some() {
            match people.resolution(&tenant.id, address, now).await? {
                Resolution::Known(actor) => return Ok(Writer::Known(actor)),
                Resolution::Ask => return Ok(Writer::Wait),
                Resolution::Unknown => {}
            }
        }
        self.as_stranger(message, tenant).await
    }

    /// Someone nobody listed: in the tenant's role for strangers, if it gives one.
    async fn as_stranger(&self, message: &InboundMessage, tenant: &Tenant) -> Result<Writer, StoreError> {
        let (channel, address) = (message.channel.as_str(), People::address_of(&message.from));
        let role = tenant.unknown_sender.role();
        let name = message.sender_name.as_deref();
        let stranger = self.policy.people.stranger(&tenant.id, (channel, address), role, name).await?;
        Ok(stranger.map_or(Writer::Stranger, Writer::Known))
    }

    /// A message from someone the tenant does not list (or not yet known), over the limit their
    /// address shares with an actor's: kept as rate-limited, unanswered.
    pub(super) async fn stranger_limited(
        &self,
        message: &InboundMessage,
        tenant: &Tenant,
        now: OffsetDateTime,
    ) -> Result<Option<Handled>, EngineError> {
        let (store, limits) = (self.engine.store(), &self.policy.security.limits);
        let stranger = format!("unknown:{}:{}", message.channel, message.from);
        if limits.inbound_shared(store, tenant.id.as_str(), &stranger, now).await?.is_ok() {
            return Ok(None);
        }
        self.record(message, Some(tenant), "rate_limited", &[], Handled::RateLimited, now).await.map(Some)
    }

    /// Keeps `message` for the resolver (its sender counts against a stranger's limit meanwhile).
    pub(super) async fn wait(
        &self,
        message: &InboundMessage,
        tenant: &Tenant,
        now: OffsetDateTime,
    ) -> Result<Handled, EngineError> {
        if let Some(limited) = self.stranger_limited(message, tenant, now).await? {
            return Ok(limited);
        }
        let store = self.engine.store();
        let conversation = super::first_moves::conversation_id(message);
        let wait = NewWait {
            tenant: &tenant.id,
            channel: message.channel.as_str(),
            provider_message_id: message.provider_message_id.as_str(),
            address: People::address_of(&message.from),
            profile_name: message.sender_name.as_deref(),
            conversation_id: conversation.as_str(),
            payload: &message.raw,
            received_at: now,
        };
        store.identities().wait(&wait).await?;
        Ok(Handled::AwaitingIdentity)
    }

    /// A message that waited for the resolver, handled now that its sender is known (`Some`) or
    /// is not (`None`: as a stranger's). Handled once: a message handled before is a redelivery.
    pub async fn handle_resolved(
        &self,
        message: &InboundMessage,
        person: Option<Actor>,
        now: OffsetDateTime,
    ) -> Result<Handled, EngineError> {
        let tenants = self.policy.tenants.get();
        let Some(tenant) = tenants.tenant_for_number(&message.to) else {
            return self.record(message, None, "unroutable", &[], Handled::Unroutable, now).await;
        };
        // Listed meanwhile: the directory says who they are.
        let listed = self.policy.people.find(&tenant.id, People::address_of(&message.from)).await?;
        let writer = match listed.or(person) {
            Some(actor) => Writer::Known(actor),
            None => self.as_stranger(message, tenant).await?,
        };
        let handled = self.handle_as(message, tenant, writer, now).await?;
        let labels = [("channel", message.channel.to_string()), ("outcome", handled.outcome().to_owned())];
        metrics::counter!("chatgate_inbound_messages_total", &labels).increment(1);
        Ok(handled)
    }
}
