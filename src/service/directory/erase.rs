//! Erasing a person on request (the GDPR's right to erasure): an operator's high-risk action,
//! proved with a single-use step-up token bound to it (`erasure_binding`). What goes and what
//! stays is the store's to say (`store::directory::erase`); here the person is found, named by
//! their erased id, and the erasure recorded as evidence under their pseudonym.

use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::People;
use super::change::{Change, person_evidence};
use super::manage::{Changing, DirectoryError};
use crate::domain::command::{ActorId, TenantId};
use crate::store::{ConsumedToken, Erased, Erasure};

/// What an erasure did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ErasureReport {
    /// The id their commands carry from now on.
    pub erased_id: String,
    /// Their commands, kept under the erased id.
    pub commands: u64,
    /// Their messages whose text was erased.
    pub messages: u64,
}

/// What a step-up proof for erasing `id` is bound to: in place of a command, this id, and in
/// place of its idempotency key, `erase:<id>` (`chatgate stepup mint --command … --idempotency-key …`).
pub fn erasure_binding(tenant: &TenantId, id: &str) -> (Uuid, String) {
    let name = format!("chatgate:erase:{tenant}:{id}");
    (Uuid::new_v5(&Uuid::NAMESPACE_URL, name.as_bytes()), format!("erase:{id}"))
}

impl People {
    /// Erases `id`, using up the operator's step-up `proof` (checked by the caller against
    /// `erasure_binding`).
    pub async fn erase(
        &self,
        who: &Changing<'_>,
        id: &str,
        proof: &ConsumedToken,
    ) -> Result<ErasureReport, DirectoryError> {
        let stored =
            self.store.directory().get(who.tenant, id).await?.ok_or_else(|| DirectoryError::NotFound(id.into()))?;
        let person = &stored.person;
        let pseudonym = self.pseudonym(id);
        let erased_id = ActorId::parse(&format!("erased:{}", &pseudonym[..pseudonym.len().min(24)]))
            .map_err(|e| DirectoryError::Invalid(crate::domain::directory::PersonError(e.to_string())))?;
        // Every text that names them and cannot name anything else: their addresses, and their id
        // when it is not a short word that other text may contain.
        let mut names: Vec<String> = person.addresses.iter().map(|a| a.value.clone()).collect();
        if id.len() >= 6 && !names.iter().any(|n| n == id) {
            names.push(id.to_owned());
        }
        let evidence = person_evidence(Change::Erased, pseudonym, Some(person), None, &who.by);
        let erasure = Erasure {
            tenant: who.tenant,
            id: &person.id,
            expected: stored.version,
            names,
            erased_id: &erased_id,
            proof: Some(proof),
            at: who.at,
        };
        let outcome = self.store.directory().erase(&erasure, &[evidence]).await?;
        self.changed(who.tenant);
        match outcome {
            Erased::Done { commands, messages } => {
                Ok(ErasureReport { erased_id: erased_id.to_string(), commands, messages })
            }
            Erased::Stale => Err(DirectoryError::Stale { expected: stored.version, current: stored.version + 1 }),
            Erased::ProofUsed => Err(DirectoryError::ProofUsed),
        }
    }
}
