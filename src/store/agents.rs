//! Agents' states, moved by compare-and-swap on their version (Bloodbank FSM-1 §4.4).

use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::agent::Agent;
use crate::domain::command::TenantId;
use crate::store::StoreError;
use crate::store::rows::{int, opt_parsed, parsed, text, to_ms, uuid};
use crate::store::{Agents, Deliveries};

impl Agents<'_> {
    /// An agent's state; one that never moved is idle at version 0.
    pub async fn get(self, name: &str) -> Result<Agent, StoreError> {
        let row = sqlx::query("SELECT state, version, pre_pause_state FROM agents WHERE name = $1")
            .bind(name)
            .fetch_optional(self.store.pool())
            .await?;
        match row {
            None => Ok(Agent::default()),
            Some(row) => Ok(Agent {
                state: parsed(&row, "state")?,
                version: int(&row, "version")?,
                pre_pause: opt_parsed(&row, "pre_pause_state")?,
            }),
        }
    }

    /// Moves an agent from `from` (as read) to `to`; `false` when it moved meanwhile.
    pub async fn commit_move(
        self,
        name: &str,
        from: &Agent,
        to: &Agent,
        by: &str,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut tx = self.store.begin().await?;
        let pre_pause = to.pre_pause.map(|s| s.as_str());
        // One statement for the first move and the next ones: the update is made only at the
        // version read, so that of two moves made from one reading, one moves.
        let done = sqlx::query(
            "INSERT INTO agents (name, state, version, pre_pause_state, updated_by, entered_at)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (name) DO UPDATE SET state = excluded.state, version = excluded.version,
               pre_pause_state = excluded.pre_pause_state, updated_by = excluded.updated_by,
               entered_at = excluded.entered_at
             WHERE agents.version = $7",
        )
        .bind(name)
        .bind(to.state.as_str())
        .bind(to.version)
        .bind(pre_pause)
        .bind(by)
        .bind(to_ms(at))
        .bind(from.version)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }
}

pub(crate) const EXPIRED_UNDISPATCHED: &str = "SELECT c.tenant_id, c.command_id FROM commands c
     WHERE c.state = 'started' AND c.expires_at <= $1
       AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.command_id = c.command_id)
     ORDER BY c.expires_at LIMIT $2";

impl Deliveries<'_> {
    /// Started commands past their TTL that were never handed to an executor (their agent was
    /// paused, say): (tenant, command id), oldest first.
    pub async fn expired_undispatched(
        self,
        now: OffsetDateTime,
        limit: i64,
    ) -> Result<Vec<(TenantId, Uuid)>, StoreError> {
        let rows = sqlx::query(EXPIRED_UNDISPATCHED).bind(to_ms(now)).bind(limit).fetch_all(self.store.pool()).await?;
        rows.iter()
            .map(|row| {
                let tenant =
                    TenantId::parse(&text(row, "tenant_id")?).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                Ok((tenant, uuid(row, "command_id")?))
            })
            .collect()
    }
}
