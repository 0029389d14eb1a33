//! Changes without a restart: the command registry, the reply templates and the directory file
//! read again (on `SIGHUP` and through the operator endpoint), checked whole, and swapped in at
//! once; a broken file is refused with its problems (each naming its line) and the running
//! configuration stays. `chatgate.toml` itself is not read again: its settings take a restart.
//! A command keeps the registry entry it was admitted under (`security::registries`).

use serde::Serialize;
use time::OffsetDateTime;
use utoipa::ToSchema;

use crate::service::directory::SeedReport;
use crate::service::services::Services;
use crate::store::StoreError;

/// What a reload put in place.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Reloaded {
    /// The registry version new commands are admitted under.
    pub registry_version: String,
    pub commands: usize,
    pub tenants: Vec<String>,
    /// The templates' channels and languages (`whatsapp/en`).
    pub templates: Vec<String>,
    /// People the directory file wrote, removed, or left to the database.
    pub people_written: usize,
    pub people_removed: usize,
    pub kept_by_database: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The gateway was given its files as text (a test, an embedding): there is nothing to read.
    #[error("this gateway's registry and directory were not read from files")]
    NotFromFiles,
    /// A file is broken: nothing was swapped.
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Services {
    /// Reads the files again and puts them in place, or refuses and keeps what runs.
    pub async fn reload(&self, now: OffsetDateTime) -> Result<Reloaded, ReloadError> {
        let files = self.files.as_ref().ok_or(ReloadError::NotFromFiles)?;
        let env = |name: &str| std::env::var(name).ok();
        let read = files.read(&self.config, &env).map_err(|e| ReloadError::Invalid(e.to_string()))?;
        let served = read.tenants.tenants().map(|t| t.id.clone()).collect();
        let tenants: Vec<String> = read.tenants.tenants().map(|t| t.id.to_string()).collect();
        let templates = read.templates.locales().map(|(c, l)| format!("{c}/{l}")).collect();
        let (registry_version, commands) = (read.registry.version().to_owned(), read.registry.commands().len());
        // What the database must have first: the new registry's text (so that any instance can
        // read what is admitted under it) and the file's people. Until both are written nothing
        // is swapped; doing it again is harmless.
        self.database.store().registry_versions().record(&registry_version, read.registry.text(), now).await?;
        let SeedReport { people_written, people_removed, kept_by_database, .. } =
            self.policy.people.seed(&read.seed, now).await?;
        self.policy.registry.replace(read.registry);
        self.templates.set(read.templates);
        self.policy.tenants.set(read.tenants);
        self.policy.security.authenticator.serve(served);
        tracing::info!(%registry_version, commands, "reloaded the registry, the templates and the directory");
        Ok(Reloaded {
            registry_version,
            commands,
            tenants,
            templates,
            people_written,
            people_removed,
            kept_by_database,
        })
    }
}
