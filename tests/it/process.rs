//! The real binary as a process: the shipped configuration in a folder of its own, changed as a
//! test needs, and the gateway started as the conformance runner starts it (on a port of its own
//! choosing, which it says in its log: a port picked here and handed over could be taken meanwhile
//! by another test's server).

use std::path::{Path, PathBuf};

pub use chatgate::cli::conformance::gateway::Gateway;

/// The shipped `config/` copied into a temporary folder, `chatgate.toml` changed by `edit`.
pub struct ConfigDir {
    pub dir: tempfile::TempDir,
}

impl ConfigDir {
    pub fn shipped(edit: impl FnOnce(String) -> String) -> Self {
        let dir = tempfile::tempdir().expect("folder");
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
        for file in ["commands.toml", "directory.toml"] {
            std::fs::copy(shipped.join(file), dir.path().join(file)).expect("copy");
        }
        let config = std::fs::read_to_string(shipped.join("chatgate.toml")).expect("shipped config");
        let templates = format!("templates = \"{}/templates\"", env!("CARGO_MANIFEST_DIR"));
        let config = edit(config.replace("templates = \"../templates\"", &templates));
        std::fs::write(dir.path().join("chatgate.toml"), config).expect("config");
        Self { dir }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().join("chatgate.toml")
    }
}

/// `chatgate serve` (this build's binary) with `config` and `env`, ready; killed when dropped.
pub async fn start(config: &Path, env: &[(&str, &str)]) -> Gateway {
    let env: Vec<(String, String)> = env.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect();
    let bin = Path::new(env!("CARGO_BIN_EXE_chatgate"));
    let log = std::env::var_os("CHATGATE_TEST_GATEWAY_LOG").map(PathBuf::from);
    Gateway::start(bin, config, &env, log).await.unwrap_or_else(|e| panic!("the gateway: {e}"))
}
