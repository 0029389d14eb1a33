//! What the layers above read about commands, their evidence, their deliveries and the
//! directory's roles: the API's and the console's pages, the executors' acknowledgements, the
//! command line. One façade over the repositories, so that above the service nobody names a
//! repository (the types read are the store's own rows, handed on as they are).

use uuid::Uuid;

use crate::domain::agent::Agent;
use crate::domain::command::TenantId;
use crate::service::database::{Database, StoreError};
use crate::store::Store;

pub use crate::store::{
    AuditReport, ChainReport, CommandFilter, ConsumedToken, Delivery, DeliveryLogEntry, Search, Source, StoredArtifact,
    StoredCommand, StoredMove, StoredPerson, StoredRole, TraceNode,
};

/// Reads, through the database's handle (`Database::reads`, `Engine::reads`).
#[derive(Clone, Copy, Debug)]
pub struct Reads<'a>(&'a Store);

impl Database {
    pub fn reads(&self) -> Reads<'_> {
        Reads(self.store())
    }
}

impl Reads<'_> {
    /// Command `id` of `tenant`.
    pub async fn command(&self, tenant: &TenantId, id: Uuid) -> Result<Option<StoredCommand>, StoreError> {
        self.0.commands().get(tenant, id).await
    }

    /// Command `id` whatever its tenant: for callers that hold the id from the gateway itself (an
    /// executor's acknowledgement, the step-up page's signed link, the command line).
    pub async fn command_of_any_tenant(&self, id: Uuid) -> Result<Option<StoredCommand>, StoreError> {
        self.0.commands().get_unscoped(id).await
    }

    /// The commands of `ids` that exist, in no given order.
    pub async fn commands(&self, ids: &[Uuid]) -> Result<Vec<StoredCommand>, StoreError> {
        self.0.commands().get_many(ids).await
    }

    /// A page of `tenant`'s commands.
    pub async fn list(&self, tenant: &TenantId, filter: &CommandFilter) -> Result<Vec<StoredCommand>, StoreError> {
        self.0.commands().list(tenant, filter).await
    }

    /// The commands one correlation id ties together, with their moves.
    pub async fn trace(&self, tenant: &TenantId, correlation_id: &str) -> Result<Vec<TraceNode>, StoreError> {
        self.0.commands().trace(tenant, correlation_id).await
    }

    /// Command `id`'s evidence, in its chain's order.
    pub async fn evidence_of(&self, tenant: &TenantId, id: Uuid) -> Result<Vec<StoredArtifact>, StoreError> {
        self.0.evidence().for_command(tenant.as_str(), id).await
    }

    /// Every evidence chain recomputed from its first link.
    pub async fn verify_evidence(&self) -> Result<AuditReport, StoreError> {
        self.0.evidence().verify().await
    }

    /// Command `id`'s deliveries, one per executor, by target.
    pub async fn deliveries_of(&self, id: Uuid) -> Result<Vec<Delivery>, StoreError> {
        self.0.deliveries().of_command(id).await
    }

    /// The previews each of `ids` was confirmed on.
    pub async fn previews_of(
        &self,
        ids: &[Uuid],
    ) -> Result<std::collections::HashMap<Uuid, crate::domain::preview::BoundPreview>, StoreError> {
        self.0.previews_of(ids).await
    }

    /// The preview command `id` was confirmed on, if it had one (what its approvers are shown).
    pub async fn preview_of(&self, id: Uuid) -> Result<Option<crate::domain::preview::Preview>, StoreError> {
        Ok(self.0.previews_of(&[id]).await?.remove(&id).map(|bound| bound.preview))
    }

    /// The deliveries of each of `ids`.
    pub async fn deliveries_of_commands(&self, ids: &[Uuid]) -> Result<Vec<Delivery>, StoreError> {
        self.0.deliveries().of_commands(ids).await
    }

    /// Command `id`'s delivery to `target`.
    pub async fn delivery(&self, id: Uuid, target: &str) -> Result<Option<Delivery>, StoreError> {
        self.0.deliveries().get(id, target).await
    }

    /// What happened to a delivery, oldest first: (event, outcome).
    pub async fn delivery_log(&self, delivery_id: Uuid) -> Result<Vec<(String, String)>, StoreError> {
        self.0.deliveries().log(delivery_id).await
    }

    /// How often command `id`'s dispatch to each executor was tried: (executor, attempts).
    pub async fn dispatch_attempts(&self, id: Uuid) -> Result<Vec<(String, i64)>, StoreError> {
        self.0.deliveries().dispatch_attempts(id).await
    }

    /// The roles `tenant`'s database holds (the file's and the API's).
    pub async fn roles(&self, tenant: &TenantId) -> Result<Vec<StoredRole>, StoreError> {
        self.0.directory().roles_owned(tenant).await
    }

    /// Executor `name`'s state.
    pub async fn agent(&self, name: &str) -> Result<Agent, StoreError> {
        self.0.agents().get(name).await
    }
}
