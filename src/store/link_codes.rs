//! Link codes (issue #48): a listed person's one-time codes for linking another channel to their
//! directory entry, by the codes' keyed hashes (the codes themselves are never stored). A code is
//! taken by one conditional update, so that of two senders racing with one code exactly one
//! links; the same address sending the same code again (a provider's redelivery) is told it
//! linked, not refused. States facts only: what a redemption means is the service's.

use time::OffsetDateTime;

use crate::domain::command::TenantId;
use crate::store::named::{self, row};
use crate::store::retention_pace::{Door, Pace};
use crate::store::rows::{opt_int, opt_text, text, to_ms};
use crate::store::tidy::Done;
use crate::store::{LinkCodes, StoreError};

/// A code as issued: whose, until when, kept until when.
#[derive(Debug, Clone)]
pub struct NewLinkCode<'a> {
    pub tenant: &'a TenantId,
    pub person: &'a str,
    pub code_hash: &'a str,
    pub issued_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
}

/// A code offered from an address: which, by whom, and until when its link may be undone.
#[derive(Debug, Clone)]
pub struct Redemption<'a> {
    pub tenant: &'a TenantId,
    pub code_hash: &'a str,
    /// The address's kind and value, as the directory keeps them.
    pub by: (&'a str, &'a str),
    pub at: OffsetDateTime,
    pub undo_until: OffsetDateTime,
}

/// What a code offered came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redeemed {
    /// Taken now, for this person.
    Fresh { person: String },
    /// This address took it before (a redelivery), and its link stands.
    Again { person: String },
    /// No such code in the tenant, or expired, or used by another address, or its link undone.
    Refused,
}

/// A link that may still be undone: the code's hash and the address it linked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndoableLink {
    pub code_hash: String,
    pub kind: String,
    pub address: String,
}

/// What is past keeping, before `$1` (the clean-up's sweep, by `link_codes_keep`).
/// The codes past keeping at `$1`.
pub(crate) const KEPT_PAST: Done =
    Done { table: "link_codes", key: "code_hash", select: "SELECT code_hash FROM link_codes WHERE keep_until <= $1" };
/// Takes an unused code in time (`$1` tenant, `$2` hash, `$3` now, `$4` kind, `$5` address, `$6` keep).
const TAKE: &str = "UPDATE link_codes SET used_at = $3, used_kind = $4, used_by = $5, keep_until = $6
                    WHERE tenant_id = $1 AND code_hash = $2 AND used_at IS NULL AND expires_at > $3
                    RETURNING person_id";

impl LinkCodes<'_> {
    /// Keeps a new code; a person's pending codes beyond `most_pending` (the oldest first) stop
    /// counting, so that no more than that many of theirs can be guessed at once.
    pub async fn issue(self, code: &NewLinkCode<'_>, most_pending: usize) -> Result<(), StoreError> {
        let mut tx = self.store.begin().await?;
        let pending = sqlx::query(
            "SELECT code_hash FROM link_codes WHERE tenant_id = $1 AND person_id = $2 AND used_at IS NULL
               AND expires_at > $3 ORDER BY issued_at DESC, code_hash",
        )
        .bind(code.tenant.as_str())
        .bind(code.person)
        .bind(to_ms(code.issued_at))
        .fetch_all(&mut *tx)
        .await?;
        for stale in pending.iter().skip(most_pending.saturating_sub(1)) {
            sqlx::query("DELETE FROM link_codes WHERE code_hash = $1")
                .bind(text(stale, "code_hash")?)
                .execute(&mut *tx)
                .await?;
        }
        let row = row![
            "code_hash" => code.code_hash,
            "tenant_id" => code.tenant.as_str(),
            "person_id" => code.person,
            "issued_at" => to_ms(code.issued_at),
            "expires_at" => to_ms(code.expires_at),
            "keep_until" => to_ms(code.expires_at),
        ];
        named::insert(&mut tx, "link_codes", vec![row], "").await?;
        tx.commit().await?;
        Ok(())
    }

    /// Takes the code `redemption` offers, if it is the tenant's, unused and in time.
    pub async fn redeem(self, redemption: &Redemption<'_>) -> Result<Redeemed, StoreError> {
        let (kind, address) = redemption.by;
        let mut tx = self.store.begin().await?;
        let taken = sqlx::query(TAKE)
            .bind(redemption.tenant.as_str())
            .bind(redemption.code_hash)
            .bind(to_ms(redemption.at))
            .bind(kind)
            .bind(address)
            .bind(to_ms(redemption.undo_until))
            .fetch_optional(&mut *tx)
            .await?;
        let redeemed = match taken {
            Some(row) => Redeemed::Fresh { person: text(&row, "person_id")? },
            None => {
                let before = sqlx::query(
                    "SELECT person_id, used_by, undone_at FROM link_codes WHERE tenant_id = $1 AND code_hash = $2",
                )
                .bind(redemption.tenant.as_str())
                .bind(redemption.code_hash)
                .fetch_optional(&mut *tx)
                .await?;
                match before {
                    Some(row)
                        if opt_text(&row, "used_by")?.as_deref() == Some(address)
                            && opt_int(&row, "undone_at")?.is_none() =>
                    {
                        Redeemed::Again { person: text(&row, "person_id")? }
                    }
                    _ => Redeemed::Refused,
                }
            }
        };
        tx.commit().await?;
        Ok(redeemed)
    }

    /// The person's latest link that may still be undone at `now` (used, not undone, kept).
    pub async fn undoable(
        self,
        tenant: &TenantId,
        person: &str,
        now: OffsetDateTime,
    ) -> Result<Option<UndoableLink>, StoreError> {
        let row = sqlx::query(
            "SELECT code_hash, used_kind, used_by FROM link_codes WHERE tenant_id = $1 AND person_id = $2
               AND used_by IS NOT NULL AND undone_at IS NULL AND keep_until > $3
             ORDER BY used_at DESC LIMIT 1",
        )
        .bind(tenant.as_str())
        .bind(person)
        .bind(to_ms(now))
        .fetch_optional(self.store.pool())
        .await?;
        let Some(row) = row else { return Ok(None) };
        let kind = opt_text(&row, "used_kind")?.unwrap_or_default();
        let address = opt_text(&row, "used_by")?.unwrap_or_default();
        Ok(Some(UndoableLink { code_hash: text(&row, "code_hash")?, kind, address }))
    }

    /// Marks a link undone; `false` when it was undone already.
    pub async fn undo(self, tenant: &TenantId, code_hash: &str, now: OffsetDateTime) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE link_codes SET undone_at = $3 WHERE tenant_id = $1 AND code_hash = $2 AND undone_at IS NULL",
        )
        .bind(tenant.as_str())
        .bind(code_hash)
        .bind(to_ms(now))
        .execute(self.store.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Forgets what is past keeping at `now`, at `pace`; how many rows.
    pub async fn forget_kept(self, now: OffsetDateTime, pace: &mut Pace) -> Result<u64, StoreError> {
        self.store.delete_done(&KEPT_PAST, to_ms(now), Door::Main, pace).await
    }
}
