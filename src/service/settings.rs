//! Everything the gateway reads at start-up: the configuration, the command registry and the
//! directory, loaded and cross-checked together (`check-config` and `serve` use the same code).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::config::{
    Config, ConfigError, ConfigSource, DEFAULT_CONFIG_PATH, SHIPPED_COMMANDS, SHIPPED_DIRECTORY, parse_toml,
};
use crate::domain::directory::{DirectoryFile, Seed, Tenants};
use crate::domain::registry::Registry;
use crate::service::replies::Templates;
use crate::service::security::Security;

#[derive(Debug, Clone)]
pub struct Settings {
    pub config: Config,
    /// Where the registry, the directory and the templates were read from, to read them again on
    /// reload; none when they were given as text (tests, embedding).
    pub files: Option<Files>,
    pub registry: Registry,
    /// The tenants (their numbers, their policies) and what the file seeds their directories with.
    pub tenants: Tenants,
    pub seed: Seed,
    pub templates: Templates,
    /// Token issuers' keys and the rate limiters, built from `config`.
    pub security: Arc<Security>,
}

/// The folder the registry, the directory and the templates are read from (the configuration
/// file's), and whether the shipped ones stand in for missing files (the demo from an empty folder).
#[derive(Debug, Clone)]
pub struct Files {
    pub folder: PathBuf,
    pub shipped_fallback: bool,
}

/// What the files give, read and checked together: at start, and again on reload.
#[derive(Debug, Clone)]
pub struct FileSettings {
    pub registry: Registry,
    pub tenants: Tenants,
    pub seed: Seed,
    pub templates: Templates,
}

impl Files {
    /// The files `config` names, in this folder (missing ones are an error).
    pub fn at(folder: impl Into<PathBuf>) -> Self {
        Self { folder: folder.into(), shipped_fallback: false }
    }

    /// Reads and checks the registry, the directory and the templates `config` names.
    pub fn read(&self, config: &Config, env: &dyn Fn(&str) -> Option<String>) -> Result<FileSettings, ConfigError> {
        let read = |relative: &Path, shipped: &'static str| -> Result<(PathBuf, String), ConfigError> {
            let path = self.folder.join(relative);
            match std::fs::read_to_string(&path) {
                Ok(text) => Ok((path, text)),
                Err(e) if self.shipped_fallback && e.kind() == std::io::ErrorKind::NotFound => {
                    Ok((path, shipped.to_owned()))
                }
                Err(error) => Err(ConfigError::Read { path, error }),
            }
        };
        let (commands_path, commands) = read(&config.registry.commands, SHIPPED_COMMANDS)?;
        let (directory_path, directory) = read(&config.registry.directory, SHIPPED_DIRECTORY)?;
        let templates = Templates::load(&self.folder.join(&config.registry.templates), self.shipped_fallback)
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        let files = [(commands_path.as_path(), commands.as_str()), (directory_path.as_path(), directory.as_str())];
        FileSettings::check(config, files, templates, env)
    }
}

impl FileSettings {
    fn check(
        config: &Config,
        [(commands_path, commands), (directory_path, directory)]: [(&Path, &str); 2],
        templates: Templates,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        // Every template renders against its sample data, or nothing starts (or reloads).
        templates.check().map_err(|problems| ConfigError::Invalid(format!("templates: {}", problems.join("; "))))?;
        let executors: BTreeSet<String> = config.executors.keys().cloned().collect();
        let registry = Registry::parse(commands_path, commands, &executors, config.idempotency.default_window())
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        let file: DirectoryFile = parse_toml(directory_path, directory, env)?;
        let (tenants, seed) =
            file.build(directory).map_err(|e| ConfigError::Invalid(format!("{}: {e}", directory_path.display())))?;
        approvers_are_roles(&registry, &seed)
            .map_err(|e| ConfigError::Invalid(format!("{}: {e}", commands_path.display())))?;
        retention_outlasts_windows(config, &registry, &tenants).map_err(ConfigError::Invalid)?;
        Ok(Self { registry, tenants, seed, templates })
    }
}

/// Every role an approval policy names is a role of some tenant the directory file seeds.
fn approvers_are_roles(registry: &Registry, seed: &Seed) -> Result<(), String> {
    let known: BTreeSet<&str> =
        seed.tenants.values().flat_map(|(roles, _)| roles.0.keys().map(String::as_str)).collect();
    for spec in registry.commands() {
        let named = crate::domain::registry::approvals::read::roles_named(&spec.approvals);
        if let Some(unknown) = named.into_iter().find(|role| !known.contains(role)) {
            return Err(format!("command `{}`: approvals name the role `{unknown}`, which no tenant has", spec.name));
        }
    }
    Ok(())
}

