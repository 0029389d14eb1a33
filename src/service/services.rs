//! The service layer assembled once from the settings: what the HTTP edge, the workers and the
//! command line share.

use std::sync::Arc;

use crate::config::Config;
use crate::domain::evidence::Pseudonymizer;
use crate::service::Settings;
use crate::service::database::Database;
use crate::service::directory::People;
use crate::service::engine::Engine;
use crate::service::events::EventStreams;
use crate::service::figures::Figures;
use crate::service::intake::{Ingress, StoredMessages};
use crate::service::live::Live;
use crate::service::replies::Templates;
use crate::service::security::Policy;
use crate::service::security::Registries;

#[derive(Clone)]
pub struct Services {
    pub config: Arc<Config>,
    /// The database, its repositories behind the service's façades.
    pub database: Database,
    pub engine: Engine,
    pub ingress: Ingress,
    /// The reply templates, swapped whole on reload.
    pub templates: Live<Templates>,
    pub policy: Policy,
    /// The event streams' reader, caps and news of ended sessions.
    pub streams: EventStreams,
    /// The database figures `/metrics` shows, read at most once a second.
    pub figures: Arc<Figures>,
    /// What the directory file seeds the database with, held only until `prepare` has applied
    /// it: 10,000 people are megabytes nothing else reads (a reload seeds what it read itself).
    seed: Arc<std::sync::Mutex<Option<crate::domain::directory::Seed>>>,
    /// Where the registry, the directory and the templates are read again on reload.
    pub files: Option<crate::service::settings::Files>,
}

impl Services {
    /// `stored` reads each channel's stored messages again (the channels layer provides it).
    pub fn new(settings: Settings, database: Database, stored: Arc<dyn StoredMessages>) -> Self {
        let store = database.store().clone();
        let Settings { config, files, registry, tenants, seed, templates, security } = settings;
        let pseudonymizer = Pseudonymizer::new(config.evidence.pseudonym_key.expose().as_bytes());
        let links = crate::service::directory::LinkRules::from(&config.ingest);
        let people = People::new(store.clone(), pseudonymizer.clone()).with_links(links);
        let engine = Engine::new(database.clone(), pseudonymizer);
        if crate::service::telemetry::enabled() {
            store.observe_moves(Arc::new(crate::service::telemetry::TransitionSpans));
        }
        let agents = Arc::new(config.executors.keys().cloned().collect());
        let tenants = Live::new(tenants);
        // What reading an earlier registry version again needs, as `Settings` read this one.
        let executors = config.executors.keys().cloned().collect();
        let registry = Registries::new(registry, store.clone(), executors, config.idempotency.default_window());
        let previewing = config.executors.iter().filter(|(name, e)| e.offers_previews(name)).map(|(name, _)| name);
        let previewing = Arc::new(previewing.cloned().collect());
        let policy = Policy { registry, tenants, people, security, agents, previewing };
        let readers = (stored, Arc::new(crate::service::ooc::Precheck) as Arc<dyn crate::service::intake::Precheck>);
        let inbox = crate::service::intake::inbox::Inbox::new(store.clone(), &config.ingest);
        let templates = Live::new(templates);
        let turns = crate::service::intake::Turns::from(&config.ingest);
        let ingress = Ingress::new(engine.clone(), policy.clone(), readers, (inbox, templates.clone(), turns));
        let streams = EventStreams::new(store.clone(), &config.events);
        let figures = Arc::default();
        let seed = Arc::new(std::sync::Mutex::new(Some(seed)));
        let config = Arc::new(config);
        Self { config, files, database, engine, ingress, templates, policy, streams, figures, seed }
    }
}

impl Services {
    /// What the files give the database before the first message (a reload does the same with
    /// what it read): the registry's version, so that any instance can read commands admitted
    /// under it, and the directory file's roles and people, the database winning for what was
    /// changed through the API. The people are written once: a second call has none left.
    pub async fn prepare(
        &self,
        now: time::OffsetDateTime,
    ) -> Result<crate::service::directory::SeedReport, crate::store::StoreError> {
        self.policy.registry.record(now).await?;
        let Some(seed) = self.seed_slot().take() else { return Ok(Default::default()) };
        // Not applied: a `prepare` tried again has it still.
        let report = self.policy.people.seed(&seed, now).await.inspect_err(|_| *self.seed_slot() = Some(seed))?;
        for refused in &report.refused {
            tracing::warn!(%refused, "the directory file names a person who cannot be written");
        }
        Ok(report)
    }

    /// The directory file's people not yet applied (`None` once they are).
    fn seed_slot(&self) -> std::sync::MutexGuard<'_, Option<crate::domain::directory::Seed>> {
        self.seed.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
