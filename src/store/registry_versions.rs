//! Every command registry the gateway has run, by version: written on start and on reload, read
//! when a command admitted under an earlier version is decided (on any instance).

use time::OffsetDateTime;

use crate::store::rows::{text, to_ms};
use crate::store::{RegistryVersions, StoreError};

impl RegistryVersions<'_> {
    /// Records a registry's text under its version (once: a version names one text).
    pub async fn record(self, version: &str, text: &str, at: OffsetDateTime) -> Result<(), StoreError> {
        let mut tx = self.store.begin().await?;
        sqlx::query(
            "INSERT INTO registry_versions (version, text, recorded_at) VALUES ($1, $2, $3)
             ON CONFLICT (version) DO NOTHING",
        )
        .bind(version)
        .bind(text)
        .bind(to_ms(at))
        .execute(&mut *tx)
        .await?;
        tx.commit().await
    }

    /// The text of a registry version, if it was recorded.
    pub async fn text(self, version: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT text FROM registry_versions WHERE version = $1")
            .bind(version)
            .fetch_optional(&mut *self.store.reader().await?)
            .await?;
        row.map(|row| text(&row, "text")).transpose()
    }
}