/// Texts and records are kept at least as long as anything may still read them: the dedupe
/// windows (a duplicate is answered from its command) and the times a command may wait for its
/// confirmation or its start; and records at least as long as texts (a text goes with its row).
/// The same for each tenant's own retention in the directory.
fn retention_outlasts_windows(config: &Config, registry: &Registry, tenants: &Tenants) -> Result<(), String> {
    let mut windows = vec![("idempotency.default_window_secs".to_owned(), config.idempotency.default_window())];
    for spec in registry.commands() {
        let declared =
            [("dedupe_window", spec.dedupe_window), ("confirmation_ttl", spec.confirmation_ttl), ("ttl", spec.ttl)];
        windows.extend(declared.map(|(name, window)| (format!("command `{}`'s {name}", spec.name), window)));
    }
    let default = &config.retention;
    let mut kept = vec![("retention".to_owned(), default.texts, default.records)];
    kept.extend(tenants.tenants().map(|tenant| {
        let own = tenant.retention;
        let (texts, records) = (own.texts.unwrap_or(default.texts), own.records.unwrap_or(default.records));
        (format!("tenants.{}.retention", tenant.id), texts, records)
    }));
    for (at, texts, records) in kept {
        let texts = (format!("{at}.texts"), texts);
        at_least(&texts, &windows)?;
        windows.push(texts);
        at_least(&(format!("{at}.records"), records), &windows)?;
        windows.pop();
    }
    Ok(())
}

/// `part` kept at least as long as each of `bounds`, or the first it falls short of, named.
fn at_least((part, kept): &(String, Duration), bounds: &[(String, Duration)]) -> Result<(), String> {
    match bounds.iter().find(|(_, bound)| kept < bound) {
        None => Ok(()),
        Some((what, bound)) => {
            let (kept, bound) = (crate::config::in_days(*kept), crate::config::in_days(*bound));
            Err(format!("{part} ({kept}) is shorter than {what} ({bound}); keep it at least that long"))
        }
    }
}

impl Settings {
    pub fn load(source: &ConfigSource, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let config = Config::load(source, env)?;
        let files = match source {
            ConfigSource::Explicit(path) => Files::at(path.parent().map(Path::to_path_buf).unwrap_or_default()),
            ConfigSource::Default => Files {
                folder: PathBuf::from(DEFAULT_CONFIG_PATH).parent().map(Path::to_path_buf).unwrap_or_default(),
                shipped_fallback: true,
            },
        };
        Self::from_files(config, files, env)
    }

    /// The given configuration with the registry, the directory and the templates read from
    /// `files` (and read again from there on reload).
    pub fn from_files(config: Config, files: Files, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let read = files.read(&config, env)?;
        Self::assemble(config, Some(files), read)
    }

    /// The given configuration with the shipped registry and directory (tests, embedding).
    pub fn with_shipped_registry(config: Config) -> Result<Self, ConfigError> {
        Self::with_registry(config, SHIPPED_COMMANDS)
    }

    /// The given configuration and command registry, with the shipped directory (tests).
    pub fn with_registry(config: Config, commands: &str) -> Result<Self, ConfigError> {
        Self::with_files(config, commands, SHIPPED_DIRECTORY)
    }

    /// The given configuration, command registry and directory, with the shipped templates
    /// (tests, embedding).
    pub fn with_files(config: Config, commands: &str, directory: &str) -> Result<Self, ConfigError> {
        let env = |name: &str| std::env::var(name).ok();
        let templates = Templates::shipped().map_err(|e| ConfigError::Invalid(e.to_string()))?;
        let files = [(Path::new("config/commands.toml"), commands), (Path::new("config/directory.toml"), directory)];
        let read = FileSettings::check(&config, files, templates, &env)?;
        Self::assemble(config, None, read)
    }

    fn assemble(config: Config, files: Option<Files>, read: FileSettings) -> Result<Self, ConfigError> {
        let folder = files.as_ref().map(|f| f.folder.clone()).unwrap_or_else(|| PathBuf::from("."));
        let FileSettings { registry, tenants, seed, templates } = read;
        let served = tenants.tenants().map(|t| t.id.clone()).collect();
        let security = Security::load(&config, &folder, served).map_err(ConfigError::Invalid)?;
        Ok(Self { config, files, registry, tenants, seed, templates, security: Arc::new(security) })
    }

    /// One line each about the registry and the directory, for `check-config`.
    pub fn summary(&self) -> String {
        let tenants: Vec<String> = self.tenants.tenants().map(|t| t.id.to_string()).collect();
        let locales: Vec<String> = self.templates.locales().map(|(c, l)| format!("{c}/{l}")).collect();
        format!(
            "registry: {} commands ({}); directory: tenants {}; templates: {}",
            self.registry.commands().len(),
            self.registry.commands().iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", "),
            tenants.join(", "),
            locales.join(", ")
        )
    }
}
