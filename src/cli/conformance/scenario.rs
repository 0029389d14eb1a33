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
    /// The clause of the source documents it checks, named and numbered (`IDS §XIII.5: ...`).
    pub clause: String,
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

/// One thing done, and what must follow. Read by hand (serde's `flatten` would let a misspelt
/// key pass unnoticed): besides `label`, `names`, `times`, `concurrent` and `expect`, a step has
/// exactly one action key.
#[derive(Debug)]
pub struct Step {
    /// How failures name the step (its number otherwise).
    pub label: Option<String>,
    pub action: Action,
    /// The name the command this step creates goes by in later steps (`{name}` in paths): the one
    /// its chat message started, or the one its answer names (`command_id`), else the newest no
    /// step has named yet.
    pub names: Option<String>,
    /// How a delivery is sent: how many times, one after another or all at once.
    pub repeat: Repeat,
    pub expect: Expect,
}

#[derive(Debug, Clone, Copy)]
pub struct Repeat {
    pub times: u32,
    pub concurrent: bool,
}

impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let mut fields = serde_json::Map::<String, Value>::deserialize(deserializer)?;
        let mut take = |key: &str| fields.remove(key).unwrap_or(Value::Null);
        let (label, names, times, concurrent, expect) =
            (take("label"), take("names"), take("times"), take("concurrent"), take("expect"));
        // A key that is not there reads as `null`, which every one of these takes as "not given".
        fn field<T: serde::de::DeserializeOwned, E: serde::de::Error>(what: &str, value: Value) -> Result<T, E> {
            serde_json::from_value(value).map_err(|e| E::custom(format!("`{what}`: {e}")))
        }
        let times: Option<u32> = field::<_, D::Error>("times", times)?;
        let concurrent: Option<bool> = field::<_, D::Error>("concurrent", concurrent)?;
        let expect: Option<Expect> = field::<_, D::Error>("expect", expect)?;
        if fields.len() != 1 {
            let found: Vec<&String> = fields.keys().collect();
            return Err(D::Error::custom(format!("a step does exactly one of {ACTIONS}; it has {found:?}")));
        }
        Ok(Self {
            label: field::<_, D::Error>("label", label)?,
            action: serde_json::from_value(Value::Object(fields)).map_err(D::Error::custom)?,
            names: field::<_, D::Error>("names", names)?,
            repeat: Repeat { times: times.unwrap_or(1).max(1), concurrent: concurrent.unwrap_or(false) },
            expect: expect.unwrap_or_default(),
        })
    }
}

/// The action keys, as an error names them.
const ACTIONS: &str = "chat, twilio, standard, hook, api, executor, wait_ms, restart";

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    /// A signed WhatsApp delivery of one text message (Meta's webhook).
    Chat(Chat),
    /// A hook call (`/hooks/...`) with the bridge's token.
    Hook(Hook),
    /// A Twilio Messaging webhook (a WhatsApp message through Twilio), signed as Twilio signs.
    Twilio(Chat),
    /// A Standard Webhooks delivery from a configured source, signed with its secret.
    Standard(Standard),
    /// An operator's or an executor's call to the REST API with a token of `scopes`.
    Api(ApiCall),
    /// How the stand-in executor answers from now on.
    Executor(ExecutorMode),
    /// Nothing for this long (past an expiry, say).
    WaitMs(u64),
    /// The gateway is killed (SIGKILL) and started again on the same database.
    Restart(RestartKind),
}

impl Action {
    /// The provider's message id a chat step sends (the command it starts carries it).
    pub fn message_id(&self) -> Option<&str> {
        match self {
            Self::Chat(chat) | Self::Twilio(chat) => Some(&chat.id),
            _ => None,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Chat {
    /// `customer`, `admin` (the directory's demo people) or a WhatsApp id.
    pub from: String,
    pub text: String,
    /// The provider's message id; the same id twice is a redelivery.
    pub id: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hook {
    /// Under the bridge: `/hooks/agent`.
    pub path: String,
    pub body: Value,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Standard {
    /// The source's name (`demo` in the shipped configuration): `/webhooks/standard/{source}`.
    pub source: String,
    /// The `webhook-id`: the same id again is the sender's retry.
    pub id: String,
    pub body: Value,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiCall {
    pub method: String,
    /// `{name}` stands for the id of the command of that name, `{approval:name}` for the id of
    /// the approval it waits for.
    pub path: String,
    #[serde(default)]
    pub body: Option<Value>,
    /// The token's scopes (space-separated).
    pub scopes: String,
    /// The person the token names (an approver deciding as themselves); the operator's when
    /// absent.
    #[serde(default, rename = "as")]
    pub as_person: Option<String>,
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
    /// Answers that the execution waits for approval (by the command's own approvers) until the
    /// call carries the grant; then does the work once per idempotency key and answers
    /// `succeeded` (workflow seed §6.10).
    WaitForApproval,
    /// What it previews changes (an order refunded elsewhere): the previews it gave before are
    /// stale, and it refuses executions confirmed on them (`stale_preview`); otherwise it answers
    /// as `succeed`.
    WorldChanges,
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
    /// The state of each named command's deliveries (every one of its targets').
    #[serde(default)]
    pub delivery: BTreeMap<String, String>,
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
