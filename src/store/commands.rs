//! Command rows and their transitions: each move is one transaction that compares-and-swaps the
//! version, records the transition, appends its evidence and, for a terminal state, settles the
//! dedupe record and releases the command's lock, together with whatever outbox rows it causes.

use sqlx::AnyConnection;
use sqlx::any::AnyRow;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::TenantId;
use crate::domain::command::{ActorId, Channel, CommandEnvelope, ExternalId, Fingerprint, IdempotencyKey, Intent};
use crate::domain::evidence::EvidenceDraft;
use crate::domain::lifecycle::{Event, Lifecycle, State, Transition};
use crate::store::StoreError;
use crate::store::named::{self, Row, row};
use crate::store::outbox::{NewOutboxMessage, ReplyTo};
use crate::store::rows::{from_ms, int, json, opt_int, opt_parsed, opt_text, parsed, text, to_ms, update_rows, uuid};
use crate::store::signals::CommittedMove;

/// A command as stored: its envelope and where it stands.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredCommand {
    pub envelope: CommandEnvelope,
    pub lifecycle: Lifecycle,
    pub version: i64,
    pub reason_code: Option<String>,
    /// Where the person who asked is answered; none for commands from the API.
    pub reply_to: Option<ReplyTo>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
    /// The W3C `traceparent` the command was admitted under, when traces are exported.
    pub trace_parent: Option<String>,
}

impl StoredCommand {
    /// The command as the person who asked names it (`refund`); `request` without a conversation.
    pub fn asked_name(&self) -> String {
        self.reply_to.as_ref().and_then(|r| r.command.clone()).unwrap_or_else(|| "request".into())
    }
}

/// What `list_commands` selects; every field is optional but the page size.
#[derive(Debug, Clone, Default)]
pub struct CommandFilter {
    pub state: Option<State>,
    pub actor: Option<String>,
    pub conversation: Option<String>,
    /// (entity, action): a command of the registry.
    pub intent: Option<(String, String)>,
    pub since: Option<OffsetDateTime>,
    pub until: Option<OffsetDateTime>,
    /// A short reference (`R7K2QX`).
    pub short_ref: Option<crate::domain::command::ShortRef>,
    /// The cursor: only commands older than this one.
    pub after: Option<Uuid>,
    pub limit: i64,
}

/// One row of a command's transition history.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TransitionRecord {
    pub version: i64,
    pub from: State,
    pub to: State,
    pub event: Event,
    pub reason_code: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
}

/// A decided move and everything that must be written with it.
#[derive(Debug, Clone)]
pub struct TransitionWrite {
    pub tenant_id: TenantId,
    pub command_id: Uuid,
    /// The version the decision was made on; the write fails if the row moved since.
    pub expected_version: i64,
    pub transition: Transition,
    pub reason_code: Option<String>,
    /// The evidence of the new state (SMCL §IX), written in this order.
    pub evidence: Vec<EvidenceDraft>,
    pub outbox: Vec<NewOutboxMessage>,
    pub at: OffsetDateTime,
    /// The command's trace (its `traceparent`), which the move's span joins.
    pub trace_parent: Option<String>,
    /// Whether the command may hold a lock (a mutation with a target): its end releases it.
    pub may_hold_lock: bool,
}

impl TransitionWrite {
    /// The command it moves and the state it moves it to.
    pub(crate) fn ends_in(&self) -> (Uuid, State) {
        (self.command_id, self.transition.to)
    }

    /// The move as observers are told of it once committed.
    pub(crate) fn committed(&self) -> CommittedMove<'_> {
        let trace_parent = self.trace_parent.as_deref();
        CommittedMove { command_id: self.command_id, transition: &self.transition, trace_parent, decided_at: self.at }
    }
}

/// A new command's row: its envelope and what its first moves leave.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CommandRow<'a> {
    pub envelope: &'a CommandEnvelope,
    pub reason_code: Option<&'a str>,
    pub reply_to: Option<&'a ReplyTo>,
    pub trace_parent: Option<&'a str>,
    pub at: OffsetDateTime,
}

/// What a committed move wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct CommittedTransition {
    pub version: i64,
    pub evidence_ids: Vec<Uuid>,
}

/// The columns `decode_command` reads, as a literal so that queries stay static SQL.
macro_rules! command_columns {
    () => {
        "command_id, tenant_id, actor_id, channel, conversation_id, message_ids, correlation_id, \
         causation_id, intent_entity, intent_action, intent_target, args, command_kind, idempotency_class, \
         idempotency_key, fingerprint, risk, target_command_id, state, confirmation, version, reason_code, \
         received_at, expires_at, created_at, updated_at, reply_to, trace_parent, registry_version"
    };
}
pub(crate) use command_columns;

