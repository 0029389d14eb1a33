//! One scenario against one gateway: the stand-ins, the gateway process, and what the runner
//! knows of what happened (the commands the steps named, the evidence and the replies already
//! seen). It speaks to the gateway only over HTTP, as a provider, a hook caller, an operator and
//! an executor would.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use uuid::Uuid;

use crate::cli::conformance::gateway::{Gateway, Workspace};
use crate::cli::conformance::scenario::Scenario;
use crate::cli::conformance::standins::{StandInExecutor, StandInProvider};
use crate::config::ConfigSource;
use crate::service::Settings;

/// The demo directory's people, as scenarios name them.
pub const PEOPLE: &[(&str, &str)] = &[
    ("customer", "15550000001"),
    ("admin", "15550000002"),
    ("supervisor", "15550000003"),
    ("second_supervisor", "15550000004"),
];
/// The URL the gateway is told it is reached at (Twilio signs the URL it called).
pub const PUBLIC_BASE: &str = "https://gateway.conformance.test";

/// A fresh Standard Webhooks secret (`whsec_` and base64 of random bytes).
fn standard_secret() -> String {
    use base64::Engine as _;
    let bytes: [u8; 24] = rand::random();
    format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// The subject of the runner's API tokens: the operator.
pub const OPERATOR: &str = "conformance-operator";
/// The demo directory's business number.
pub const BUSINESS_NUMBER: &str = "100000000000001";

pub struct Rig {
    pub bin: PathBuf,
    pub workspace: Workspace,
    pub gateway: Option<Gateway>,
    pub executor: StandInExecutor,
    pub provider: StandInProvider,
    pub client: reqwest::Client,
    /// The gateway's settings as the runner wrote them: the secrets it signs and mints with.
    pub settings: Settings,
    /// Commands by the name a step gave them.
    pub names: BTreeMap<String, Uuid>,
    /// Per named command, the evidence already seen; and the replies already counted.
    pub evidence_seen: BTreeMap<String, usize>,
    pub replies_seen: u64,
    /// The step-up proofs minted, by command name.
    pub proofs: BTreeMap<String, String>,
    /// The approvals commands waited for, by command name (found while pending, kept after).
    pub approvals: BTreeMap<String, Uuid>,
    /// Whom each named chat command is from.
    pub actors: BTreeMap<String, String>,
}

/// A person as a scenario names them: `customer`, `admin`, `supervisor`, `second_supervisor`,
/// or their WhatsApp id.
pub fn person(name: &str) -> &str {
    PEOPLE.iter().find(|(known, _)| *known == name).map_or(name, |(_, id)| id)
}

impl Rig {
    pub async fn start(bin: &Path, database_url: Option<&str>, scenario: &Scenario) -> Result<Self, String> {
        let executor = StandInExecutor::start().await.map_err(|e| format!("the stand-in executor: {e}"))?;
        let provider = StandInProvider::start().await.map_err(|e| format!("the stand-in provider: {e}"))?;
        let secret = |what: &str| format!("conformance-{what}-{}", Uuid::new_v4().simple());
        let env = vec![
            ("CHATGATE_ORDERS_EXECUTOR_URL".to_owned(), executor.url.clone()),
            ("CHATGATE_WHATSAPP_API_BASE".to_owned(), provider.url.clone()),
            ("CHATGATE_WHATSAPP_ACCESS_TOKEN".to_owned(), secret("access")),
            ("CHATGATE_WHATSAPP_APP_SECRET".to_owned(), secret("app")),
            ("CHATGATE_API_TOKEN_SECRET".to_owned(), secret("api")),
            ("CHATGATE_STEPUP_SECRET".to_owned(), secret("stepup")),
            ("CHATGATE_HOOKS_TOKEN".to_owned(), secret("hooks")),
            ("CHATGATE_TWILIO_AUTH_TOKEN".to_owned(), secret("twilio")),
            ("CHATGATE_PUBLIC_BASE_URL".to_owned(), PUBLIC_BASE.to_owned()),
            ("CHATGATE_STANDARD_DEMO_SECRET".to_owned(), standard_secret()),
        ];
        let workspace = Workspace::create(&scenario.config, &scenario.registry, database_url, env).await?;
        let settings = {
            let lookup = |name: &str| workspace.env_var(name).or_else(|| std::env::var(name).ok());
            Settings::load(&ConfigSource::Explicit(workspace.config_path()), &lookup)
                .map_err(|e| format!("the scenario's configuration: {e}"))?
        };
        let gateway = workspace.start(bin).await?;
        Ok(Self {
            bin: bin.to_owned(),
            workspace,
            gateway: Some(gateway),
            executor,
            provider,
            client: reqwest::Client::builder().timeout(Duration::from_secs(30)).build().map_err(|e| e.to_string())?,
            settings,
            names: BTreeMap::new(),
            evidence_seen: BTreeMap::new(),
            replies_seen: 0,
            proofs: BTreeMap::new(),
            approvals: BTreeMap::new(),
            actors: BTreeMap::new(),
        })
    }

    pub fn url(&self, path: &str) -> String {
        self.gateway.as_ref().map_or_else(|| path.to_owned(), |gateway| gateway.url(path))
    }

    /// Kills the gateway (SIGKILL) and starts it again on the same database.
    pub async fn restart(&mut self) -> Result<(), String> {
        if let Some(mut gateway) = self.gateway.take() {
            gateway.kill();
        }
        self.gateway = Some(self.workspace.start(&self.bin).await?);
        Ok(())
    }

    /// An API token of `scopes` for the demo tenant, from the issuer the gateway trusts.
    pub fn token(&self, scopes: &str) -> Result<String, String> {
        self.token_as(scopes, OPERATOR)
    }

    /// The same, for the person `subject` (an approver deciding as themselves).
    pub fn token_as(&self, scopes: &str, subject: &str) -> Result<String, String> {
        let authenticator = &self.settings.security.authenticator;
        let now = time::OffsetDateTime::now_utc();
        crate::service::security::mint::api_token(authenticator, None, "demo", subject, scopes, HOUR, now)
    }

    /// The id of the approval the command named `name` waits (or waited) for.
    pub async fn approval_of(&mut self, name: &str) -> Result<Uuid, String> {
        if let Some(id) = self.approvals.get(name) {
            return Ok(*id);
        }
        let command = self.id_of(name)?.to_string();
        let token = self.token("approvals:read")?;
        let response = self.client.get(self.url("/v1/approvals")).bearer_auth(token).send().await;
        let list: Value = response.map_err(|e| e.to_string())?.json().await.map_err(|e| e.to_string())?;
        let approvals = list["approvals"].as_array().into_iter().flatten();
        let approval = approvals.into_iter().find(|a| a["command_id"] == command.as_str());
        let id = approval.and_then(|a| a["approval_id"].as_str()?.parse().ok());
        let id = id.ok_or_else(|| format!("`{name}` waits for no approval"))?;
        self.approvals.insert(name.to_owned(), id);
        Ok(id)
    }

    /// A step-up proof for the command named `name`, naming `who` (its actor by default).
    pub async fn step_up_as(&self, name: &str, who: Option<&str>) -> Result<String, String> {
        let id = self.id_of(name)?;
        let status = self.command(id).await?;
        let envelope = &status["envelope"];
        let known = self.actors.get(name).map(String::as_str);
        let (actor, key) = (who.or(known).or(envelope["actor_id"].as_str()), envelope["idempotency_key"].as_str());
        let (Some(actor), Some(key)) = (actor, key) else { return Err(format!("`{name}` has no actor or key")) };
        let now = time::OffsetDateTime::now_utc();
        self.settings.security.stepup.mint(actor, id, key, now).map_err(|e| e.to_string())
    }

    pub fn id_of(&self, name: &str) -> Result<Uuid, String> {
        self.names.get(name).copied().ok_or_else(|| format!("no command is named `{name}` yet"))
    }

    /// `GET` with a reader's token, as JSON.
    pub async fn read(&self, path: &str) -> Result<Value, String> {
        let token = self.token("commands:read")?;
        let response = self.client.get(self.url(path)).bearer_auth(token).send().await.map_err(|e| e.to_string())?;
        let status = response.status();
        let body: Value = response.json().await.map_err(|e| format!("GET {path}: {e}"))?;
        if !status.is_success() {
            return Err(format!("GET {path}: {status} {body}"));
        }
        Ok(body)
    }

    /// The messages the gateway stored and has not admitted yet (`chatgate_inbox_backlog`; none
    /// before the first webhook).
    pub async fn inbox_backlog(&self) -> Result<f64, String> {
        let response = self.client.get(self.url("/metrics")).send().await.map_err(|e| e.to_string())?;
        let text = response.text().await.map_err(|e| format!("GET /metrics: {e}"))?;
        let line = text.lines().find_map(|line| line.strip_prefix("chatgate_inbox_backlog "));
        Ok(line.and_then(|value| value.trim().parse().ok()).unwrap_or(0.0))
    }

    pub async fn command(&self, id: Uuid) -> Result<Value, String> {
        self.read(&format!("/v1/commands/{id}")).await
    }

    /// The commands as the API lists them, newest first.
    pub async fn commands(&self) -> Result<Vec<Value>, String> {
        let page = self.read("/v1/commands?limit=200").await?;
        Ok(page["commands"].as_array().cloned().unwrap_or_default())
    }

    /// The commands' ids, newest first.
    pub async fn command_ids(&self) -> Result<Vec<Uuid>, String> {
        let ids = self.commands().await?.iter().filter_map(|c| c["command_id"].as_str()?.parse().ok()).collect();
        Ok(ids)
    }

    /// The kinds of a command's evidence, oldest first, without the conversation's.
    pub async fn evidence_kinds(&self, id: Uuid) -> Result<Vec<String>, String> {
        let list = self.read(&format!("/v1/commands/{id}/evidence")).await?;
        let kinds = list["artifacts"].as_array().map(|all| {
            all.iter()
                .filter_map(|a| a["kind"].as_str())
                .filter(|kind| !kind.starts_with("conversation."))
                .map(str::to_owned)
                .collect()
        });
        Ok(kinds.unwrap_or_default())
    }

    /// Drops what the scenario made (its PostgreSQL database), or keeps it and says where.
    pub async fn finish(mut self, keep: bool) -> Option<String> {
        if let Some(mut gateway) = self.gateway.take() {
            gateway.kill();
        }
        if keep {
            return Some(self.workspace.keep());
        }
        self.workspace.remove().await;
        None
    }
}

const HOUR: Duration = Duration::from_secs(3_600);
