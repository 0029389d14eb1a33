//! What intake needs from the modules above it, handed down by the composition root
//! (`service::services`): imports point down, and what only a higher module knows comes as a
//! trait object.

use serde_json::Value;

use crate::domain::command::{Args, ExternalId, TenantId};
use crate::domain::directory::Actor;
use crate::domain::message::InboundMessage;
use crate::domain::registry::CommandSpec;
use crate::service::database::Database;
use crate::service::security::Policy;
use crate::store::StoreError;

/// Reads a stored message (as `Store::message_of` returns it) back into the message it was, for
/// reprocessing. Each channel knows its own stored form, and channels sit above this layer, so
/// the composition root hands intake a reader (`channels::StoredMessageReader`).
/// `conversation` is the command's (`{channel}:{business number}:{person}`).
pub trait StoredMessages: Send + Sync {
    fn reread(&self, channel: &str, raw: &Value, conversation: &ExternalId) -> Option<InboundMessage>;
}

/// Why a command is refused before its confirmation: its reason code and what the person hears
/// (the `error` of the `failed` reply).
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub code: &'static str,
    pub detail: Value,
}

/// Checks a chat operation (a recovery action, an agent move) before the person is asked to
/// confirm it, so that a confirmation that could never lead anywhere is not asked for. The chat
/// operations know what they need (`service::ooc::Precheck` implements it).
#[async_trait::async_trait]
pub trait Precheck: Send + Sync {
    /// `None` when `spec` may go on to its confirmation.
    async fn refused(
        &self,
        database: &Database,
        policy: &Policy,
        asked: ToCheck<'_>,
    ) -> Result<Option<Refused>, StoreError>;
}

/// What a check before a confirmation looks at: whose command, under which entry, with what.
#[derive(Debug, Clone, Copy)]
pub struct ToCheck<'a> {
    pub tenant: &'a TenantId,
    pub actor: &'a Actor,
    pub spec: &'a CommandSpec,
    pub args: &'a Args,
}
