//! Conversations (issue #48): the command a person is writing in turns on one channel, what they
//! wrote of it so far and how many answers missed. Each move is written with the message that
//! made it (`Inbound::record_turn`), so that a redelivered message moves nothing twice; and each
//! move names the turn it follows, so that of two instances reading one person's messages at
//! once only one moves the conversation (the other's transaction fails and its message is
//! retried). A conversation's question may be held for a short window (`held`): the next message,
//! if it comes first, withdraws it, so that "refund" "1234" "25.00" sent in a burst asks nothing.

use sqlx::AnyConnection;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::{ActorId, Channel, TenantId};
use crate::domain::registry::Begun;
use crate::store::figures::Moves;
use crate::store::keyed::fetch_tenant_in;
use crate::store::named::{self, row};
use crate::store::outbox::{insert_withdrawable, withdraw_outbox};
use crate::store::retention_pace::{Door, Pace};
use crate::store::rows::{from_ms, int, json, opt_text, text, to_ms};
use crate::store::tidy::Done;
use crate::store::{NewOutboxMessage, Store, StoreError};

/// Whose conversation: a person on a channel of a tenant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
    /// The outbox row of its question while it is held back, until it is due.
    pub held: Option<Uuid>,
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

/// What a message writes to its sender's conversation: the move, and the question it asks, held
/// back for the burst window (`NewOutboxMessage::hold`) and withdrawn by the next move.
#[derive(Debug, Clone, Copy)]
pub struct TurnWrite<'a> {
    pub key: &'a ConversationKey,
    pub change: &'a ConversationMove,
    pub question: Option<&'a NewOutboxMessage>,
}

/// Why a held question is withdrawn, as its outbox row keeps it.
const WITHDRAWN: &str = "withdrawn: the person wrote again within the burst window";

/// A conversation key's columns, in the order the statements bind them (`$1` to `$3`).
fn bind_key<'q>(query: Query<'q>, key: &'q ConversationKey) -> Query<'q> {
    query.bind(key.tenant.as_str()).bind(key.actor.as_str()).bind(key.channel.as_str())
}

const END: &str = "DELETE FROM conversations WHERE tenant_id = $1 AND actor_id = $2 AND channel = $3 RETURNING held";
/// Ends the conversation at one turn only (`$4`).
const END_AT_TURN: &str = "DELETE FROM conversations WHERE tenant_id = $1 AND actor_id = $2 AND channel = $3 \
                           AND turn = $4 RETURNING held";
/// The conversations that ended quietly before `$1` (the clean-up's sweep, by `conversations_expiry`).
/// The conversations that ended quietly by `$1`.
pub(crate) const ENDED: Done = Done {
    table: "conversations",
    key: "(tenant_id, actor_id, channel)",
    select: "SELECT tenant_id, actor_id, channel FROM conversations WHERE expires_at <= $1",
};
const READ: &str = "SELECT command, pattern, words, tries, turn, started_at, expires_at, held FROM conversations \
                    WHERE tenant_id = $1 AND actor_id = $2 AND channel = $3 AND expires_at > $4";
/// Every conversation of a batch's people (`keyed::fetch_tenant_in` adds the tenant and the ids),
/// which the primary key `(tenant_id, actor_id, channel)` answers.
const READ_OF_ACTORS: &str =
    "SELECT actor_id, channel, command, pattern, words, tries, turn, started_at, expires_at, held FROM conversations";

/// A conversation's row, as read by [`READ`] or [`READ_OF_ACTORS`].
fn conversation_of(row: &sqlx::any::AnyRow) -> Result<Conversation, StoreError> {
    let begun = Begun { command: text(row, "command")?, pattern: text(row, "pattern")?, words: json(row, "words")? };
    Ok(Conversation {
        begun,
        tries: u32::try_from(int(row, "tries")?).unwrap_or(u32::MAX),
        turn: int(row, "turn")?,
        started_at: from_ms(int(row, "started_at")?)?,
        expires_at: from_ms(int(row, "expires_at")?)?,
        held: opt_text(row, "held")?.and_then(|id| Uuid::parse_str(&id).ok()),
    })
}

