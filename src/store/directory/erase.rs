//! Erasing a person (the GDPR's right to erasure), in one transaction: their directory row and
//! addresses go; their messages' text and the replies' text are overwritten; wherever their
//! address or id is written beside their commands (the conversation, the reply address, the
//! outbox, delivery details, stored API answers, rate-limit keys) it becomes their erased id.
//! What stays: the commands and their outcomes under the erased id, and the evidence, which
//! never held more than keyed pseudonyms, so that its chain still verifies.

use sqlx::AnyConnection;
use time::OffsetDateTime;

use super::people::delete_person;
use crate::domain::command::{ActorId, TenantId};
use crate::domain::evidence::EvidenceDraft;
use crate::store::evidence::append_all;
use crate::store::keyed::{execute_tenant_in, fetch_tenant_in};
use crate::store::rows::text;
use crate::store::tokens::{ConsumedToken, consume_token};
use crate::store::{Directory, StoreError, Tx};

/// A message's payload once its text is erased.
pub const ERASED_PAYLOAD: &str = r#"{"erased":true}"#;

/// Who is erased, and how they are named from now on.
#[derive(Debug, Clone)]
pub struct Erasure<'a> {
    pub tenant: &'a TenantId,
    pub id: &'a ActorId,
    /// The version they were read at.
    pub expected: i64,
    /// Their addresses (and any other text that names them, a stranger's id, say): at least six
    /// characters each, so that replacing them cannot touch anything else.
    pub names: Vec<String>,
    /// What replaces their id and addresses (`erased:<pseudonym>`).
    pub erased_id: &'a ActorId,
    /// The operator's step-up proof, used up here.
    pub proof: Option<&'a ConsumedToken>,
    pub at: OffsetDateTime,
}

/// What an erasure came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Erased {
    /// Erased: their commands and messages, counted.
    Done { commands: u64, messages: u64 },
    /// The person changed (or went) since they were read: nothing done.
    Stale,
    /// The step-up proof was used before: nothing done.
    ProofUsed,
}

impl Directory<'_> {
    pub async fn erase(self, erasure: &Erasure<'_>, evidence: &[EvidenceDraft]) -> Result<Erased, StoreError> {
        // The inbox's copies of their admitted messages go first (on SQLite the inbox is another
        // file, outside this transaction): if the erasure then fails, only copies that served to
        // recognize redeliveries are gone (admission would find such a message recorded anyway).
        // A message of theirs still waiting is admitted, and erased with a later erasure; one
        // parked for the resolver goes once the erasure is committed (below).
        self.store.inbox().forget_admitted_of(&erasure.names).await?;
        let mut tx = self.store.begin().await?;
        if let Some(proof) = erasure.proof
            && !consume_token(&mut tx, proof, None, erasure.at).await?
        {
            tx.rollback().await?;
            return Ok(Erased::ProofUsed);
        }
        if !delete_person(&mut tx, erasure.tenant, erasure.id, erasure.expected).await? {
            tx.rollback().await?;
            return Ok(Erased::Stale);
        }
        let ids = their_ids(&mut tx, erasure).await?;
        let commands = their_commands(&mut tx, erasure, &ids).await?;
        let messages = erase_texts(&mut tx, erasure, &commands).await?;
        rename(&mut tx, erasure, &ids, &commands).await?;
        append_all(&mut tx, erasure.tenant.as_str(), evidence, erasure.at).await?;
        tx.commit().await?;
        self.store.inbox().forget_parked_of(erasure.tenant, &erasure.names).await?;
        Ok(Erased::Done { commands: commands.len() as u64, messages })
    }
}

/// The commands the person gave: under their id, or under an id made of their address when
/// they wrote before anyone listed them.
async fn their_commands(
    conn: &mut AnyConnection,
    erasure: &Erasure<'_>,
    ids: &[String],
) -> Result<Vec<String>, StoreError> {
    let rows =
        fetch_tenant_in(conn, "SELECT command_id FROM commands", erasure.tenant.as_str(), "actor_id", ids).await?;
    rows.iter().map(|row| text(row, "command_id")).collect()
}

