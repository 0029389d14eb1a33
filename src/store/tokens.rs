//! Single-use tokens (step-up proofs, by issuer and `jti`): used once, in the transaction of what
//! they prove (a command's move, an approver's decision, an override), and forgotten once they
//! expired.

use time::OffsetDateTime;
use uuid::Uuid;

use crate::store::retention_pace::{Door, Pace};
use crate::store::rows::to_ms;
use crate::store::tidy::Done;
use crate::store::{StoreError, Tokens};

/// A token used once, by its issuer and `jti`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumedToken {
    pub issuer: String,
    pub jti: String,
    pub expires_at: OffsetDateTime,
}

/// Records a token's use; `false` when it was used before.
pub(crate) async fn consume_token(
    conn: &mut sqlx::AnyConnection,
    token: &ConsumedToken,
    command_id: Option<Uuid>,
    at: OffsetDateTime,
) -> Result<bool, StoreError> {
    let inserted = sqlx::query(
        "INSERT INTO consumed_tokens (issuer, jti, command_id, consumed_at, expires_at) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (issuer, jti) DO NOTHING",
    )
    .bind(token.issuer.as_str())
    .bind(token.jti.as_str())
    .bind(command_id.map(|id| id.to_string()).unwrap_or_default())
    .bind(to_ms(at))
    .bind(to_ms(token.expires_at))
    .execute(&mut *conn)
    .await?;
    Ok(inserted.rows_affected() == 1)
}

/// Used tokens that expired by `$1`.
const USED: Done = Done {
    table: "consumed_tokens",
    key: "(issuer, jti)",
    select: "SELECT issuer, jti FROM consumed_tokens WHERE expires_at <= $1",
};

impl Tokens<'_> {
    /// Forgets used tokens that expired before `before` (they are refused as expired anyway), at
    /// `pace`.
    pub async fn purge_consumed(self, before: OffsetDateTime, pace: &mut Pace) -> Result<u64, StoreError> {
        self.store.delete_done(&USED, to_ms(before), Door::Main, pace).await
    }

    /// Uses a single-use token up on its own; `false` when it was used before.
    pub async fn consume(
        self,
        token: &ConsumedToken,
        command_id: Uuid,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut tx = self.store.begin().await?;
        let fresh = consume_token(&mut tx, token, Some(command_id), at).await?;
        tx.commit().await?;
        Ok(fresh)
    }

    /// Whether a single-use token was used already.
    pub async fn used(self, issuer: &str, jti: &str) -> Result<bool, StoreError> {
        let row = sqlx::query("SELECT jti FROM consumed_tokens WHERE issuer = $1 AND jti = $2")
            .bind(issuer)
            .bind(jti)
            .fetch_optional(self.store.pool())
            .await?;
        Ok(row.is_some())
    }
}
