//! Conversations (issue #48): the command a person is writing in turns on one channel, what they
//! wrote of it so far and how many answers missed. Each move is written with the message that
//! made it (`Inbound::record_turn`), so that a redelivered message moves nothing twice; and each
//! move names the turn it follows, so that of two instances reading one person's messages at
//! once only one moves the conversation (the other's transaction fails and its message is
//! retried).

use sqlx::AnyConnection;
use time::OffsetDateTime;

use crate::domain::command::{ActorId, Channel, TenantId};
use crate::domain::registry::Begun;
use crate::store::named::{self, row};
use crate::store::rows::{from_ms, int, json, text, to_ms};
use crate::store::{Store, StoreError};

/// Whose conversation: a person on a channel of a tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationKey {
    pub tenant: TenantId,
    pub actor: ActorId,
    pub channel: Channel,
}

/// A conversation as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversation {
    pub begun: Begun,
    /// Answers that were not the value asked for, in a row.
    pub tries: u32,
    /// Messages taken so far (1 for the one that began it).
    pub turn: i64,
    pub started_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
}

/// What a message does to its sender's conversation, written with the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConversationMove {
    /// Begins one (replacing any that ended quietly).
    Begin(Conversation),
    /// Moves the one at turn `after` on.
    Advance { after: i64, to: Conversation },
    /// Ends it (cancelled, given up, or done).
    End,
}

type Query<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>;

/// A conversation key's columns, in the order the statements bind them (`$1` to `$3`).
fn bind_key<'q>(query: Query<'q>, key: &'q ConversationKey) -> Query<'q> {
    query.bind(key.tenant.as_str()).bind(key.actor.as_str()).bind(key.channel.as_str())
}

const END: &str = "DELETE FROM conversations WHERE tenant_id = $1 AND actor_id = $2 AND channel = $3";
/// Ends the conversation at one turn only (`$4`).
const END_AT_TURN: &str =
    "DELETE FROM conversations WHERE tenant_id = $1 AND actor_id = $2 AND channel = $3 AND turn = $4";
const READ: &str = "SELECT command, pattern, words, tries, turn, started_at, expires_at FROM conversations \
                    WHERE tenant_id = $1 AND actor_id = $2 AND channel = $3 AND expires_at > $4";

/// Writes `change` to `key`'s conversation inside a message's transaction.
pub(crate) async fn write_move(
    conn: &mut AnyConnection,
    key: &ConversationKey,
    change: &ConversationMove,
) -> Result<(), StoreError> {
    let to = match change {
        ConversationMove::End => {
            bind_key(sqlx::query(END), key).execute(&mut *conn).await?;
            return Ok(());
        }
        ConversationMove::Begin(to) => {
            bind_key(sqlx::query(END), key).execute(&mut *conn).await?;
            to
        }
        ConversationMove::Advance { after, to } => {
            let gone = bind_key(sqlx::query(END_AT_TURN), key).bind(after).execute(&mut *conn).await?;
            if gone.rows_affected() != 1 {
                return Err(StoreError::Unavailable("the conversation moved on meanwhile; retry the message".into()));
            }
            to
        }
    };
    let words = serde_json::to_string(&to.begun.words).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let row = row![
        "tenant_id" => key.tenant.as_str(),
        "actor_id" => key.actor.as_str(),
        "channel" => key.channel.as_str(),
        "command" => to.begun.command.as_str(),
        "pattern" => to.begun.pattern.as_str(),
        "words" => words,
        "tries" => i64::from(to.tries),
        "turn" => to.turn,
        "started_at" => to_ms(to.started_at),
        "expires_at" => to_ms(to.expires_at),
    ];
    named::insert(conn, "conversations", vec![row], "").await?;
    Ok(())
}

impl Store {
    /// `key`'s conversation, unless there is none or it ended quietly before `now`.
    pub async fn conversation(
        &self,
        key: &ConversationKey,
        now: OffsetDateTime,
    ) -> Result<Option<Conversation>, StoreError> {
        let row = bind_key(sqlx::query(READ), key).bind(to_ms(now)).fetch_optional(self.pool()).await?;
        let Some(row) = row else { return Ok(None) };
        let begun =
            Begun { command: text(&row, "command")?, pattern: text(&row, "pattern")?, words: json(&row, "words")? };
        Ok(Some(Conversation {
            begun,
            tries: u32::try_from(int(&row, "tries")?).unwrap_or(u32::MAX),
            turn: int(&row, "turn")?,
            started_at: from_ms(int(&row, "started_at")?)?,
            expires_at: from_ms(int(&row, "expires_at")?)?,
        }))
    }

    /// Ends `key`'s conversation at turn `turn`, when the command it wrote was admitted (in its own
    /// transaction: should this not happen, the next turn writes the same command again, which
    /// its idempotency key answers as a duplicate).
    pub async fn end_conversation(&self, key: &ConversationKey, turn: i64) -> Result<(), StoreError> {
        bind_key(sqlx::query(END_AT_TURN), key).bind(turn).execute(self.pool()).await?;
        Ok(())
    }
}
