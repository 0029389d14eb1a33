//! The security part of the configuration: who may call the API (token issuers), what proves a
//! person again (the step-up issuer), and how fast anyone may go (rate limits).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::config::Secret;

/// API bearer tokens: the audience every token must name, and the issuers trusted to sign them.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    pub audience: String,
    /// Clock skew tolerated on `exp`, `nbf` and `iat`.
    pub leeway_secs: u64,
    /// The longest a token may still live when it is presented (`exp` − now): a token that says it
    /// is good for 31,000 years is refused, whoever signed it.
    pub max_lifetime_secs: u64,
    pub issuers: BTreeMap<String, IssuerConfig>,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self { audience: "chatgate".into(), leeway_secs: 30, max_lifetime_secs: 86_400, issuers: BTreeMap::new() }
    }
}

/// One issuer: its `iss`, the algorithms accepted from it (no other is, whatever a token's header
/// says) and its keys — a shared secret (HS*), a public key PEM file, or a JWKS file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssuerConfig {
    pub issuer: String,
    pub algorithms: Vec<String>,
    #[serde(default)]
    pub secret: Option<Secret>,
    #[serde(default)]
    pub public_key_file: Option<PathBuf>,
    #[serde(default)]
    pub jwks_file: Option<PathBuf>,
    /// A private key PEM for `token mint` / `stepup mint` with an asymmetric development issuer.
    #[serde(default)]
    pub signing_key_file: Option<PathBuf>,
}

/// Step-up: a fresh, single-use proof that the person is who they say, for risky commands.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepUpConfig {
    #[serde(flatten)]
    pub issuer: IssuerConfig,
    pub audience: String,
    /// Assurance levels (`acr`) accepted, any of them.
    pub acr_values: Vec<String>,
    /// How long ago the person may have authenticated (`auth_time`).
    pub max_age_secs: u64,
    /// The longest a step-up token may live (`exp - iat`); at most 600.
    pub max_lifetime_secs: u64,
    /// Where the person proves themselves; `{command_id}` and `{nonce}` are filled in.
    pub link: String,
}

impl Default for StepUpConfig {
    fn default() -> Self {
        Self {
            issuer: IssuerConfig {
                issuer: "chatgate-demo-stepup".into(),
                algorithms: vec!["HS256".into()],
                secret: Some(Secret::new("demo-stepup-secret-change-me")),
                public_key_file: None,
                jwks_file: None,
                signing_key_file: None,
            },
            audience: "chatgate-stepup".into(),
            acr_values: vec!["urn:chatgate:acr:mfa".into()],
            max_age_secs: 300,
            max_lifetime_secs: 600,
            link: "http://127.0.0.1:8080/step-up?command={command_id}&nonce={nonce}".into(),
        }
    }
}

/// Requests per minute with a burst, per key.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Rate {
    pub per_minute: u32,
    pub burst: u32,
}

/// Rate limits: inbound chat messages per actor and per tenant (duplicates count; a sender the
/// tenant does not know counts as an actor of its own), API requests per client (token subject),
/// refusals sent to unknown senders per tenant, console sign-ins per client address.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitConfig {
    pub actor: Rate,
    pub tenant: Rate,
    pub api_client: Rate,
    /// Replies to senders the tenant does not know (each a paid conversation on WhatsApp), per
    /// tenant: past it, their messages are kept and counted, not answered.
    pub unknown_sender_replies: Rate,
    /// Console sign-in attempts per client address.
    pub sign_in: Rate,
    /// Link codes offered ("link CODE") from one address of a tenant: with at most a few codes
    /// pending per person out of 31⁸, guessing one takes lifetimes at this pace.
    pub link_attempts: Rate,
    /// Link codes offered to one tenant from all addresses together (many numbers guess no faster).
    pub link_attempts_tenant: Rate,
    /// On PostgreSQL, count the inbound limits in the database, so that every instance on it
    /// shares one budget (a statement per message); `false` for a single instance counts in
    /// memory. SQLite always counts in memory (one instance).
    pub shared: bool,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self {
            actor: Rate { per_minute: 30, burst: 10 },
            tenant: Rate { per_minute: 3000, burst: 500 },
            api_client: Rate { per_minute: 600, burst: 100 },
            unknown_sender_replies: Rate { per_minute: 30, burst: 10 },
            sign_in: Rate { per_minute: 10, burst: 5 },
            link_attempts: Rate { per_minute: 1, burst: 5 },
            link_attempts_tenant: Rate { per_minute: 30, burst: 60 },
            shared: true,
        }
    }
}

