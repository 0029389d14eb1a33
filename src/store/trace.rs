//! The causation view of one correlation id (Bloodbank OBS-1 §7.2): every message, command,
//! move, dispatch event and reply that carries it, as timestamped nodes with causal edges.

use serde::Serialize;
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::TenantId;
use crate::store::Commands;
use crate::store::rows::{from_ms, int, opt_text, text, uuid};
use crate::store::{Store, StoreError};

/// One thing that happened under a correlation id.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct TraceNode {
    pub id: String,
    /// `message`, `command`, `transition`, `delivery`, `delivery_event`, `reply`.
    #[schema(value_type = String)]
    pub kind: &'static str,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub at: OffsetDateTime,
    /// The node that caused this one.
    pub caused_by: Option<String>,
    #[schema(value_type = Object)]
    pub detail: Value,
}

impl Commands<'_> {
    /// The trace of `correlation_id` within a tenant, in time order; empty when nothing of the
    /// tenant carries it.
    pub async fn trace(self, tenant: &TenantId, correlation_id: &str) -> Result<Vec<TraceNode>, StoreError> {
        let pool = self.store.pool();
        let commands = sqlx::query(
            "SELECT command_id, intent_entity, intent_action, state, reason_code, target_command_id, created_at
             FROM commands WHERE tenant_id = $1 AND correlation_id = $2 ORDER BY command_id",
        )
        .bind(tenant.as_str())
        .bind(correlation_id)
        .fetch_all(pool)
        .await?;
        let mut nodes = vec![];
        for row in &commands {
            let id = uuid(row, "command_id")?;
            let command_node = format!("command:{id}");
            let mut caused_by = opt_text(row, "target_command_id")?.map(|t| format!("command:{t}"));
            for message in &sqlx::query(
                "SELECT provider_message_id, channel, status, received_at FROM inbound_messages WHERE command_id = $1
                 ORDER BY received_at",
            )
            .bind(id.to_string())
            .fetch_all(pool)
            .await?
            {
                let node = format!("message:{}", text(message, "provider_message_id")?);
                if caused_by.is_none() {
                    caused_by = Some(node.clone());
                }
                nodes.push(TraceNode {
                    id: node,
                    kind: "message",
                    at: from_ms(int(message, "received_at")?)?,
                    caused_by: None,
                    detail: json!({"channel": text(message, "channel")?, "status": text(message, "status")?}),
                });
            }
            nodes.push(TraceNode {
                id: command_node.clone(),
                kind: "command",
                at: from_ms(int(row, "created_at")?)?,
                caused_by,
                detail: json!({
                    "intent": format!("{}.{}", text(row, "intent_entity")?, text(row, "intent_action")?),
                    "state": text(row, "state")?,
                    "reason_code": opt_text(row, "reason_code")?,
                }),
            });
            self.store.trace_command(id, &command_node, &mut nodes).await?;
        }
        nodes.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.id.cmp(&b.id)));
        Ok(nodes)
    }
}

impl Store {
    /// A command's transitions, deliveries (with their events) and replies, as trace nodes.
    async fn trace_command(&self, id: Uuid, command_node: &str, nodes: &mut Vec<TraceNode>) -> Result<(), StoreError> {
        const TRANSITIONS: &str = "SELECT version, from_state, to_state, event, reason_code, at
            FROM command_transitions WHERE command_id = $1 ORDER BY version";
        for t in &sqlx::query(TRANSITIONS).bind(id.to_string()).fetch_all(self.pool()).await? {
            let detail = json!({
                "from": text(t, "from_state")?, "to": text(t, "to_state")?,
                "event": text(t, "event")?, "reason_code": opt_text(t, "reason_code")?,
            });
            let at = from_ms(int(t, "at")?)?;
            let caused_by = Some(command_node.to_owned());
            nodes.push(TraceNode {
                id: format!("{command_node}:v{}", int(t, "version")?),
                kind: "transition",
                at,
                caused_by,
                detail,
            });
        }
        self.trace_deliveries(id, command_node, nodes).await?;
        const REPLIES: &str =
            "SELECT id, status, provider_message_id, created_at FROM outbound_messages WHERE command_id = $1";
        for r in &sqlx::query(REPLIES).bind(id.to_string()).fetch_all(self.pool()).await? {
            let detail =
                json!({"status": text(r, "status")?, "provider_message_id": opt_text(r, "provider_message_id")?});
            let at = from_ms(int(r, "created_at")?)?;
            let caused_by = Some(command_node.to_owned());
            nodes.push(TraceNode { id: format!("reply:{}", text(r, "id")?), kind: "reply", at, caused_by, detail });
        }
        Ok(())
    }

    /// A command's deliveries and each delivery's events, as trace nodes.
    async fn trace_deliveries(
        &self,
        id: Uuid,
        command_node: &str,
        nodes: &mut Vec<TraceNode>,
    ) -> Result<(), StoreError> {
        const DELIVERIES: &str =
            "SELECT id, target, state, outcome, failure_class, created_at FROM deliveries WHERE command_id = $1";
        const EVENTS: &str =
            "SELECT id, event, outcome, ack, at FROM delivery_events WHERE delivery_id = $1 ORDER BY id";
        for d in &sqlx::query(DELIVERIES).bind(id.to_string()).fetch_all(self.pool()).await? {
            let delivery = format!("delivery:{}", text(d, "id")?);
            let detail = json!({
                "target": text(d, "target")?, "state": text(d, "state")?,
                "outcome": opt_text(d, "outcome")?, "failure_class": opt_text(d, "failure_class")?,
            });
            let at = from_ms(int(d, "created_at")?)?;
            let caused_by = Some(command_node.to_owned());
            nodes.push(TraceNode { id: delivery.clone(), kind: "delivery", at, caused_by, detail });
            for e in &sqlx::query(EVENTS).bind(text(d, "id")?).fetch_all(self.pool()).await? {
                let detail =
                    json!({"event": text(e, "event")?, "outcome": text(e, "outcome")?, "ack": opt_text(e, "ack")?});
                let at = from_ms(int(e, "at")?)?;
                let caused_by = Some(delivery.clone());
                nodes.push(TraceNode {
                    id: format!("{delivery}:e{}", int(e, "id")?),
                    kind: "delivery_event",
                    at,
                    caused_by,
                    detail,
                });
            }
        }
        Ok(())
    }
}
