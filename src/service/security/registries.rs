//! The command registry as it is now, and as it was: a reload swaps the current one at once, and
//! a command admitted under an earlier version keeps that version's entry (its confirmation, its
//! step-up, its scopes, its executor), read again from the database on any instance.

use std::collections::{BTreeSet, HashMap};
use std::ops::Deref;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use time::OffsetDateTime;

use crate::domain::registry::{CommandSpec, Registry};
use crate::service::live::Live;
use crate::store::{Store, StoreError, StoredCommand};

/// How many earlier registries one process keeps parsed.
const EARLIER_KEPT: usize = 16;

#[derive(Debug, Clone)]
pub struct Registries {
    current: Live<Registry>,
    earlier: Arc<Mutex<HashMap<String, Arc<Registry>>>>,
    /// What reading an earlier version again needs: the executors and the default window.
    executors: Arc<BTreeSet<String>>,
    default_window: Duration,
    store: Store,
}

/// One command's entry, in the registry version it belongs to.
#[derive(Debug, Clone)]
pub struct Spec {
    registry: Arc<Registry>,
    at: usize,
}

impl Deref for Spec {
    type Target = CommandSpec;

    fn deref(&self) -> &CommandSpec {
        &self.registry.commands()[self.at]
    }
}

impl Spec {
    /// Entry `at` of `registry` (where a message's interpretation found it), as a handle of its own.
    pub fn at(registry: &Arc<Registry>, at: usize) -> Spec {
        Spec { registry: registry.clone(), at: at.min(registry.commands().len().saturating_sub(1)) }
    }

    /// The version of the registry the entry is in: what a command admitted by it records.
    pub fn registry_version(&self) -> &str {
        self.registry.version()
    }

    /// The entry of the command `name` in the same registry (a compensation, say).
    pub fn sibling(&self, name: &str) -> Option<Spec> {
        let at = self.registry.commands().iter().position(|c| c.name == name)?;
        Some(Spec { registry: self.registry.clone(), at })
    }
}

impl Registries {
    pub fn new(registry: Registry, store: Store, executors: BTreeSet<String>, default_window: Duration) -> Self {
        Self {
            current: Live::new(registry),
            earlier: Arc::default(),
            executors: Arc::new(executors),
            default_window,
            store,
        }
    }

    /// The registry new messages are read with.
    pub fn current(&self) -> Arc<Registry> {
        self.current.get()
    }

    /// Makes `next` the current registry; the one it replaces stays readable.
    pub fn replace(&self, next: Registry) {
        let before = self.current.set(next);
        self.keep(before);
    }

    /// Writes the current registry's text under its version, so that every instance can read the
    /// commands admitted under it after a reload.
    pub async fn record(&self, now: OffsetDateTime) -> Result<(), StoreError> {
        let current = self.current();
        self.store.registry_versions().record(current.version(), current.text(), now).await
    }

    /// The entry `command` was admitted under: in its registry version when it recorded one
    /// (read from the database if this process never had it), else in the current registry.
    pub async fn spec_of(&self, command: &StoredCommand) -> Result<Option<Spec>, StoreError> {
        let registry = self.of(command.envelope.registry_version.as_deref()).await?;
        let intent = &command.envelope.intent;
        Ok(registry.position(&intent.entity, &intent.action).map(|at| Spec { registry, at }))
    }

    /// `spec_of` without the database: the entry in its version if this process has that version
    /// at hand, else in the current registry. For what only shows a command (its name) or bounds
    /// it softly (its execution timeout).
    pub fn known_spec_of(&self, command: &StoredCommand) -> Option<Spec> {
        let version = command.envelope.registry_version.as_deref();
        let earlier = version.and_then(|v| self.earlier.lock().unwrap_or_else(PoisonError::into_inner).get(v).cloned());
        let registry = earlier.unwrap_or_else(|| self.current());
        let intent = &command.envelope.intent;
        registry.position(&intent.entity, &intent.action).map(|at| Spec { registry, at })
    }

    /// The current entry of the command `name`.
    pub fn named(&self, name: &str) -> Option<Spec> {
        let registry = self.current();
        let at = registry.commands().iter().position(|c| c.name == name)?;
        Some(Spec { registry, at })
    }

    async fn of(&self, version: Option<&str>) -> Result<Arc<Registry>, StoreError> {
        let current = self.current();
        let Some(version) = version.filter(|v| *v != current.version()) else { return Ok(current) };
        if let Some(known) = self.earlier.lock().unwrap_or_else(PoisonError::into_inner).get(version) {
            return Ok(known.clone());
        }
        let Some(text) = self.store.registry_versions().text(version).await? else {
            tracing::warn!(version, "a command's registry version is not recorded; reading it with the current one");
            return Ok(current);
        };
        let path = Path::new("registry_versions");
        match Registry::parse(path, &text, &self.executors, self.default_window) {
            Ok(registry) => {
                let registry = Arc::new(registry);
                self.keep(registry.clone());
                Ok(registry)
            }
            // An executor configured then is gone now: the command is read with the current
            // registry rather than not at all.
            Err(error) => {
                tracing::warn!(version, %error, "a recorded registry version no longer reads; using the current one");
                Ok(current)
            }
        }
    }

    fn keep(&self, registry: Arc<Registry>) {
        let mut earlier = self.earlier.lock().unwrap_or_else(PoisonError::into_inner);
        if earlier.len() >= EARLIER_KEPT {
            earlier.clear();
        }
        earlier.insert(registry.version().to_owned(), registry);
    }
}