/// An admitted command's row.
pub(crate) fn command_row(write: &CommandRow<'_>, lifecycle: Lifecycle, version: i64) -> Result<Row, StoreError> {
    let (e, reason_code, at) = (write.envelope, write.reason_code, write.at);
    let reply_to =
        write.reply_to.map(serde_json::to_string).transpose().map_err(|err| StoreError::Corrupt(err.to_string()))?;
    let message_ids = serde_json::to_string(&e.message_ids).map_err(|err| StoreError::Corrupt(err.to_string()))?;
    let args = crate::domain::canonical::of(&e.args).ok_or_else(|| StoreError::Corrupt("args are not JSON".into()))?;
    Ok(row![
        "command_id" => e.command_id.to_string(),
        "tenant_id" => e.tenant_id.as_str(),
        "actor_id" => e.actor_id.as_str(),
        "channel" => e.channel.as_str(),
        "conversation_id" => e.conversation_id.as_str(),
        "message_ids" => message_ids,
        "correlation_id" => e.correlation_id.as_str(),
        "causation_id" => e.causation_id.as_ref().map(|c| c.as_str()),
        "intent_entity" => e.intent.entity.as_str(),
        "intent_action" => e.intent.action.as_str(),
        "intent_target" => e.intent.target.as_deref(),
        "args" => args,
        "command_kind" => e.command_kind.as_str(),
        "idempotency_class" => e.idempotency_class.as_str(),
        "idempotency_key" => e.idempotency_key.as_str(),
        "fingerprint" => e.fingerprint.as_str(),
        "risk" => e.risk.as_str(),
        "target_command_id" => e.target_command_id.map(|id| id.to_string()),
        "state" => lifecycle.state.as_str(),
        "confirmation" => lifecycle.confirmation.as_str(),
        "version" => version,
        "reason_code" => reason_code,
        "received_at" => to_ms(e.received_at),
        "expires_at" => e.expires_at.map(to_ms),
        "created_at" => to_ms(at),
        "updated_at" => to_ms(at),
        "reply_to" => reply_to,
        "short_ref" => crate::domain::command::ShortRef::of(e.command_id).as_str(),
        "trace_parent" => write.trace_parent,
        "registry_version" => e.registry_version.as_deref(),
    ])
}

pub(crate) async fn insert_command(
    conn: &mut AnyConnection,
    write: &CommandRow<'_>,
    lifecycle: Lifecycle,
    version: i64,
) -> Result<(), StoreError> {
    named::insert(conn, "commands", vec![command_row(write, lifecycle, version)?], "").await?;
    Ok(())
}

/// One transition row: the command's move to `version`.
pub(crate) fn transition_row(
    command_id: Uuid,
    version: i64,
    transition: &Transition,
    reason_code: Option<&str>,
    at: OffsetDateTime,
) -> Row {
    row![
        "command_id" => command_id.to_string(),
        "version" => version,
        "from_state" => transition.from.as_str(),
        "to_state" => transition.to.as_str(),
        "event" => transition.event.as_str(),
        "reason_code" => reason_code,
        "at" => to_ms(at),
    ]
}

/// Records moves, of one command or of many, in one statement.
pub(crate) async fn insert_transitions(conn: &mut AnyConnection, rows: Vec<Row>) -> Result<(), StoreError> {
    named::insert(conn, "command_transitions", rows, "").await?;
    Ok(())
}

pub(crate) async fn load_command(
    conn: &mut AnyConnection,
    tenant_id: &TenantId,
    command_id: Uuid,
) -> Result<Option<StoredCommand>, StoreError> {
    let row =
        sqlx::query(concat!("SELECT ", command_columns!(), " FROM commands WHERE command_id = $1 AND tenant_id = $2"))
            .bind(command_id.to_string())
            .bind(tenant_id.as_str())
            .fetch_optional(&mut *conn)
            .await?;
    row.as_ref().map(decode_command).transpose()
}

pub(crate) fn decode_command(row: &AnyRow) -> Result<StoredCommand, StoreError> {
    let envelope = CommandEnvelope {
        command_id: uuid(row, "command_id")?,
        tenant_id: parsed_id(row, "tenant_id", TenantId::parse)?,
        actor_id: parsed_id(row, "actor_id", ActorId::parse)?,
        channel: parsed_id(row, "channel", Channel::parse)?,
        conversation_id: parsed_id(row, "conversation_id", ExternalId::parse)?,
        message_ids: json(row, "message_ids")?,
        correlation_id: parsed_id(row, "correlation_id", ExternalId::parse)?,
        causation_id: opt_text(row, "causation_id")?
            .map(|raw| ExternalId::parse(&raw).map_err(|e| StoreError::Corrupt(e.to_string())))
            .transpose()?,
        intent: Intent {
            entity: text(row, "intent_entity")?,
            action: text(row, "intent_action")?,
            target: opt_text(row, "intent_target")?,
        },
        args: json(row, "args")?,
        command_kind: parsed(row, "command_kind")?,
        idempotency_class: parsed(row, "idempotency_class")?,
        idempotency_key: IdempotencyKey::from_stored(text(row, "idempotency_key")?),
        fingerprint: Fingerprint::from_stored(text(row, "fingerprint")?),
        risk: parsed(row, "risk")?,
        received_at: from_ms(int(row, "received_at")?)?,
        expires_at: opt_int(row, "expires_at")?.map(from_ms).transpose()?,
        target_command_id: opt_parsed(row, "target_command_id")?,
        registry_version: opt_text(row, "registry_version")?,
    };
    Ok(StoredCommand {
        lifecycle: Lifecycle {
            state: parsed(row, "state")?,
            kind: envelope.command_kind,
            confirmation: parsed(row, "confirmation")?,
        },
        envelope,
        version: int(row, "version")?,
        reason_code: opt_text(row, "reason_code")?,
        reply_to: opt_text(row, "reply_to")?
            .map(|raw| serde_json::from_str(&raw).map_err(|e| StoreError::Corrupt(format!("reply_to: {e}"))))
            .transpose()?,
        created_at: from_ms(int(row, "created_at")?)?,
        updated_at: from_ms(int(row, "updated_at")?)?,
        trace_parent: opt_text(row, "trace_parent")?,
    })
}

