//! The tenant's policy in one place: the registry (what each command requires), the tenants and
//! the people (what each actor holds) and the security gates. Channels and the API ask it the
//! same question.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::domain::directory::Tenants;
use crate::service::directory::Standing;
use crate::service::live::Live;
use crate::service::security::Security;
use crate::service::security::authz;
use crate::service::security::authz::AuthzDecision;
use crate::service::security::registries::{Registries, Spec};
use crate::store::{StoreError, StoredCommand};

#[derive(Debug, Clone)]
pub struct Policy {
    /// The command registry now, and the versions commands were admitted under.
    pub registry: Registries,
    /// The tenants the directory file declares, swapped whole on reload.
    pub tenants: Live<Tenants>,
    /// Who writes to each tenant (the directory as data).
    pub people: crate::service::directory::People,
    pub security: Arc<Security>,
    /// The agents (executors) the configuration declares: what `pause` and `resume` may name.
    pub agents: Arc<BTreeSet<String>>,
    /// The executors with a preview phase (`ExecutorConfig::offers_previews`).
    pub previewing: Arc<BTreeSet<String>>,
}

/// A decision about one stored command, with what it was decided on.
#[derive(Debug, Clone)]
pub struct Authorization {
    pub decision: AuthzDecision,
    pub spec: Spec,
    pub held: BTreeSet<String>,
}

impl Authorization {
    pub fn evidence(&self) -> serde_json::Value {
        self.decision.evidence(&self.spec, &self.held)
    }
}

impl Policy {
    /// Whether any command of the current registry can have a preview (the dispatch then reads
    /// the previews its commands were confirmed on).
    pub fn any_previews(&self) -> bool {
        self.registry.current().commands().iter().any(|spec| self.previews(spec))
    }

    /// Whether a command of `spec` waits for its executor's preview before the prompt: always when
    /// the registry requires one (an executor without a preview phase then refuses it), and
    /// when it allows one and the executor has a preview phase.
    pub fn previews(&self, spec: &crate::domain::registry::CommandSpec) -> bool {
        use crate::domain::preview::PreviewRule;
        match spec.preview {
            PreviewRule::Off => false,
            PreviewRule::Optional => self.previewing.contains(&spec.executor),
            PreviewRule::Required => true,
        }
    }

    /// The (entity, action) a filter by command name selects: a name the registry does not know
    /// selects nothing (no command has the intent `-`/`-`).
    pub fn intent_named(&self, name: &str) -> (String, String) {
        match self.registry.current().get(name) {
            Some(spec) => (spec.entity.clone(), spec.action.clone()),
            None => ("-".to_owned(), "-".to_owned()),
        }
    }

    /// The registry's entry for a stored command: in the version it was admitted under.
    pub async fn spec_of(&self, command: &StoredCommand) -> Result<Option<Spec>, StoreError> {
        self.registry.spec_of(command).await
    }

    /// `spec_of` from what this process has at hand (see `Registries::known_spec_of`): for a
    /// command's name on a page, or its execution timeout.
    pub fn known_spec_of(&self, command: &StoredCommand) -> Option<Spec> {
        self.registry.known_spec_of(command)
    }

    /// The command that compensates `command`, when its registry declares one.
    pub async fn compensation_of(&self, command: &StoredCommand) -> Result<Option<Spec>, StoreError> {
        let spec = self.spec_of(command).await?;
        Ok(spec.and_then(|spec| spec.compensation.clone().and_then(|name| spec.sibling(&name))))
    }

    /// Authorizes a stored command for its actor, who stands as `standing` now (their roles, read
    /// by the approval policy, and their scopes). `None` when the registry it was admitted under
    /// does not know the command: such a command cannot be authorized.
    pub async fn authorize(
        &self,
        command: &StoredCommand,
        standing: Standing,
        stepped_up: bool,
    ) -> Result<Option<Authorization>, StoreError> {
        let Some(spec) = self.spec_of(command).await? else { return Ok(None) };
        let Standing { roles, scopes: held } = standing;
        let requester = authz::Requester { roles: &roles, args: &command.envelope.args };
        let decision = authz::decide_with_policy(&spec, &held, requester, stepped_up);
        Ok(Some(Authorization { decision, spec, held }))
    }

    /// The scopes the directory gives the command's actor now (none for an actor it no longer
    /// lists; the tenant's role for strangers to someone it handled so).
    pub async fn scopes_of(&self, command: &StoredCommand) -> Result<BTreeSet<String>, StoreError> {
        Ok(self.standing_of(command).await?.scopes)
    }

    /// The roles and scopes the directory gives the command's actor now.
    pub async fn standing_of(&self, command: &StoredCommand) -> Result<Standing, StoreError> {
        let e = &command.envelope;
        let tenants = self.tenants.get();
        let stranger_role = tenants.tenant(e.tenant_id.as_str()).and_then(|t| t.unknown_sender.role());
        self.people.standing_of(&e.tenant_id, e.actor_id.as_str(), stranger_role).await
    }
}