/// Writes `turn` inside a message's transaction: the conversation it ends or replaces loses its
/// held question, and the new one holds the question asked. The waiting figures it moves.
pub(crate) async fn write_move(
    conn: &mut AnyConnection,
    tenant: &str,
    turn: TurnWrite<'_>,
    now: OffsetDateTime,
) -> Result<Moves, StoreError> {
    let key = turn.key;
    let (ended, to) = match turn.change {
        ConversationMove::End => (bind_key(sqlx::query(END), key).fetch_optional(&mut *conn).await?, None),
        ConversationMove::Begin(to) => (bind_key(sqlx::query(END), key).fetch_optional(&mut *conn).await?, Some(to)),
        ConversationMove::Advance { after, to } => {
            let ended = bind_key(sqlx::query(END_AT_TURN), key).bind(after).fetch_optional(&mut *conn).await?;
            if ended.is_none() {
                return Err(StoreError::Unavailable("the conversation moved on meanwhile; retry the message".into()));
            }
            (ended, Some(to))
        }
    };
    let mut moves = withdraw_held(conn, ended.as_ref(), now).await?;
    let Some(to) = to else { return Ok(moves) };
    let held = match turn.question {
        Some(question) => {
            let (id, asked) = insert_withdrawable(conn, tenant, question, now).await?;
            moves.merge(asked);
            Some(id)
        }
        None => None,
    };
    insert_conversation(conn, key, to, held).await?;
    Ok(moves)
}

/// Withdraws the question an ended conversation's row held, if it held one.
async fn withdraw_held(
    conn: &mut AnyConnection,
    ended: Option<&sqlx::any::AnyRow>,
    now: OffsetDateTime,
) -> Result<Moves, StoreError> {
    match ended.map(|row| opt_text(row, "held")).transpose()?.flatten() {
        Some(held) => {
            let id = Uuid::parse_str(&held).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            withdraw_outbox(conn, id, WITHDRAWN, now).await
        }
        None => Ok(Moves::default()),
    }
}

async fn insert_conversation(
    conn: &mut AnyConnection,
    key: &ConversationKey,
    to: &Conversation,
    held: Option<Uuid>,
) -> Result<(), StoreError> {
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
        "held" => held.map(|id| id.to_string()),
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
        row.as_ref().map(conversation_of).transpose()
    }

    /// The conversations of `actors` of `tenant`, on every channel, ended or not (each reader
    /// checks the end against its own message's time): a batch's, in one statement.
    pub async fn conversations_of(
        &self,
        tenant: &TenantId,
        actors: &[String],
    ) -> Result<Vec<(ConversationKey, Conversation)>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        let rows = fetch_tenant_in(&mut conn, READ_OF_ACTORS, tenant.as_str(), "actor_id", actors).await?;
        rows.iter()
            .map(|row| {
                let corrupt = |e: crate::domain::command::InvalidId| StoreError::Corrupt(e.to_string());
                let actor = ActorId::parse(&text(row, "actor_id")?).map_err(corrupt)?;
                let channel = Channel::parse(&text(row, "channel")?).map_err(corrupt)?;
                Ok((ConversationKey { tenant: tenant.clone(), actor, channel }, conversation_of(row)?))
            })
            .collect()
    }

    /// Forgets the conversations that ended quietly before `now`, at `pace`; how many.
    pub async fn forget_conversations(&self, now: OffsetDateTime, pace: &mut Pace) -> Result<u64, StoreError> {
        self.delete_done(&ENDED, to_ms(now), Door::Main, pace).await
    }

    /// Ends `key`'s conversation at turn `turn`, when the command it wrote was admitted (in its own
    /// transaction: should this not happen, the next turn writes the same command again, which
    /// its idempotency key answers as a duplicate).
    pub async fn end_conversation(
        &self,
        key: &ConversationKey,
        turn: i64,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        let ended = bind_key(sqlx::query(END_AT_TURN), key).bind(turn).fetch_optional(&mut *tx).await?;
        let moves = withdraw_held(&mut tx, ended.as_ref(), now).await?;
        tx.figures.merge(moves);
        tx.commit().await?;
        Ok(())
    }
}
