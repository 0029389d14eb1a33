//! The tenant's policy in one place: the registry (what each command requires), the directory
//! (what each actor holds) and the security gates. Channels and the API ask it the same question.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::domain::directory::Directory;
use crate::domain::registry::CommandSpec;
use crate::domain::registry::Registry;
use crate::service::security::Security;
use crate::service::security::authz;
use crate::service::security::authz::AuthzDecision;
use crate::store::StoredCommand;

#[derive(Debug, Clone)]
pub struct Policy {
    pub registry: Arc<Registry>,
    pub directory: Arc<Directory>,
    pub security: Arc<Security>,
    /// The agents (executors) the configuration declares: what `pause` and `resume` may name.
    pub agents: Arc<BTreeSet<String>>,
}

/// A decision about one stored command, with what it was decided on.
#[derive(Debug, Clone)]
pub struct Authorization<'a> {
    pub decision: AuthzDecision,
    pub spec: &'a CommandSpec,
    pub held: BTreeSet<String>,
}

impl Authorization<'_> {
    pub fn evidence(&self) -> serde_json::Value {
        self.decision.evidence(self.spec, &self.held)
    }
}

impl Policy {
    /// The (entity, action) a filter by command name selects: a name the registry does not know
    /// selects nothing (no command has the intent `-`/`-`).
    pub fn intent_named(&self, name: &str) -> (String, String) {
        match self.registry.get(name) {
            Some(spec) => (spec.entity.clone(), spec.action.clone()),
            None => ("-".to_owned(), "-".to_owned()),
        }
    }

    /// The registry's entry for a stored command.
    pub fn spec_of(&self, command: &StoredCommand) -> Option<&CommandSpec> {
        self.registry.by_intent(&command.envelope.intent.entity, &command.envelope.intent.action)
    }

    /// The command that compensates `command`, when the registry declares one.
    pub fn compensation_of(&self, command: &StoredCommand) -> Option<&CommandSpec> {
        self.spec_of(command).and_then(|spec| spec.compensation.as_deref()).and_then(|name| self.registry.get(name))
    }

    /// Authorizes a stored command for its actor. `None` when the registry no longer knows the
    /// command (it was removed since): such a command cannot be authorized.
    pub fn authorize(&self, command: &StoredCommand, stepped_up: bool) -> Option<Authorization<'_>> {
        let spec = self.spec_of(command)?;
        let held = self.scopes_of(command);
        Some(Authorization { decision: authz::decide(spec, &held, stepped_up), spec, held })
    }

    /// The scopes the directory gives the command's actor now (none for an actor it no longer
    /// lists).
    pub fn scopes_of(&self, command: &StoredCommand) -> BTreeSet<String> {
        let e = &command.envelope;
        self.directory
            .tenant(e.tenant_id.as_str())
            .and_then(|t| t.actor(e.actor_id.as_str()))
            .map(|a| a.scopes.clone())
            .unwrap_or_default()
    }
}
