//! A conformance scenario as its file says it (`conformance/*.json`, described by
//! `conformance/scenario.schema.json`): the configuration it needs, then steps, each one thing
//! done to the gateway from outside and what must follow.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(rename = "$schema", default)]
    pub schema: Option<String>,
    /// What the scenario shows, in a sentence.
    pub summary: String,
    /// The seed requirements it demonstrates (`SMCL XI.1`, `IDS XIII.4`, `CMB ACK.duplicate`, ...).
    pub covers: Vec<String>,
    /// Keys of `chatgate.toml` to set, dotted (`confirmations.sweep_interval_ms`).
    #[serde(default)]
    pub config: BTreeMap<String, Value>,
    /// Keys of `commands.toml` to set, dotted (`commands.refund.confirmation_ttl`).
    #[serde(default)]
    pub registry: BTreeMap<String, Value>,
    pub steps: Vec<Step>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// How failures name the step (its number otherwise).
    #[serde(default)]
    pub label: Option<String>,
    #[serde(flatten)]
    pub action: Action,
    /// The name the command this step creates goes by in later steps (`{name}` in paths).
    #[serde(default)]
    pub names: Option<String>,
    #[serde(default)]
    pub expect: Expect,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    /// A signed WhatsApp delivery of one text message (Meta's webhook), sent `times` times.
    Chat(Chat),
    /// A hook call (`/hooks/...`) with the bridge's token, sent `times` times.
    Hook(Hook),
    /// An operator's or an executor's call to the REST API with a token of `scopes`.
    Api(ApiCall),
    /// How the stand-in executor answers from now on.
    Executor(ExecutorMode),
    /// Nothing for this long (past an expiry, say).
    WaitMs(u64),
    /// The gateway is killed (SIGKILL) and started again on the same database.
    Restart(RestartKind),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Chat {
    /// `customer`, `admin` (the directory's demo people) or a WhatsApp id.
    pub from: String,
    pub text: String,
    /// The provider's message id; the same id twice is a redelivery.
    pub id: String,
    #[serde(default = "one")]
    pub times: u32,
    /// The `times` deliveries at the same moment instead of one after another.
    #[serde(default)]
    pub concurrent: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hook {
    /// Under the bridge: `/hooks/agent`.
    pub path: String,
    pub body: Value,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default = "one")]
    pub times: u32,
    #[serde(default)]
    pub concurrent: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiCall {
    pub method: String,
    /// `{name}` stands for the id of the command of that name.
    pub path: String,
    #[serde(default)]
    pub body: Option<Value>,
    /// The token's scopes (space-separated).
    pub scopes: String,
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// A step-up proof for the command of this name is minted and sent as `{"token": ...}`.
    #[serde(default)]
    pub step_up_for: Option<String>,
    /// The proof last minted for the command of this name is sent again (a replay).
    #[serde(default)]
    pub step_up_again: Option<String>,
    /// The operator proves who they are for the command of this name: a proof naming the
    /// token's subject goes in the `Step-Up` header (recovery of a high-risk command).
    #[serde(default)]
    pub operator_step_up: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutorMode {
    /// Does the work once per idempotency key and answers `succeeded`.
    Succeed,
    /// Answers `failed` (a final failure), doing nothing.
    Fail,
    /// Answers 503, doing nothing (the gateway retries).
    Unavailable,
    /// Takes the call (202) and answers nothing: the ACKs come over the API.
    Accept,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RestartKind {
    Kill,
}

/// What must hold after a step; each is waited for (up to the runner's patience) and then
/// compared.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Every answer's HTTP status.
    #[serde(default)]
    pub status: Option<u16>,
    /// Fields of the (last) answer's JSON body, by JSON pointer.
    #[serde(default)]
    pub body: BTreeMap<String, Value>,
    /// Each named command's state.
    #[serde(default)]
    pub state: BTreeMap<String, String>,
    /// The kinds of the evidence each named command gained in this step, in order, and no
    /// others (the conversation's `conversation.message.*` are counted by `replies`).
    #[serde(default)]
    pub evidence: BTreeMap<String, Vec<String>>,
    /// Messages the gateway sent through the provider stand-in in this step.
    #[serde(default)]
    pub replies: Option<u64>,
    /// Work the executor stand-in has done so far (once per idempotency key).
    #[serde(default)]
    pub executions: Option<u64>,
    /// How many commands exist so far.
    #[serde(default)]
    pub commands: Option<u64>,
}

fn one() -> u32 {
    1
}

impl Scenario {
    pub fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read it: {e}"))?;
        serde_json::from_str(&text).map_err(|e| format!("not a scenario: {e}"))
    }
}

impl Step {
    /// How a failure names this step: its number and label.
    pub fn name(&self, index: usize) -> String {
        match &self.label {
            Some(label) => format!("step {} ({label})", index + 1),
            None => format!("step {}", index + 1),
        }
    }
}
