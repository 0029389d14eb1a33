//! Previews (issue #47): the prompt a preview's answer sends, written with the move that asks for
//! the confirmation — the confirmation bound to the command's key and actor, and the preview it
//! shows (one row per command, replaced when a command is previewed again) — and the previews of
//! the commands a dispatch hands over, so that each execution carries the preview confirmed.

use std::collections::HashMap;

use sqlx::AnyConnection;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::command::{ActorId, IdempotencyKey, TenantId};
use crate::domain::preview::{BoundPreview, Preview};
use crate::store::confirmations::{NewConfirmation, confirmation_row, insert_confirmation};
use crate::store::keyed::KeyLookup;
use crate::store::named::{self, row};
use crate::store::rows::{json, text, to_ms, uuid};
use crate::store::{Store, StoreError};

/// A confirmation a step opens (a command asked to confirm after its preview), with the preview
/// its prompt shows, if one came.
#[derive(Debug, Clone)]
pub struct PromptWrite {
    pub confirmation: NewConfirmation,
    pub key: IdempotencyKey,
    pub actor: ActorId,
    pub preview: Option<BoundPreview>,
}

/// Writes `prompt` for `command_id` inside the step's transaction.
pub(crate) async fn write_prompt(
    conn: &mut AnyConnection,
    (tenant, command_id): (&TenantId, Uuid),
    prompt: &PromptWrite,
    at: OffsetDateTime,
) -> Result<(), StoreError> {
    let row = confirmation_row(&prompt.confirmation, tenant, command_id, &prompt.key, &prompt.actor, at);
    insert_confirmation(conn, row).await?;
    let Some(bound) = &prompt.preview else { return Ok(()) };
    let preview = serde_json::to_string(&bound.preview).map_err(|e| StoreError::Config(e.to_string()))?;
    let row = row![
        "command_id" => command_id.to_string(),
        "tenant_id" => tenant.as_str(),
        "digest" => bound.digest.as_str(),
        "preview" => preview,
        "taken_at" => to_ms(at),
    ];
    let tail = "ON CONFLICT (command_id) DO UPDATE SET digest = excluded.digest, preview = excluded.preview, \
                taken_at = excluded.taken_at";
    named::insert(conn, "command_previews", vec![row], tail).await?;
    Ok(())
}

/// The preview each command was confirmed on, by the commands' ids (the table's key).
pub(crate) const PREVIEWS_OF_COMMANDS: KeyLookup =
    KeyLookup { select: "SELECT command_id, digest, preview FROM command_previews", column: "command_id" };

impl Store {
    /// The previews the commands `ids` were confirmed on, by command (those without one are left out).
    pub async fn previews_of(&self, ids: &[Uuid]) -> Result<HashMap<Uuid, BoundPreview>, StoreError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let mut conn = self.pool().acquire().await?;
        let ids: Vec<String> = ids.iter().map(Uuid::to_string).collect();
        let rows = PREVIEWS_OF_COMMANDS.fetch(&mut conn, &ids).await?;
        let mut previews = HashMap::with_capacity(rows.len());
        for row in &rows {
            let preview: Preview = json(row, "preview")?;
            previews.insert(uuid(row, "command_id")?, BoundPreview { digest: text(row, "digest")?, preview });
        }
        Ok(previews)
    }
}
