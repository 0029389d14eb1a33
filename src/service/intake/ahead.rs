//! The conversations of an admission pass's writers, read ahead in one statement per tenant
//! instead of one per message (issue #49: the lookup was a fifth of the statements a read
//! command cost PostgreSQL). Each key read ahead is taken by the first of its person's messages
//! that is read in its conversation; a later one reads the store, where the first may have moved
//! it. What is left when the pass ends is dropped. A conversation read ahead is as fresh as one
//! read when its message is: either may be moved by another instance before the message's
//! transaction, whose move names the turn it follows (`store::conversations`) and fails then.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use time::OffsetDateTime;

use crate::domain::directory::{Actor, Tenant};
use crate::domain::message::{Content, InboundMessage};
use crate::service::directory::People;
use crate::store::{Conversation, ConversationKey, StoreError};

use super::Ingress;

/// Whose conversation a message is in.
pub(super) fn key_of(message: &InboundMessage, tenant: &Tenant, actor: &Actor) -> ConversationKey {
    ConversationKey { tenant: tenant.id.clone(), actor: actor.id.clone(), channel: message.channel.clone() }
}

/// The conversations read ahead for the pass under way: `None` for a key read and found
/// without one.
#[derive(Debug, Clone, Default)]
pub(super) struct ReadAhead(Arc<Mutex<HashMap<ConversationKey, Option<Conversation>>>>);

impl ReadAhead {
    fn keys(&self) -> std::sync::MutexGuard<'_, HashMap<ConversationKey, Option<Conversation>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What was read ahead for `key`, once (`None`: not read ahead, or taken already).
    fn take(&self, key: &ConversationKey) -> Option<Option<Conversation>> {
        self.keys().remove(key)
    }

    /// Drops what no message took.
    pub(super) fn clear(&self) {
        self.keys().clear();
    }
}

impl Ingress {
    /// Reads ahead the conversations of the people who wrote `messages`' texts, as far as the
    /// directory's memory knows them (`Ingress::know_writers` just filled it); a failed read
    /// leaves each message to read its own.
    pub(super) async fn read_conversations_ahead(&self, messages: &[&InboundMessage]) {
        let tenants = self.policy.tenants.get();
        let mut by_tenant: BTreeMap<&str, (&Tenant, Vec<ConversationKey>)> = BTreeMap::new();
        for message in messages.iter().filter(|message| matches!(message.content, Content::Text(_))) {
            let Some(tenant) = tenants.tenant_for_number(&message.to) else { continue };
            let Some(actor) = self.policy.people.remembered(&tenant.id, People::address_of(&message.from)) else {
                continue;
            };
            let (_, keys) = by_tenant.entry(tenant.id.as_str()).or_insert((tenant, vec![]));
            keys.push(key_of(message, tenant, &actor));
        }
        let mut read: HashMap<ConversationKey, Option<Conversation>> = HashMap::new();
        for (tenant, keys) in by_tenant.into_values() {
            let mut actors: Vec<String> = keys.iter().map(|key| key.actor.as_str().to_owned()).collect();
            actors.sort_unstable();
            actors.dedup();
            match self.store().conversations_of(&tenant.id, &actors).await {
                Ok(open) => {
                    let found: HashMap<ConversationKey, Conversation> = open.into_iter().collect();
                    // Only the channels its messages came on (another channel's is another key);
                    // a person's key once however many of their messages the pass holds.
                    for key in keys {
                        let conversation = found.get(&key).cloned();
                        read.insert(key, conversation);
                    }
                }
                Err(error) => tracing::debug!(%error, tenant = %tenant.id, "conversations not read ahead"),
            }
        }
        *self.ahead.keys() = read;
    }

    /// `key`'s conversation, unless there is none or it ended quietly before `now`: as read
    /// ahead for the pass, or from the store.
    pub(super) async fn open_conversation(
        &self,
        key: &ConversationKey,
        now: OffsetDateTime,
    ) -> Result<Option<Conversation>, StoreError> {
        match self.ahead.take(key) {
            Some(read) => Ok(read.filter(|conversation| conversation.expires_at > now)),
            None => self.store().conversation(key, now).await,
        }
    }
}
