//! Everything the gateway reads at start-up: the configuration, the command registry and the
//! directory, loaded and cross-checked together (`check-config` and `serve` use the same code).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::{
    Config, ConfigError, ConfigSource, DEFAULT_CONFIG_PATH, SHIPPED_COMMANDS, SHIPPED_DIRECTORY, parse_toml,
};
use crate::domain::directory::Directory;
use crate::domain::directory::DirectoryFile;
use crate::domain::registry::Registry;
use crate::service::replies::Templates;
use crate::service::security::Security;

#[derive(Debug, Clone)]
pub struct Settings {
    pub config: Config,
    pub registry: Registry,
    pub directory: Directory,
    pub templates: Templates,
    /// Token issuers' keys and the rate limiters, built from `config`.
    pub security: Arc<Security>,
}

impl Settings {
    pub fn load(source: &ConfigSource, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let config = Config::load(source, env)?;
        let (folder, shipped_fallback) = match source {
            ConfigSource::Explicit(path) => (path.parent().map(Path::to_path_buf).unwrap_or_default(), false),
            ConfigSource::Default => {
                (PathBuf::from(DEFAULT_CONFIG_PATH).parent().map(Path::to_path_buf).unwrap_or_default(), true)
            }
        };
        let read = |relative: &Path, shipped: &'static str| -> Result<(PathBuf, String), ConfigError> {
            let path = folder.join(relative);
            match std::fs::read_to_string(&path) {
                Ok(text) => Ok((path, text)),
                Err(e) if shipped_fallback && e.kind() == std::io::ErrorKind::NotFound => {
                    Ok((path, shipped.to_owned()))
                }
                Err(error) => Err(ConfigError::Read { path, error }),
            }
        };
        let (commands_path, commands) = read(&config.registry.commands, SHIPPED_COMMANDS)?;
        let (directory_path, directory) = read(&config.registry.directory, SHIPPED_DIRECTORY)?;
        let templates = Templates::load(&folder.join(&config.registry.templates), shipped_fallback)
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        let files = [(commands_path.as_path(), commands.as_str()), (directory_path.as_path(), directory.as_str())];
        Self::assemble(config, files, templates, &folder, env)
    }

    /// The given configuration with the shipped registry and directory (tests, embedding).
    pub fn with_shipped_registry(config: Config) -> Result<Self, ConfigError> {
        Self::with_registry(config, SHIPPED_COMMANDS)
    }

    /// The given configuration and command registry, with the shipped directory (tests).
    pub fn with_registry(config: Config, commands: &str) -> Result<Self, ConfigError> {
        let env = |name: &str| std::env::var(name).ok();
        let templates = Templates::shipped().map_err(|e| ConfigError::Invalid(e.to_string()))?;
        let files =
            [(Path::new("config/commands.toml"), commands), (Path::new("config/directory.toml"), SHIPPED_DIRECTORY)];
        Self::assemble(config, files, templates, Path::new("."), &env)
    }

    fn assemble(
        config: Config,
        [(commands_path, commands), (directory_path, directory)]: [(&Path, &str); 2],
        templates: Templates,
        folder: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        // Every template renders against its sample data, or nothing starts.
        templates.check().map_err(|problems| ConfigError::Invalid(format!("templates: {}", problems.join("; "))))?;
        let executors: BTreeSet<String> = config.executors.keys().cloned().collect();
        let registry = Registry::parse(commands_path, commands, &executors, config.idempotency.default_window())
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        let file: DirectoryFile = parse_toml(directory_path, directory, env)?;
        let directory =
            Directory::build(file).map_err(|e| ConfigError::Invalid(format!("{}: {e}", directory_path.display())))?;
        let security = Security::load(&config, folder).map_err(ConfigError::Invalid)?;
        Ok(Self { config, registry, directory, templates, security: Arc::new(security) })
    }

    /// One line each about the registry and the directory, for `check-config`.
    pub fn summary(&self) -> String {
        let tenants: Vec<String> = self.directory.tenants().map(|t| t.id.to_string()).collect();
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