/// Overwrites the text of their messages and of the replies to them; returns how many messages.
async fn erase_texts(conn: &mut Tx, erasure: &Erasure<'_>, commands: &[String]) -> Result<u64, StoreError> {
    let tenant = erasure.tenant.as_str();
    let inbound = format!("UPDATE inbound_messages SET payload = '{ERASED_PAYLOAD}', answer = NULL, detail = NULL");
    let mut messages = execute_tenant_in(conn, &inbound, tenant, "command_id", commands).await?;
    let replies = format!(
        "UPDATE outbox SET payload = '{ERASED_PAYLOAD}', last_error = 'erased',
           status = CASE WHEN status = 'pending' THEN 'dead' ELSE status END"
    );
    let prompts = format!("UPDATE confirmations SET prompt = '{ERASED_PAYLOAD}'");
    execute_tenant_in(conn, &prompts, tenant, "command_id", commands).await?;
    for name in &erasure.names {
        let like = format!("%{}%", super::like_escaped(name));
        let inbound = format!("{inbound} WHERE tenant_id = $1 AND payload LIKE $2 ESCAPE '\\'");
        messages += sqlx::query(sqlx::AssertSqlSafe(inbound))
            .bind(tenant)
            .bind(&like)
            .execute(&mut **conn)
            .await?
            .rows_affected();
        // Replies to them (prompts, answers, notices), never a dispatch to an executor; those still
        // waiting are no longer sent (the waiting figures move with them).
        let theirs = "WHERE tenant_id = $1 AND kind <> 'dispatch' AND destination LIKE $2 ESCAPE '\\'";
        let waiting = format!("SELECT kind FROM outbox {theirs} AND status = 'pending'");
        let ended = sqlx::query(sqlx::AssertSqlSafe(waiting)).bind(tenant).bind(&like).fetch_all(&mut **conn).await?;
        let ended: Vec<String> =
            ended.iter().map(|row| crate::store::rows::text(row, "kind")).collect::<Result<_, _>>()?;
        conn.figures.merge(crate::store::figures::Moves::of_outbox([], ended.iter().map(String::as_str)));
        let replies = format!("{replies} {theirs}");
        sqlx::query(sqlx::AssertSqlSafe(replies)).bind(tenant).bind(&like).execute(&mut **conn).await?;
    }
    Ok(messages)
}

/// Their id and addresses, wherever written beside their commands, become their erased id.
async fn rename(
    conn: &mut AnyConnection,
    erasure: &Erasure<'_>,
    ids: &[String],
    commands: &[String],
) -> Result<(), StoreError> {
    let (tenant, erased) = (erasure.tenant.as_str(), erasure.erased_id.as_str());
    for (table, column) in [("commands", "actor_id"), ("confirmations", "actor_id"), ("confirmations", "answered_by")] {
        let sql = format!("UPDATE {table} SET {column} = $2 WHERE tenant_id = $1 AND {column} = $3");
        for id in ids {
            sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                .bind(tenant)
                .bind(erased)
                .bind(id)
                .execute(&mut *conn)
                .await?;
        }
    }
    execute_tenant_in(conn, "UPDATE commands SET reply_to = NULL", tenant, "command_id", commands).await?;
    let columns = [
        ("commands", "conversation_id"),
        ("outbox", "destination"),
        ("outbox", "payload"),
        ("outbound_messages", "recipient"),
        ("outbound_messages", "errors"),
        ("deliveries", "detail"),
        ("api_idempotency", "response"),
    ];
    for name in &erasure.names {
        let like = format!("%{}%", super::like_escaped(name));
        for (table, column) in columns {
            let sql = format!(
                "UPDATE {table} SET {column} = REPLACE({column}, $2, $3)
                 WHERE tenant_id = $1 AND {column} LIKE $4 ESCAPE '\\'"
            );
            let query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(tenant).bind(name.as_str()).bind(erased).bind(&like);
            query.execute(&mut *conn).await?;
        }
        sqlx::query("DELETE FROM rate_limits WHERE key LIKE $1 ESCAPE '\\'").bind(&like).execute(&mut *conn).await?;
    }
    // What their identity resolver said of them, and anything of theirs still waiting for it.
    for table in ["identity_answers", "identity_waits", "identity_lookups"] {
        execute_tenant_in(conn, &format!("DELETE FROM {table}"), tenant, "address", &erasure.names).await?;
    }
    execute_tenant_in(conn, "DELETE FROM identity_answers", tenant, "actor_id", ids).await?;
    // Their link codes, and the addresses those linked.
    execute_tenant_in(conn, "DELETE FROM link_codes", tenant, "person_id", ids).await?;
    Ok(())
}

/// Their id, and the ids they had as someone nobody listed (`unknown:<channel>:<address>`).
async fn their_ids(conn: &mut AnyConnection, erasure: &Erasure<'_>) -> Result<Vec<String>, StoreError> {
    let mut ids = vec![erasure.id.as_str().to_owned()];
    for name in &erasure.names {
        let pattern = format!("unknown:%:{}", super::like_escaped(name));
        let rows =
            sqlx::query("SELECT DISTINCT actor_id FROM commands WHERE tenant_id = $1 AND actor_id LIKE $2 ESCAPE '\\'")
                .bind(erasure.tenant.as_str())
                .bind(pattern)
                .fetch_all(&mut *conn)
                .await?;
        for row in &rows {
            ids.push(text(row, "actor_id")?);
        }
    }
    Ok(ids)
}
