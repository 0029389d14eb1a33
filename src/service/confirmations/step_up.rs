//! The step-up link a risky command's confirmation sends: the nonce it carries is kept in the
//! evidence of the move that asked for the proof, and the step-up page (`/step-up/{id}`) serves a
//! link only while its command waits for that proof and the nonce is the one sent.

use serde_json::Value;
use uuid::Uuid;

use crate::domain::lifecycle::State;
use crate::service::database::StoreError;
use crate::service::reads::{Reads, StoredCommand};

/// Where the move's decision keeps the nonce.
const NONCE: &str = "step_up_nonce";

/// `decision` with the link's `nonce` in it.
pub(super) fn with_nonce(mut decision: Value, nonce: &str) -> Value {
    decision[NONCE] = nonce.into();
    decision
}

/// The command `id` names, while it waits for a step-up and `nonce` is the one its link carried.
pub async fn waiting_for(reads: Reads<'_>, id: Uuid, nonce: &str) -> Result<Option<StoredCommand>, StoreError> {
    let Some(command) = reads.command_of_any_tenant(id).await? else { return Ok(None) };
    // Proved already, it may still wait in `authz_pending`, for other people's approval.
    let for_proof = command.reason_code.as_deref() == Some(crate::service::security::authz::STEP_UP_REQUIRED);
    if command.lifecycle.state != State::AuthzPending || !for_proof || nonce.is_empty() {
        return Ok(None);
    }
    let evidence = reads.evidence_of(&command.envelope.tenant_id, id).await?;
    let sent = evidence.iter().any(|artifact| artifact.body["decision"][NONCE].as_str() == Some(nonce));
    Ok(sent.then_some(command))
}
