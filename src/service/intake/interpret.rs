//! A message from a known person that is not an answer, read: as a command, as a turn of a
//! command being written in turns (`turns`), as the beginning of one, or as nothing, answered
//! with why (`unadmitted`).

use time::OffsetDateTime;

use crate::domain::directory::{Actor, Tenant};
use crate::domain::message::{Content, InboundMessage, NoCommand};
use crate::domain::registry::{Interpretation, Step};
use crate::domain::replies::{Help, Reply};
use crate::service::engine::EngineError;
use crate::service::security::Spec;
use crate::store::{ConversationMove, ReplyTo};

use super::ahead::key_of;
use super::turns::TurnAnswer;
use super::{Asked, Handled, Ingress, unadmitted};

impl Ingress {
    /// A message from a known actor that is not an answer: a command, a turn, help, or nothing.
    pub(super) async fn interpret(
        &self,
        message: &InboundMessage,
        tenant: &Tenant,
        actor: &Actor,
        reply_to: ReplyTo,
        now: OffsetDateTime,
    ) -> Result<Handled, EngineError> {
        // Not a request (a reaction, a notice, an unreadable message): answering would be noise.
        if let Some(status) = message.content.unanswered() {
            return self.no_command(message, tenant, status, &[], now).await;
        }
        if let Content::Text(text) = &message.content
            && let Some(handled) = self.corrected((message, tenant, actor), text, &reply_to, now).await?
        {
            return Ok(handled);
        }
        let registry = self.policy.registry.current();
        let key = key_of(message, tenant, actor);
        let (interpretation, open) = match &message.content {
            Content::Text(text) => match unadmitted::suggestion_chosen(self.store(), text, &reply_to).await? {
                Some(id) => (registry.interpret_reply_id(&id), None),
                None => {
                    let (step, open) = self.step(text, (tenant, actor, &key), &registry, now).await?;
                    if let Some(TurnAnswer { status, reply, change }) =
                        self.turn_answer(&step, open.as_ref(), (&registry, tenant), now)
                    {
                        let reply = reply_to.message(&reply);
                        return self.answer_turn((message, tenant, &key), (status, reply), &change, now).await;
                    }
                    // A command (typed at once, or its last value written) ends the conversation.
                    let turn = open.map(|c| c.turn);
                    match step {
                        Step::Alone(read) | Step::Complete(read) => (read, turn),
                        Step::Ask { .. } | Step::Ended(_) => (Interpretation::NoMatch, turn),
                    }
                }
            },
            Content::Reply { id, .. } => (registry.interpret_reply_id(id), None),
            other => {
                let help = Help { commands: self.help(actor), unsupported: Some(other.kind().to_owned()) };
                let replies = [reply_to.message(&Reply::Help(help))];
                return self.no_command(message, tenant, NoCommand::NotACommand, &replies, now).await;
            }
        };
        let label = interpretation.label();
        metrics::counter!("chatgate_text_readings_total", "reading" => label).increment(1);
        match interpretation {
            Interpretation::Command { at, args, reading, .. } => {
                let asked = Asked { spec: Spec::at(&registry, at), args, reading };
                let handled = self.admit_as(message, tenant, actor, asked, reply_to, None, now).await?;
                self.end_turns(&key, open, now).await?;
                Ok(handled)
            }
            // Not a command: told why, or what was close, and never run.
            other => self.not_a_command((message, tenant, actor), &other, &reply_to, open, now).await,
        }
    }

    /// A reading that is no command, answered with why; a conversation open ends with it (its
    /// command is gone from the registry).
    async fn not_a_command(
        &self,
        (message, tenant, actor): (&InboundMessage, &Tenant, &Actor),
        read: &Interpretation<'_>,
        reply_to: &ReplyTo,
        open: Option<i64>,
        now: OffsetDateTime,
    ) -> Result<Handled, EngineError> {
        let (status, reply) = unadmitted::answer(read, reply_to, || self.help(actor));
        match open {
            Some(_) => {
                let key = key_of(message, tenant, actor);
                self.answer_turn((message, tenant, &key), (status, reply), &ConversationMove::End, now).await
            }
            None => self.no_command(message, tenant, status, &[reply], now).await,
        }
    }
}