pub(crate) fn decode_transition(row: &AnyRow) -> Result<TransitionRecord, StoreError> {
    Ok(TransitionRecord {
        version: int(row, "version")?,
        from: parsed(row, "from_state")?,
        to: parsed(row, "to_state")?,
        event: parsed(row, "event")?,
        reason_code: opt_text(row, "reason_code")?,
        at: from_ms(int(row, "at")?)?,
    })
}

fn parsed_id<T, E: std::fmt::Display>(
    row: &AnyRow,
    column: &str,
    parse: fn(&str) -> Result<T, E>,
) -> Result<T, StoreError> {
    let raw = text(row, column)?;
    parse(&raw).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))
}

/// Moves a command through `run` (its consecutive moves, each decided on the version the one
/// before leaves) in one statement, if it still stands where the first was decided; `false`
/// (nothing written) when it moved meanwhile.
pub(crate) async fn move_command(conn: &mut AnyConnection, run: &[TransitionWrite]) -> Result<bool, StoreError> {
    Ok(run.is_empty() || move_commands(conn, &[run]).await? == 1)
}

/// Moves several commands, each through its run, in one statement; returns how many moved.
pub(crate) async fn move_commands(conn: &mut AnyConnection, runs: &[&[TransitionWrite]]) -> Result<usize, StoreError> {
    let rows = runs
        .iter()
        .filter_map(|run| {
            let (first, last) = (run.first()?, run.last()?);
            // Each move keeps the reason before it unless it gives one: the last one given stands.
            let reason = run.iter().rev().find_map(|write| write.reason_code.as_deref());
            Some(vec![
                first.command_id.to_string().into(),
                first.expected_version.into(),
                first.transition.from.as_str().into(),
                last.transition.to.as_str().into(),
                last.transition.confirmation.as_str().into(),
                (last.expected_version + 1).into(),
                to_ms(last.at).into(),
                reason.into(),
            ])
        })
        .collect();
    // A move without a reason keeps the one before (a rejection's, a failure's), except a move on
    // to `authorized` or `started`: what held the command (a step-up, an approval) is over.
    let set = "state = v.column4, confirmation = v.column5, version = v.column6, updated_at = v.column7, \
        reason_code = CASE WHEN v.column4 IN ('authorized', 'started') THEN v.column8 \
        ELSE COALESCE(v.column8, commands.reason_code) END";
    // The command by its key (ids are unique across tenants) at the version and state the move was
    // decided on. No tenant here: with it, PostgreSQL's planner on a young table (no statistics
    // yet) found `commands_by_state` (tenant, state) as good as the primary key and read every
    // command of the tenant in that state for each row of the batch.
    let matching = "commands.command_id = v.column1 AND commands.version = v.column2 AND commands.state = v.column3";
    let moved = update_rows(conn, ("commands", set, matching), 8, rows).await?;
    // Every way out of `confirmation_required` but an answer (a cancel, an expiry, a recovery)
    // closes the confirmation with the move, so no one is asked about an ended command.
    let left_unanswered: Vec<(Uuid, OffsetDateTime)> = runs
        .iter()
        .filter(|run| run.iter().any(|w| w.transition.from == State::ConfirmationRequired))
        .filter_map(|run| run.last().filter(|w| w.transition.to != State::ConfirmationRequired))
        .map(|last| (last.command_id, last.at))
        .collect();
    crate::store::confirmations::close_confirmations(conn, &left_unanswered).await?;
    // The same for an approval: one its own step did not settle (an operator's cancel while it
    // waited) is closed with the move. (An executor's closes when its delivery stops waiting:
    // `store::step`.)
    let left_waiting: Vec<(Uuid, OffsetDateTime)> = runs
        .iter()
        .filter(|run| run.iter().any(|w| w.transition.from == State::AuthzPending))
        .filter_map(|run| run.last().filter(|w| w.transition.to != State::AuthzPending))
        .map(|last| (last.command_id, last.at))
        .collect();
    crate::store::approvals::close_approvals(conn, &left_waiting).await?;
    Ok(moved)
}
