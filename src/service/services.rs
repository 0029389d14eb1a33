//! The service layer assembled once from the settings: what the HTTP edge, the workers and the
//! command line share.

use std::sync::Arc;

use crate::config::Config;
use crate::domain::evidence::Pseudonymizer;
use crate::service::Settings;
use crate::service::engine::Engine;
use crate::service::intake::{Ingress, StoredMessages};
use crate::service::replies::Templates;
use crate::service::security::Policy;
use crate::store::Store;

#[derive(Clone)]
pub struct Services {
    pub config: Arc<Config>,
    pub store: Store,
    pub engine: Engine,
    pub ingress: Ingress,
    pub templates: Arc<Templates>,
    pub policy: Policy,
}

impl Services {
    /// `stored` reads each channel's stored messages again (the channels layer provides it).
    pub fn new(settings: Settings, store: Store, stored: Arc<dyn StoredMessages>) -> Self {
        let Settings { config, registry, directory, templates, security } = settings;
        let pseudonymizer = Pseudonymizer::new(config.evidence.pseudonym_key.expose().as_bytes());
        let engine = Engine::new(store.clone(), pseudonymizer);
        if crate::service::telemetry::enabled() {
            store.observe_moves(Arc::new(crate::service::telemetry::TransitionSpans));
        }
        let agents = Arc::new(config.executors.keys().cloned().collect());
        let policy = Policy { registry: Arc::new(registry), directory: Arc::new(directory), security, agents };
        let ingress = Ingress::new(engine.clone(), policy.clone(), stored);
        Self { config: Arc::new(config), store, engine, ingress, templates: Arc::new(templates), policy }
    }
}