/// The hookd-compatible bridge for legacy callers (`/hooks/wake`, `/hooks/agent`, `/hooks/{name}`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HooksConfig {
    /// Where the bridge listens: `{base_path}/wake`, `{base_path}/agent`, `{base_path}/{name}`.
    pub base_path: String,
    /// The bridge's token (`Authorization: Bearer` or `x-openclaw-token`); empty turns it off.
    pub token: Secret,
    /// The tenant the bridge's commands belong to, and its principal (the commands' actor).
    pub tenant: String,
    pub actor: String,
    /// Executors a call may name (`agentId`, hookd's `sessionKey`); the first is the default
    /// target, which also runs a call naming one not listed (as OpenClaw does).
    pub agents: Vec<String>,
    /// How long a keyed call (`Idempotency-Key`, hookd's `id=`) is answered with the same command.
    pub dedupe_window_secs: u64,
    /// `/hooks/{name}`: a name to a target agent, an intent, and which payload fields become the
    /// command's arguments (argument name → JSON pointer into the body).
    pub mappings: BTreeMap<String, HookMapping>,
    /// The status an accepted agent run or mapped hook is answered with: 202, as hookd's bridge
    /// and OpenClaw's earlier hooks answer (Bloodbank MIG-1), or 200, as newest OpenClaw does.
    pub accepted_status: AcceptedStatus,
}

/// [`HooksConfig::accepted_status`]: only the two statuses a legacy caller compares with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "u16", into = "u16")]
pub enum AcceptedStatus {
    Accepted,
    Ok,
}

impl TryFrom<u16> for AcceptedStatus {
    type Error = String;

    fn try_from(status: u16) -> Result<Self, String> {
        match status {
            202 => Ok(Self::Accepted),
            200 => Ok(Self::Ok),
            other => Err(format!("hooks.accepted_status is 202 or 200, not {other}")),
        }
    }
}

impl From<AcceptedStatus> for u16 {
    fn from(status: AcceptedStatus) -> u16 {
        match status {
            AcceptedStatus::Accepted => 202,
            AcceptedStatus::Ok => 200,
        }
    }
}

impl Default for HooksConfig {
    fn default() -> Self {
        Self {
            base_path: "/hooks".into(),
            token: Secret::new(""),
            tenant: "demo".into(),
            actor: "hookd-bridge".into(),
            agents: vec![],
            dedupe_window_secs: 300,
            mappings: BTreeMap::new(),
            accepted_status: AcceptedStatus::Accepted,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookMapping {
    pub agent: String,
    pub entity: String,
    pub action: String,
    #[serde(default)]
    pub args: BTreeMap<String, String>,
}

/// A sender that signs with the Standard Webhooks scheme (`POST /webhooks/standard/{source}`):
/// each delivery becomes a command for `agent`, or, with `message`, a chat message that goes
/// through the conversation like a WhatsApp one.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StandardSource {
    /// `whsec_` secrets; any of them verifies (several during a key rotation).
    pub secrets: Vec<Secret>,
    /// How far `webhook-timestamp` may be from now, either way.
    #[serde(default = "default_tolerance")]
    pub tolerance_secs: u64,
    /// Commands: the tenant, the source's principal (the commands' actor), the target agent and
    /// the intent.
    #[serde(default)]
    pub tenant: String,
    #[serde(default)]
    pub actor: String,
    #[serde(default)]
    pub agent: String,
    #[serde(default)]
    pub entity: String,
    #[serde(default)]
    pub action: String,
    /// Argument name → JSON pointer into the payload.
    #[serde(default)]
    pub args: BTreeMap<String, String>,
    /// Chat messages instead of commands.
    #[serde(default)]
    pub message: Option<StandardMessage>,
}

/// How a Standard Webhooks payload becomes a chat message (JSON pointers into it), and where
/// the replies go.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StandardMessage {
    /// The business number the messages are addressed to: the directory routes it to a tenant.
    pub number: String,
    /// The sender: their id is an actor of that tenant.
    pub from: String,
    pub text: String,
    /// The sender system's conversation, handed back with every reply.
    #[serde(default)]
    pub conversation: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    /// Replies are POSTed here as JSON, signed with the source's first secret the Standard
    /// Webhooks way; without it they are kept in the outbox, not sent.
    #[serde(default)]
    pub reply_url: Option<String>,
}

fn default_tolerance() -> u64 {
    300
}

/// Whether `base` can carry the bridge: `/` and segments of letters, digits, `.`, `_` and `-`,
/// its first not one the gateway's own routes begin with.
pub fn valid_base_path(base: &str) -> Result<(), String> {
    const TAKEN: &[&str] = &["v1", "webhooks", "healthz", "readyz", "metrics", "openapi.json"];
    let segments: Vec<&str> = base.strip_prefix('/').ok_or("starts with `/`")?.split('/').collect();
    let fine = |s: &&str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if !segments.iter().all(fine) {
        return Err("is `/` followed by segments of letters, digits, `.`, `_` and `-`".into());
    }
    if TAKEN.contains(&segments[0]) {
        return Err(format!("cannot begin with `/{}`, which the gateway's own routes use", segments[0]));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::valid_base_path;

    #[test]
    fn a_base_path_is_slash_separated_segments_clear_of_the_gateways_routes() {
        for good in ["/hooks", "/legacy/openclaw", "/a.b_c-d"] {
            assert_eq!(valid_base_path(good), Ok(()), "{good}");
        }
        for bad in ["hooks", "/", "/hooks/", "/a//b", "/{name}", "/v1", "/v1/hooks", "/webhooks/x", "/metrics"] {
            assert!(valid_base_path(bad).is_err(), "{bad}");
        }
    }
}
