//! Confirmations (IDS §X): what a person was asked, bound to the command, its idempotency key
//! and the actor. Answering one is a compare-and-set on `status = 'pending'`, so it is used once.

use sqlx::AnyConnection;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::ActorId;
use crate::domain::command::IdempotencyKey;
use crate::domain::command::TenantId;
use crate::domain::names::named_enum;
use crate::domain::outbound::OutboxMessage;
use crate::store::Confirmations;
use crate::store::StoreError;
use crate::store::decoded::{Column, Decoded, decode_all, decoded, stored_by_name};
use crate::store::named::{self, Row, row};
use crate::store::rows::to_ms;

named_enum! {
    /// Where a confirmation stands; only `pending` can be answered. `closed`: the command ended
    /// (canceled, recovered) before anyone answered, closed by the move that ended it.
    ConfirmationStatus {
        Pending => "pending",
        Accepted => "accepted",
        Declined => "declined",
        Expired => "expired",
        Closed => "closed",
    }
}
stored_by_name!(ConfirmationStatus);

/// A confirmation asked for together with the command's admission.
#[derive(Debug, Clone, PartialEq)]
pub struct NewConfirmation {
    pub code: String,
    pub nonce: String,
    pub expires_at: OffsetDateTime,
    /// The prompt: a duplicate of the command is sent this same prompt again.
    pub prompt: OutboxMessage,
}

decoded! {
    #[derive(Debug, Clone, PartialEq)]
    pub struct Confirmation {
        pub id: Uuid,
        pub tenant_id: TenantId,
        pub command_id: Uuid,
        pub idempotency_key: IdempotencyKey,
        pub actor_id: ActorId,
        pub code: String,
        pub nonce: String,
        pub status: ConfirmationStatus,
        pub prompt: OutboxMessage,
        pub created_at: OffsetDateTime,
        pub expires_at: OffsetDateTime,
        pub answered_at: Option<OffsetDateTime>,
        pub answered_by: Option<String>,
    }
}

impl Confirmation {
    /// Whether an answer at `now` comes too late (the sweeper may not have caught it yet).
    pub fn is_expired_at(&self, now: OffsetDateTime) -> bool {
        now >= self.expires_at
    }
}

/// How an answer settles a pending confirmation, inside a step's transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct SettleConfirmation {
    pub id: Uuid,
    pub status: ConfirmationStatus,
    /// The actor whose answer settled it; none when it expired unanswered.
    pub answered_by: Option<ActorId>,
}

/// The query a `Confirmation` is read from, as a literal so that queries stay static SQL.
macro_rules! confirmation_select {
    () => {
        "SELECT id, tenant_id, command_id, idempotency_key, actor_id, code, nonce, status, prompt, created_at, \
         expires_at, answered_at, answered_by FROM confirmations"
    };
}

/// The row of a new command's confirmation, bound to its key and actor.
pub(crate) fn confirmation_row(
    confirmation: &NewConfirmation,
    tenant_id: &TenantId,
    command_id: Uuid,
    key: &IdempotencyKey,
    actor_id: &ActorId,
    at: OffsetDateTime,
) -> Row {
    row![
        "id" => Uuid::now_v7().to_string(),
        "tenant_id" => tenant_id.as_str(),
        "command_id" => command_id.to_string(),
        "idempotency_key" => key.as_str(),
        "actor_id" => actor_id.as_str(),
        "code" => confirmation.code.as_str(),
        "nonce" => confirmation.nonce.as_str(),
        "status" => ConfirmationStatus::Pending.as_str(),
        "prompt" => confirmation.prompt.to_payload().to_string(),
        "created_at" => to_ms(at),
        "expires_at" => to_ms(confirmation.expires_at),
    ]
}

pub(crate) async fn insert_confirmation(conn: &mut AnyConnection, row: Row) -> Result<(), StoreError> {
    named::insert(conn, "confirmations", vec![row], "").await?;
    Ok(())
}

/// Settles a pending confirmation; `false` when it was answered (or expired) meanwhile.
pub(crate) async fn settle_confirmation(
    conn: &mut AnyConnection,
    settle: &SettleConfirmation,
    at: OffsetDateTime,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE confirmations SET status = $2, answered_at = $3, answered_by = $4 WHERE id = $1 AND status = 'pending'",
    )
    .bind(settle.id.to_string())
    .bind(settle.status.as_str())
    .bind(to_ms(at))
    .bind(settle.answered_by.as_ref().map(|a| a.as_str().to_owned()))
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Closes the pending confirmations of commands that left `confirmation_required` without an
/// answer, in the transaction of the move (an answer settles its confirmation before its moves).
pub(crate) async fn close_confirmations(
    conn: &mut AnyConnection,
    command_ids: &[(Uuid, OffsetDateTime)],
) -> Result<(), StoreError> {
    for (command_id, at) in command_ids {
        sqlx::query(
            "UPDATE confirmations SET status = 'closed', answered_at = $2 WHERE command_id = $1 AND status = 'pending'",
        )
        .bind(command_id.to_string())
        .bind(to_ms(*at))
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// The pending prompt of a command, for a duplicate that should see it again.
pub(crate) async fn pending_prompt(
    conn: &mut AnyConnection,
    command_id: Uuid,
) -> Result<Option<OutboxMessage>, StoreError> {
    let row = sqlx::query("SELECT prompt FROM confirmations WHERE command_id = $1 AND status = 'pending'")
        .bind(command_id.to_string())
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(|row| OutboxMessage::read(row, "prompt")).transpose()
}

pub(crate) const EXPIRED: &str =
    concat!(confirmation_select!(), " WHERE status = 'pending' AND expires_at <= $1 ORDER BY expires_at LIMIT $2");

impl Confirmations<'_> {
    /// The confirmation a button carries the nonce of (any tenant: the caller checks).
    pub async fn by_nonce(self, nonce: &str) -> Result<Option<Confirmation>, StoreError> {
        let sql = concat!(confirmation_select!(), " WHERE nonce = $1");
        let row = sqlx::query(sql).bind(nonce).fetch_optional(self.store.pool()).await?;
        row.as_ref().map(Confirmation::decode).transpose()
    }

    /// The confirmations of a tenant with this code, newest first (codes are short: they may
    /// repeat across actors and over time).
    pub async fn by_code(self, tenant_id: &TenantId, code: &str) -> Result<Vec<Confirmation>, StoreError> {
        let sql = concat!(confirmation_select!(), " WHERE tenant_id = $1 AND code = $2 ORDER BY created_at DESC");
        let rows = sqlx::query(sql).bind(tenant_id.as_str()).bind(code).fetch_all(self.store.pool()).await?;
        decode_all(&rows)
    }

    /// The confirmations an actor has not answered yet (expired ones included until swept).
    pub async fn pending(self, tenant_id: &TenantId, actor_id: &ActorId) -> Result<Vec<Confirmation>, StoreError> {
        let sql = concat!(
            confirmation_select!(),
            " WHERE tenant_id = $1 AND actor_id = $2 AND status = 'pending' ORDER BY created_at"
        );
        let rows =
            sqlx::query(sql).bind(tenant_id.as_str()).bind(actor_id.as_str()).fetch_all(self.store.pool()).await?;
        decode_all(&rows)
    }

    /// Pending confirmations whose time ran out, oldest first.
    pub async fn expired(self, now: OffsetDateTime, limit: i64) -> Result<Vec<Confirmation>, StoreError> {
        let rows = sqlx::query(EXPIRED).bind(to_ms(now)).bind(limit).fetch_all(self.store.pool()).await?;
        decode_all(&rows)
    }
}
