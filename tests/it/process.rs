//! The real binary as a process: the shipped configuration in a folder of its own, changed as a
//! test needs, the gateway listening on a port of its own choosing (it says which in its log: a
//! port picked here and handed over could be taken meanwhile by another test's server).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::StatusCode;

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

/// A running `chatgate serve`; killed when dropped.
pub struct Gateway {
    pub child: Child,
    pub base: String,
}

impl Gateway {
    /// Starts `chatgate serve` with `config` and `env`, and waits until `/readyz` answers 200.
    pub async fn start(config: &Path, env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_chatgate"));
        command.arg("--config").arg(config).arg("serve").env("CHATGATE_LISTEN", "127.0.0.1:0").env("NO_COLOR", "1");
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("the gateway starts");
        let log = std::io::BufReader::new(child.stderr.take().expect("its log"));
        let (said, address) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufRead::lines(log).map_while(Result::ok) {
                if let Some(at) = line.split("chatgate listening addr=").nth(1) {
                    let _ = said.send(at.split_whitespace().next().unwrap_or_default().to_owned());
                }
            }
        });
        let address = address.recv_timeout(Duration::from_secs(20)).expect("the gateway says where it listens");
        let gateway = Self { child, base: format!("http://{address}") };
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !client.get(gateway.url("/readyz")).send().await.is_ok_and(|r| r.status() == StatusCode::OK) {
            assert!(Instant::now() < deadline, "the gateway did not become ready");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        gateway
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// SIGKILL, and reaped.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, and waits for the process to end.
    pub fn terminate(&mut self) {
        // SAFETY: signalling a child process this test started and has not reaped.
        let _ = unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.kill();
    }
}
