//! Corrections (issue #48, goal 2): while a person's request waits for its confirmation, "no, 30",
//! "make it 30" or "actually order 1235" (the language tables' `corrections`, read by
//! `Registry::correct`) replace it — the old request canceled (`corrected`) with its confirmation
//! closed, then the corrected one admitted from the same message and prompted — never a guess: a
//! message that corrects nothing is read as usual.

use time::OffsetDateTime;

use crate::domain::directory::{Actor, Tenant};
use crate::domain::message::InboundMessage;
use crate::domain::registry::{Correction, Interpretation, Reading, ReadingRule};
use crate::service::confirmations::corrected;
use crate::service::engine::EngineError;
use crate::service::security::Spec;
use crate::store::ReplyTo;

use super::{Asked, Handled, Ingress, unadmitted};

impl Ingress {
    /// `text` as a correction of the one request `actor` is asked to confirm now: the request
    /// replaced, or the rule its corrected value breaks told (the request stays). `None`: no
    /// correction (another message, no single live confirmation, or it moved meanwhile).
    pub(super) async fn corrected(
        &self,
        (message, tenant, actor): (&InboundMessage, &Tenant, &Actor),
        text: &str,
        reply_to: &ReplyTo,
        now: OffsetDateTime,
    ) -> Result<Option<Handled>, EngineError> {
        let registry = self.policy.registry.current();
        if !registry.may_correct(text) {
            return Ok(None);
        }
        let pending = self.store().confirmations().pending(&tenant.id, &actor.id).await?;
        let mut live = pending.into_iter().filter(|c| !c.is_expired_at(now));
        let (Some(confirmation), None) = (live.next(), live.next()) else { return Ok(None) };
        let old = self.engine.command(&tenant.id, confirmation.command_id).await?;
        let intent = &old.envelope.intent;
        let Some(at) = registry.position(&intent.entity, &intent.action) else { return Ok(None) };
        let spec = &registry.commands()[at];
        let args = match registry.correct(spec, &old.envelope.args, text, &tenant.audience()) {
            None => return Ok(None),
            Some(Correction::Broken(broken)) => {
                let (status, reply) =
                    unadmitted::answer(&Interpretation::BrokenRule { spec, broken }, reply_to, Vec::new);
                return Ok(Some(self.no_command(message, tenant, status, &[reply], now).await?));
            }
            Some(Correction::Values(args)) => args,
        };
        let by = (&actor.id, message.provider_message_id.as_str());
        if !corrected::close(&self.engine, (&confirmation, &old), by, now).await? {
            return Ok(None);
        }
        let pattern = spec.patterns.first().map(|p| p.source.clone()).unwrap_or_default();
        let reading = Reading { rule: ReadingRule::Corrected, pattern, typos: 0 };
        let asked = Asked { spec: Spec::at(&registry, at), args, reading };
        Ok(Some(self.admit_as(message, tenant, actor, asked, reply_to.clone(), None, now).await?))
    }
}
