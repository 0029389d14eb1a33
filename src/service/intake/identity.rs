//! Who wrote a message, when the directory may not say: the person it lists, the person the
//! tenant's identity resolver named, someone in the tenant's role for strangers, or a stranger —
//! and, while the resolver has not answered, nobody yet: the message stays parked in the inbox
//! (it was acknowledged when it was stored there), and is admitted in its place once the resolver
//! answers, or past the tenant's `give_up_after` as a stranger's. Meanwhile nothing is said to
//! the person.

use std::collections::BTreeMap;

use time::OffsetDateTime;

use super::{Handled, Ingress};
use crate::domain::directory::{Actor, Tenant};
use crate::domain::message::{InboundMessage, InboundStatus};
use crate::service::directory::{People, Resolution};
use crate::service::engine::EngineError;
use crate::store::{NewLookup, Released, StoreError};

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
    /// Looks up the writers of a batch of messages together ([`People::know`]), so that each
    /// message's own lookup is answered from memory. A failure here only leaves each message to
    /// be looked up on its own, where it is handled as any failed lookup.
    pub async fn know_writers(&self, messages: &[&InboundMessage]) {
        let tenants = self.policy.tenants.get();
        let mut by_tenant: BTreeMap<&str, (&Tenant, Vec<&str>)> = BTreeMap::new();
        for message in messages {
            if let Some(tenant) = tenants.tenant_for_number(&message.to) {
                let (_, addresses) = by_tenant.entry(tenant.id.as_str()).or_insert((tenant, vec![]));
                addresses.push(People::address_of(&message.from));
            }
        }
        for (tenant, addresses) in by_tenant.into_values() {
            if let Err(error) = self.policy.people.know(&tenant.id, &addresses).await {
                tracing::debug!(%error, tenant = %tenant.id, "cannot look up a batch's writers together");
            }
        }
    }

    pub(super) async fn who_wrote(
        &self,
        message: &InboundMessage,
        tenant: &Tenant,
        released: Option<Released>,
        now: OffsetDateTime,
    ) -> Result<Writer, StoreError> {
        let people = &self.policy.people;
        let address = People::address_of(&message.from);
        if let Some(actor) = people.find(&tenant.id, address).await? {
            return Ok(Writer::Known(actor));
        }
        if tenant.resolver.is_some() {
            // A message the resolver's answer let go (or giving up on it) is never parked again.
            let resolution = match released {
                None => people.resolution(&tenant.id, address, now).await?,
                Some(Released::Answered) => {
                    people.answered_as(&tenant.id, address).await?.map_or(Resolution::Unknown, Resolution::Known)
                }
                Some(Released::GivenUp) => Resolution::Unknown,
            };
            match resolution {
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
        self.record(message, Some(tenant), InboundStatus::RateLimited, &[], Handled::RateLimited, now).await.map(Some)
    }

    /// Parks `message` in the inbox for the resolver's answer about its sender, asked once per
    /// sender (who counts against a stranger's limit meanwhile). A message handled before (a
    /// provider's late retry, stored again once the first copy was forgotten) is a redelivery.
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
        let address = People::address_of(&message.from);
        let lookup = NewLookup {
            tenant: &tenant.id,
            channel: message.channel.as_str(),
            provider_message_id: message.provider_message_id.as_str(),
            address,
            profile_name: message.sender_name.as_deref(),
            asked_at: now,
        };
        if !store.identities().ask_about(&lookup).await? {
            return Ok(Handled::Redelivered);
        }
        let key = (message.channel.as_str(), message.provider_message_id.as_str());
        store.inbox().park(key, (&tenant.id, address)).await?;
        Ok(Handled::AwaitingIdentity)
    }
}
