//! Observability and recovery over the conversation (OoC, RFC-WF-0007). The registry's built-in
//! chat commands — `status`, `status <ref>`, `why <ref>`, `more`; for operators `failures`,
//! `trace <ref>`, `evidence <ref>`, `agents`, and the recovery actions — go through the pipeline
//! like any other command (interpreted, confirmed where the registry says, authorized by scope,
//! dispatched, executed once, answered from a template, with evidence) and are executed here, by
//! the `builtin:gateway` executor. Recovery actions call the very function the operator API
//! calls; the status view is the API's too.

mod actions;
mod operation;
mod precheck;
mod queries;
pub mod view;

pub use precheck::Precheck;
/// The steps `why` names, which each of its templates spells out.
pub use queries::TrailStep;

use operation::Operation;

use std::collections::BTreeSet;

use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::domain::command::ShortRef;

use crate::domain::command::TenantId;
use crate::domain::delivery::CallOutcome;
use crate::service::engine::Engine;
use crate::service::intake::Ingress;
use crate::service::security::Policy;
use crate::store::{Store, StoreError, StoredCommand};

/// The executor name the registry's built-in commands go to.
pub const GATEWAY: &str = crate::domain::registry::GATEWAY_EXECUTOR;

/// The scope that lets a person see every command of the tenant, not only their own.
pub const SEE_ALL: &str = "commands:read";

/// How many lines a list shows before "reply `more`".
pub const PAGE: usize = 5;

/// Executes the built-in commands.
#[derive(Clone)]
pub struct Gateway {
    engine: Engine,
    policy: Policy,
    ingress: Ingress,
}

/// Who asked, with the scopes the directory gives them now.
pub(crate) struct Asker<'a> {
    pub tenant: &'a TenantId,
    pub actor: &'a str,
    pub scopes: BTreeSet<String>,
    /// The command that asked (left out of the lists it makes).
    pub command: &'a StoredCommand,
}

impl Asker<'_> {
    pub fn sees_all(&self) -> bool {
        self.scopes.contains(SEE_ALL)
    }
}

/// Why a built-in command could not do what it was asked: its `code` is the command's reason.
#[derive(Debug)]
pub(crate) enum Refusal {
    Refused { code: &'static str, detail: Value },
    Store(StoreError),
}

impl From<StoreError> for Refusal {
    fn from(error: StoreError) -> Self {
        Self::Store(error)
    }
}

/// An agent and its state, as `agents` lists each and `pause` and `resume` answer.
#[derive(serde::Serialize)]
pub(super) struct AgentLine<'a> {
    pub(super) agent: &'a str,
    pub(super) state: crate::domain::agent::AgentState,
}

impl AgentLine<'_> {
    /// The line as the reply's variables take it (a name and a state: nothing to fail).
    pub(super) fn value(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

pub(crate) fn refused(code: &'static str, detail: Value) -> Refusal {
    Refusal::Refused { code, detail }
}

pub(crate) type Answer = Result<Value, Refusal>;

impl Gateway {
    pub fn new(ingress: Ingress) -> Self {
        let (engine, policy) = (ingress.engine().clone(), ingress.policy().clone());
        Self { engine, policy, ingress }
    }

    /// Executes `command`; a storage failure is worth another attempt, like an executor's 503.
    pub async fn call(&self, command: &StoredCommand) -> CallOutcome {
        let e = &command.envelope;
        let scopes = match self.policy.scopes_of(command).await {
            Ok(scopes) => scopes,
            Err(error) => return CallOutcome::Retry { error: format!("storage: {error}"), retry_after: None },
        };
        let asker = Asker { tenant: &e.tenant_id, actor: e.actor_id.as_str(), scopes, command };
        let now = OffsetDateTime::now_utc();
        let answer = match Operation::of(&e.intent.entity, &e.intent.action) {
            Some(Operation::Agents) => queries::agents(self, &asker).await,
            Some(Operation::Requests) => queries::requests(self, &asker, 1).await,
            Some(Operation::More) => queries::more(self, &asker).await,
            Some(Operation::Status) => queries::status(self, &asker).await,
            Some(Operation::Why) => queries::why(self, &asker).await,
            Some(Operation::Failures) => queries::failures(self, &asker, 1, now).await,
            Some(Operation::Trace) => queries::trace(self, &asker).await,
            Some(Operation::Evidence) => queries::evidence(self, &asker).await,
            Some(Operation::Agent(event)) => actions::agent(self, &asker, event, now).await,
            Some(Operation::Recover(action)) => actions::recover(self, &asker, action, now).await,
            None => {
                let other = &e.intent.action;
                Err(refused("unknown_operation", json!({"message": format!("no built-in `{other}`")})))
            }
        };
        match answer {
            Ok(result) => CallOutcome::Executed { succeeded: true, detail: result },
            Err(Refusal::Refused { code, detail }) => {
                CallOutcome::Executed { succeeded: false, detail: with_code(code, detail) }
            }
            Err(Refusal::Store(error)) => CallOutcome::Retry { error: format!("storage: {error}"), retry_after: None },
        }
    }

    /// The one command `reference` names that the asker may see.
    pub(crate) async fn resolve(&self, asker: &Asker<'_>, reference: &str) -> Result<StoredCommand, Refusal> {
        resolve(self.engine.store(), asker.tenant, asker.actor, asker.sees_all(), reference).await
    }

    /// The registry's name for a command (what people typed), else its intent.
    pub(crate) fn name_of(&self, command: &StoredCommand) -> String {
        let intent = &command.envelope.intent;
        self.policy
            .known_spec_of(command)
            .map_or_else(|| format!("{}.{}", intent.entity, intent.action), |spec| spec.name.clone())
    }

    /// Whether a command is one of these built-ins (left out of the lists people ask for).
    pub(crate) fn is_builtin(&self, command: &StoredCommand) -> bool {
        self.policy.known_spec_of(command).is_some_and(|spec| spec.executor == GATEWAY)
    }
}

/// The one command of `tenant` that `reference` names and `actor` may see (their own, or any
/// with `sees_all`).
async fn resolve(
    store: &Store,
    tenant: &TenantId,
    actor: &str,
    sees_all: bool,
    reference: &str,
) -> Result<StoredCommand, Refusal> {
    let unknown = || refused("unknown_reference", json!({"ref": reference}));
    let short = ShortRef::parse(reference).map_err(|_| unknown())?;
    let found = store.commands().by_ref(tenant, &short).await?;
    let mut visible: Vec<StoredCommand> =
        found.into_iter().filter(|c| sees_all || c.envelope.actor_id.as_str() == actor).collect();
    match visible.len() {
        0 => Err(unknown()),
        1 => Ok(visible.remove(0)),
        _ => Err(refused("ambiguous_reference", json!({"ref": short}))),
    }
}

/// A refusal's detail with its code, as the `failed` reply reads it.
fn with_code(code: &str, mut detail: Value) -> Value {
    detail["code"] = code.into();
    detail
}

/// A short time for a chat line: `11-23 09:41 UTC`.
pub(crate) fn when(at: OffsetDateTime) -> String {
    let format = time::macros::format_description!("[month]-[day] [hour]:[minute] UTC");
    at.format(format).unwrap_or_default()
}

/// The argument named `name` of the asking command.
pub(crate) fn arg<'a>(command: &'a StoredCommand, name: &str) -> Option<&'a str> {
    command.envelope.args.get(name).and_then(Value::as_str)
}
