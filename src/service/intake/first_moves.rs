//! What a message does first: the moves a new command makes right after `canonicalized`
//! (refused, asked to confirm, or authorized and dispatched at once), and where its replies go.

use std::collections::BTreeSet;

use serde_json::Value;
use time::OffsetDateTime;

use crate::domain::evidence::decision::{ConfirmationStep, Decision, Precheck};
use crate::domain::registry::CommandSpec;
use crate::domain::replies::OutcomeDetail;

use crate::domain::command::Args;
use crate::domain::command::ExternalId;
use crate::domain::command::{CommandRequest, IdempotencyClass, Intent};
use crate::domain::directory::{Actor, Tenant};
use crate::domain::lifecycle::CommandKind;
use crate::domain::lifecycle::Event;
use crate::domain::message::{InboundMessage, InboundStatus};
use crate::domain::outbound::{ProviderAddresses, ReplyAddress};
use crate::service::confirmations::confirm::{self, PromptFor};
use crate::service::dispatch;
use crate::service::intake::Refused;
use crate::service::security::Spec;
use crate::service::security::authz;
use crate::service::security::authz::AuthzDecision;
use crate::store::{NewConfirmation, NewInbound, NewOutboxMessage, ReplyTo, StoredCommand};

/// What a new command does right after `canonicalized`, decided from the registry and the actor.
pub(super) struct FirstMoves {
    pub(super) events: &'static [Event],
    pub(super) decision: Option<Value>,
    pub(super) reason_code: Option<&'static str>,
    pub(super) outbox: Vec<NewOutboxMessage>,
    pub(super) confirmation: Option<NewConfirmation>,
    pub(super) reply_detail: Option<OutcomeDetail>,
}

/// How a new command is to be asked: whether it must be confirmed whatever the registry says (a
/// mutation read with typos), and whether its executor's preview comes before the prompt.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Asking {
    pub(super) must_confirm: bool,
    pub(super) previewed: bool,
}

pub(super) fn first_moves(
    spec: &CommandSpec,
    (held, roles): (&BTreeSet<String>, &BTreeSet<String>),
    args: &Args,
    reply_to: &ReplyTo,
    refused: Option<Refused>,
    asking: Asking,
    now: OffsetDateTime,
) -> FirstMoves {
    let Asking { must_confirm, previewed } = asking;
    let decision = authz::decide_with_policy(spec, held, authz::Requester { roles, args }, false);
    let moves = |events, decision: &AuthzDecision, outbox| FirstMoves {
        events,
        decision: Some(decision.evidence(spec, held)),
        reason_code: decision.reason_code(),
        outbox,
        confirmation: None,
        reply_detail: None,
    };
    // Authorized at once: started too, with the dispatch row in the same transaction.
    let dispatch = || dispatch::dispatch_rows(&spec.targets);
    // SMCL's "pre-confirm validation path": a recovery action that could not run now is refused
    // before anyone is asked to confirm it (the chat operations' `Precheck` leaves someone without the scope to
    // the authorization refusal below).
    if let Some(refused) = refused {
        return FirstMoves {
            events: &[Event::SubmitForAuthorization, Event::Deny],
            decision: Some(Decision::Precheck { precheck: Precheck::Refused, error: refused.detail.clone() }.into()),
            reason_code: Some(refused.code),
            outbox: vec![],
            confirmation: None,
            reply_detail: Some(OutcomeDetail::Error(refused.detail)),
        };
    }
    // A mutation read with typos is confirmed whatever the registry says: the prompt shows how
    // it was read ("refund 25 on order 1234").
    // A request the policy holds for approval is confirmed by its requester first, whatever the
    // registry says: the approvers are asked about what the requester confirmed.
    let held_for_approval = matches!(decision, AuthzDecision::Approval { .. });
    match (&decision, spec.kind, spec.confirmation || must_confirm || held_for_approval) {
        // Refused before anyone is asked to confirm: canonicalized → authz_pending → rejected
        // (the engine queues the refusal as the command's outcome reply).
        (AuthzDecision::Deny { .. } | AuthzDecision::Refused { .. }, _, _) => {
            moves(&[Event::SubmitForAuthorization, Event::Deny], &decision, vec![])
        }
        // Its executor says first what it would do: the command waits in `canonicalized` for the
        // preview, which asks for the confirmation (`service::previews`).
        (_, CommandKind::Mutation, true) if previewed => awaiting_preview(spec),
        (_, CommandKind::Mutation, true) => asked_to_confirm(spec, args, reply_to, now),
        // A read, or a mutation the registry lets through without confirmation (and so without
        // step-up, which the registry only allows after a confirmation): authorized at once.
        (_, kind, _) => moves(dispatch::authorized_at_once(kind), &AuthzDecision::Allow, dispatch()),
    }
}

/// A mutation whose executor says first what it would do: it waits in `canonicalized` for the
/// preview, which asks for the confirmation (`service::previews`).
fn awaiting_preview(spec: &CommandSpec) -> FirstMoves {
    FirstMoves {
        events: &[],
        decision: None,
        reason_code: None,
        outbox: vec![dispatch::preview_request(&spec.executor)],
        confirmation: None,
        reply_detail: None,
    }
}

