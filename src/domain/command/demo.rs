//! The demo customer's refund, as canonicalization makes it from "refund {order} {amount}": one
//! builder for unit tests, integration tests, benchmarks and examples.

use std::time::Duration;

use crate::domain::command::envelope::CommandRequest;

use crate::domain::command::envelope::Intent;

use crate::domain::command::envelope::Risk;
use crate::domain::command::idempotency::IdempotencyClass;
use crate::domain::command::ids::ActorId;
use crate::domain::command::ids::Channel;
use crate::domain::command::ids::ExternalId;
use crate::domain::command::ids::InvalidId;
use crate::domain::command::ids::TenantId;
use crate::domain::lifecycle::CommandKind;

/// The demo customer (`15550000001`) asks, on WhatsApp, to refund `amount` on `order`.
pub fn refund(tenant: &str, order: &str, amount: &str, message_id: &str) -> Result<CommandRequest, InvalidId> {
    let mut args = serde_json::Map::new();
    args.insert("order_id".into(), order.into());
    args.insert("amount".into(), amount.into());
    Ok(CommandRequest {
        registry_version: None,
        tenant_id: TenantId::parse(tenant)?,
        actor_id: ActorId::parse("15550000001")?,
        channel: Channel::parse("whatsapp")?,
        conversation_id: ExternalId::parse("wa:15550000001")?,
        message_ids: vec![ExternalId::parse(message_id)?],
        correlation_id: None,
        causation_id: None,
        intent: Intent::parse("order", "refund", Some(order))?,
        args,
        command_kind: CommandKind::Mutation,
        idempotency_class: IdempotencyClass::I1,
        risk: Risk::Medium,
        supplied_key: None,
        ttl: Some(Duration::from_secs(600)),
        dedupe_window: Duration::from_secs(86_400),
        target_command_id: None,
    })
}
