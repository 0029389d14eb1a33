//! Reprocessing (a recovery action): a command's stored message interpreted again under the
//! current registry and directory, and admitted as a new command that names the old one.

use time::OffsetDateTime;
use uuid::Uuid;

use super::identity::Writer;
use super::{Asked, Handled, Ingress, MessageOutcome, reply_address};
use crate::domain::message::{Content, InboundMessage, NoCommand};
use crate::domain::registry::Interpretation;
use crate::service::engine::EngineError;
use crate::service::security::Spec;
use crate::store::{Released, StoredCommand};

/// What reprocessing a stored message came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Reprocessed {
    Command(Uuid),
    /// Under the current registry and directory the message starts no command (why).
    NotACommand(MessageOutcome),
}

impl Ingress {
    /// Reprocessing (a recovery action): `target`'s stored message interpreted again under the
    /// current registry and directory, and admitted as a new command naming `target`.
    pub async fn reprocess(
        &self,
        target: &StoredCommand,
        message: &InboundMessage,
        now: OffsetDateTime,
    ) -> Result<Reprocessed, EngineError> {
        let tenants = self.policy.tenants.get();
        let Some(tenant) = tenants.tenant_for_number(&message.to).filter(|t| t.id == target.envelope.tenant_id) else {
            return Ok(Reprocessed::NotACommand(MessageOutcome::Unroutable));
        };
        // Reprocessing never waits: the resolver's latest answer says who the sender is (the
        // command being reprocessed was admitted after it), and a sender it has not named is
        // unknown here.
        let Writer::Known(actor) = self.who_wrote(message, tenant, Some(Released::Answered), now).await? else {
            return Ok(Reprocessed::NotACommand(MessageOutcome::UnknownSender));
        };
        let registry = self.policy.registry.current();
        let interpretation = match &message.content {
            Content::Text(text) => registry.interpret_text_for(text, &tenant.audience()),
            Content::Reply { id, .. } => registry.interpret_reply_id(id),
            _ => return Ok(Reprocessed::NotACommand(MessageOutcome::NoCommand(NoCommand::NotACommand))),
        };
        let (at, args, reading) = match interpretation {
            Interpretation::Command { at, args, reading, .. } => (at, args, reading),
            Interpretation::BrokenRule { .. } => {
                return Ok(Reprocessed::NotACommand(MessageOutcome::NoCommand(NoCommand::InvalidValue)));
            }
            _ => return Ok(Reprocessed::NotACommand(MessageOutcome::NoCommand(NoCommand::NoMatch))),
        };
        let asked = Asked { spec: Spec::at(&registry, at), args, reading };
        let reply_to = reply_address(message, tenant);
        match self.admit_as(message, tenant, &actor, asked, reply_to, Some(target), now).await? {
            Handled::Command { command_id, .. } => Ok(Reprocessed::Command(command_id)),
            other => Ok(Reprocessed::NotACommand(other.outcome())),
        }
    }
}