/// A mutation waits for its person's answer: the prompt, with the command as it reads.
fn asked_to_confirm(spec: &CommandSpec, args: &Args, reply_to: &ReplyTo, now: OffsetDateTime) -> FirstMoves {
    let what = reply_to.what.clone().unwrap_or_else(|| spec.reads(args));
    let asked = PromptFor {
        command: spec.name.clone(),
        what,
        usage: spec.usage(),
        args: serde_json::to_value(args).unwrap_or_default(),
        step_up: spec.step_up,
        preview: None,
        preview_missing: false,
    };
    let confirmation = confirm::prompt(reply_to, asked, spec.confirmation_ttl, now);
    FirstMoves {
        events: &[Event::RequestConfirmation],
        decision: Some(
            Decision::ConfirmationRequested {
                confirmation: ConfirmationStep::Requested,
                code: confirmation.code.clone(),
                expires_at: confirmation.expires_at.unix_timestamp(),
                preview: None,
                preview_digest: None,
            }
            .into(),
        ),
        reason_code: None,
        outbox: vec![confirm::prompt_message(reply_to, &confirmation)],
        confirmation: Some(confirmation),
        reply_detail: None,
    }
}

pub(super) fn inbound_row(
    message: &InboundMessage,
    tenant: Option<&Tenant>,
    status: InboundStatus,
    now: OffsetDateTime,
) -> NewInbound {
    NewInbound {
        channel: message.channel.clone(),
        provider_message_id: message.provider_message_id.clone(),
        tenant_id: tenant.map(|t| t.id.clone()),
        status,
        payload: message.raw.clone(),
        detail: message.content.unreadable_reason().map(str::to_owned),
        received_at: now,
    }
}

/// The command `message` asks for, as `actor` of `tenant` asked it; with `reprocess_of`, the same
/// message admitted again as a new command naming the old one (the old command holds the key).
pub(super) fn command_request(
    message: &InboundMessage,
    (tenant, actor): (&Tenant, &Actor),
    spec: &Spec,
    args: &Args,
    reprocess_of: Option<&StoredCommand>,
) -> CommandRequest {
    let target = spec.target_arg.as_ref().and_then(|name| args.get(name)).and_then(Value::as_str).map(str::to_owned);
    CommandRequest {
        tenant_id: tenant.id.clone(),
        actor_id: actor.id.clone(),
        channel: message.channel.clone(),
        conversation_id: conversation_id(message),
        message_ids: vec![message.provider_message_id.clone()],
        correlation_id: reprocess_of.map(|t| t.envelope.correlation_id.clone()),
        causation_id: reprocess_of.map(|t| ExternalId::from_uuid(t.envelope.command_id)),
        intent: Intent { entity: spec.entity.clone(), action: spec.action.clone(), target },
        args: args.clone(),
        command_kind: spec.kind,
        idempotency_class: if reprocess_of.is_some() { IdempotencyClass::I0 } else { spec.idempotency_class },
        risk: spec.risk,
        supplied_key: None,
        ttl: Some(spec.ttl),
        dedupe_window: spec.dedupe_window,
        target_command_id: reprocess_of.map(|t| t.envelope.command_id),
        registry_version: Some(spec.registry_version().to_owned()),
    }
}

/// One conversation per business number and person.
pub(super) fn conversation_id(message: &InboundMessage) -> ExternalId {
    ExternalId::parse(&reply_destination(message)).unwrap_or_else(|_| message.provider_message_id.clone())
}

/// The outbox destination of replies to `message`'s sender: one per channel, business number and
/// person, so that messages to one person leave in order.
pub fn reply_destination(message: &InboundMessage) -> String {
    format!("{}:{}:{}", message.channel, message.to, message.from)
}

pub(super) fn reply_address(message: &InboundMessage, tenant: &Tenant) -> ReplyTo {
    let addresses = message.addresses.as_ref();
    let base = ReplyAddress {
        channel: message.channel.clone(),
        business: message.to.clone(),
        person: message.from.clone(),
        in_reply_to: Some(message.provider_message_id.as_str().to_owned()),
        locale: tenant.locale.clone(),
        provider: addresses.map(|a| ProviderAddresses { business: a.business.clone(), person: a.person.clone() }),
        conversation: addresses.and_then(|a| a.conversation.clone()),
    };
    ReplyTo {
        command: None,
        what: None,
        destination: reply_destination(message),
        base,
        executed_template: None,
        hold: message.answered_inline,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mutation_read_with_a_typo_is_confirmed_even_when_the_registry_lets_it_through() {
        let registry = crate::domain::registry::Registry::shipped_for_tests();
        let mut refund = registry.get("refund").expect("refund").clone();
        refund.confirmation = false;
        let held: BTreeSet<String> = refund.scopes.clone();
        let args = serde_json::json!({"order_id": "1234", "amount": "25"}).as_object().cloned().unwrap_or_default();
        let reply_to = ReplyTo {
            destination: "whatsapp:1:2".into(),
            base: ReplyAddress::new(
                crate::domain::command::Channel::parse("whatsapp").expect("a channel"),
                "1",
                "2",
                "en",
            ),
            command: None,
            what: None,
            executed_template: None,
            hold: None,
        };
        let now = OffsetDateTime::now_utc();
        let at_once = first_moves(&refund, (&held, &BTreeSet::new()), &args, &reply_to, None, Asking::default(), now);
        assert!(at_once.confirmation.is_none(), "as the registry says: authorized at once");
        let typo = Asking { must_confirm: true, previewed: false };
        let typo = first_moves(&refund, (&held, &BTreeSet::new()), &args, &reply_to, None, typo, now);
        let prompt = typo.confirmation.expect("asked to confirm");
        assert_eq!(prompt.prompt.message().vars["what"], "refund 25 on order 1234");
        assert_eq!(typo.events, &[Event::RequestConfirmation]);
    }
}
