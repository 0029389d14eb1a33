//! Reading commands: one by id or by short reference, the tenant's list and its failures,
//! recoveries of a command, and moves in order (the event stream reads those).

use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::TenantId;
use crate::store::Commands;
use crate::store::StoreError;
use crate::store::keyed::KeyLookup;
use crate::store::rows::{int, opt_int, text, to_ms, uuid};

use crate::store::commands::{
    CommandFilter, StoredCommand, TransitionRecord, command_columns, decode_command, decode_transition, load_command,
};

/// A committed move with whose it is: what the event streams send.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMove {
    /// The move's id: it only grows, so a stream resumes after the last one it sent.
    pub id: i64,
    pub tenant_id: TenantId,
    pub command_id: Uuid,
    pub record: TransitionRecord,
}

pub(crate) const COMMANDS_BY_ID: KeyLookup =
    KeyLookup { select: concat!("SELECT ", command_columns!(), " FROM commands"), column: "command_id" };

impl Commands<'_> {
    /// The commands with these ids, whatever their tenant (the caller checks it), in no order.
    pub async fn get_many(self, ids: &[Uuid]) -> Result<Vec<StoredCommand>, StoreError> {
        let mut conn = self.store.pool().acquire().await?;
        let ids: Vec<String> = ids.iter().map(Uuid::to_string).collect();
        let rows = COMMANDS_BY_ID.fetch(&mut conn, &ids).await?;
        rows.iter().map(decode_command).collect()
    }

    /// A command of this tenant; another tenant's command is not found.
    pub async fn get(self, tenant_id: &TenantId, command_id: Uuid) -> Result<Option<StoredCommand>, StoreError> {
        let mut conn = self.store.pool().acquire().await?;
        load_command(&mut conn, tenant_id, command_id).await
    }

    /// A command by id, whatever its tenant: for the operator's command line only (the API always
    /// asks within the caller's tenant).
    pub async fn get_unscoped(self, command_id: Uuid) -> Result<Option<StoredCommand>, StoreError> {
        let row = sqlx::query(concat!("SELECT ", command_columns!(), " FROM commands WHERE command_id = $1"))
            .bind(command_id.to_string())
            .fetch_optional(self.store.pool())
            .await?;
        row.as_ref().map(decode_command).transpose()
    }

    /// A page of a tenant's commands, newest first, after the cursor (a command id: UUIDv7 ids
    /// grow with time, so a page never shifts when newer commands arrive).
    pub async fn list(self, tenant_id: &TenantId, filter: &CommandFilter) -> Result<Vec<StoredCommand>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            command_columns!(),
            " FROM commands WHERE tenant_id = $1
               AND (CAST($2 AS TEXT) IS NULL OR state = $2)
               AND (CAST($3 AS TEXT) IS NULL OR actor_id = $3)
               AND (CAST($4 AS TEXT) IS NULL OR conversation_id = $4)
               AND (CAST($5 AS TEXT) IS NULL OR (intent_entity = $5 AND intent_action = $6))
               AND (CAST($7 AS BIGINT) IS NULL OR created_at >= $7)
               AND (CAST($8 AS BIGINT) IS NULL OR created_at < $8)
               AND (CAST($9 AS TEXT) IS NULL OR command_id < $9)
               AND (CAST($11 AS TEXT) IS NULL OR short_ref = $11)
             ORDER BY command_id DESC LIMIT $10"
        ))
        .bind(tenant_id.as_str())
        .bind(filter.state.map(|s| s.as_str()))
        .bind(filter.actor.as_deref())
        .bind(filter.conversation.as_deref())
        .bind(filter.intent.as_ref().map(|(entity, _)| entity.as_str()))
        .bind(filter.intent.as_ref().map(|(_, action)| action.as_str()).unwrap_or_default())
        .bind(filter.since.map(to_ms))
        .bind(filter.until.map(to_ms))
        .bind(filter.after.map(|id| id.to_string()))
        .bind(filter.limit)
        .bind(filter.short_ref.as_ref().map(|r| r.as_str()))
        .fetch_all(self.store.pool())
        .await?;
        rows.iter().map(decode_command).collect()
    }

    /// The tenant's commands with this short reference, newest first (two only by a one in a
    /// billion chance; the caller says so rather than guess).
    pub async fn by_ref(
        self,
        tenant_id: &TenantId,
        short_ref: &crate::domain::command::ShortRef,
    ) -> Result<Vec<StoredCommand>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            command_columns!(),
            " FROM commands WHERE tenant_id = $1 AND short_ref = $2 ORDER BY command_id DESC LIMIT 5"
        ))
        .bind(tenant_id.as_str())
        .bind(short_ref.as_str())
        .fetch_all(self.store.pool())
        .await?;
        rows.iter().map(decode_command).collect()
    }

    /// The tenant's recent failed commands and the ones stuck (started or authorized, unmoved
    /// since `stuck_before`), newest first; a command already being recovered, or recovered, is
    /// left out (its retry or compensation is under way or done; one that failed brings it back).
    pub async fn failures(
        self,
        tenant_id: &TenantId,
        stuck_before: OffsetDateTime,
        limit: i64,
    ) -> Result<Vec<StoredCommand>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            command_columns!(),
            " FROM commands c WHERE tenant_id = $1
               AND (state = 'failed' OR (state IN ('started', 'authorized') AND updated_at < $2))
               AND NOT EXISTS (SELECT 1 FROM commands r WHERE r.target_command_id = c.command_id
                               AND r.state NOT IN ('failed', 'rejected', 'canceled'))
             ORDER BY command_id DESC LIMIT $3"
        ))
        .bind(tenant_id.as_str())
        .bind(to_ms(stuck_before))
        .bind(limit)
        .fetch_all(self.store.pool())
        .await?;
        rows.iter().map(decode_command).collect()
    }

    /// Recovery commands of `target` that have not finished.
    pub async fn open_recoveries(self, target: Uuid) -> Result<i64, StoreError> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS n FROM commands WHERE target_command_id = $1
               AND state NOT IN ('executed', 'failed', 'rejected', 'canceled', 'compensated')",
        )
        .bind(target.to_string())
        .fetch_one(self.store.pool())
        .await?;
        int(&row, "n")
    }

    /// The commands that act on `target` (its recovery commands), oldest first.
    pub async fn recoveries_of(self, target: Uuid) -> Result<Vec<Uuid>, StoreError> {
        let rows = sqlx::query("SELECT command_id FROM commands WHERE target_command_id = $1 ORDER BY command_id")
            .bind(target.to_string())
            .fetch_all(self.store.pool())
            .await?;
        rows.iter().map(|row| uuid(row, "command_id")).collect()
    }

    /// Every move after the move `after`, oldest first, by id, whatever its tenant: the event
    /// streams read them once for every stream of the process, each keeping its tenant's.
    pub async fn moves_since(self, after: i64, limit: i64) -> Result<Vec<StoredMove>, StoreError> {
        self.store.stats.move_reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let rows = sqlx::query(
            "SELECT t.id, t.command_id, c.tenant_id, t.version, t.from_state, t.to_state, t.event, t.reason_code,
                    t.at
             FROM command_transitions t JOIN commands c ON c.command_id = t.command_id
             WHERE t.id > $1 ORDER BY t.id LIMIT $2",
        )
        .bind(after)
        .bind(limit)
        .fetch_all(self.store.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let tenant_id =
                    TenantId::parse(&text(row, "tenant_id")?).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                Ok(StoredMove {
                    id: int(row, "id")?,
                    tenant_id,
                    command_id: uuid(row, "command_id")?,
                    record: decode_transition(row)?,
                })
            })
            .collect()
    }

    /// The id of the newest move of all (where a stream without `Last-Event-ID` starts).
    pub async fn last_move_id(self) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT MAX(id) AS n FROM command_transitions").fetch_one(self.store.pool()).await?;
        Ok(opt_int(&row, "n")?.unwrap_or(0))
    }

    /// The command's moves, oldest first.
    pub async fn transitions(self, command_id: Uuid) -> Result<Vec<TransitionRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT version, from_state, to_state, event, reason_code, at FROM command_transitions
             WHERE command_id = $1 ORDER BY version",
        )
        .bind(command_id.to_string())
        .fetch_all(self.store.pool())
        .await?;
        rows.iter().map(decode_transition).collect()
    }
}
