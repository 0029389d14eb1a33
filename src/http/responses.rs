//! What the OpenAPI document says the routes answer, written once: the problem document's schema
//! and the sets of error responses that many routes share (`#[derive(IntoResponses)]`), so that
//! each route's annotation lists only what is its own.

use serde::Serialize;
use utoipa::{IntoResponses, ToSchema};

pub use super::problem::PROBLEM_JSON;

/// An RFC 9457 problem document, as every error body is (`type` is derived from `code`). The
/// members after `request_id` are carried by the problems they explain, and only by those.
#[derive(Serialize, ToSchema)]
#[schema(as = Problem)]
pub struct ProblemDocument {
    #[serde(rename = "type")]
    pub type_uri: String,
    pub title: String,
    pub status: u16,
    pub detail: Option<String>,
    /// A stable, machine-readable name of the problem.
    pub code: String,
    /// The request's `x-request-id`, to find it in the logs.
    pub request_id: Option<String>,
    /// The state of the command (or agent) the request found (409s).
    pub state: Option<String>,
    /// What the command's state allows instead (a refused recovery, 409).
    pub allowed: Option<Vec<String>>,
    /// The scope the token lacks (403).
    pub required_scope: Option<String>,
    /// Why the command is where it is (a refused step).
    pub reason_code: Option<String>,
    /// The evidence artifact that records a refusal.
    pub evidence_id: Option<String>,
    /// The delivery's state, for a refused ACK.
    pub delivery_state: Option<String>,
    /// The lines refused, each with its number and why (an import none of whose lines could be
    /// imported, 422).
    pub problems: Option<Vec<crate::service::directory::LineProblem>>,
    /// The hook bridge's refusals: `false`, as OpenClaw's callers read a failure.
    pub ok: Option<bool>,
    /// The hook bridge's refusals: why (the `detail`, else the `title`), where OpenClaw's callers
    /// read it.
    pub error: Option<String>,
}

/// The errors of every route behind a bearer token and its scope.
#[derive(IntoResponses)]
pub enum BearerErrors {
    #[response(status = 401, description = "Missing or invalid bearer token", content_type = PROBLEM_JSON)]
    Unauthorized(ProblemDocument),
    #[response(status = 403, description = "The token lacks the scope", content_type = PROBLEM_JSON)]
    Forbidden(ProblemDocument),
    #[response(status = 429, description = "Over the client's rate limit", content_type = PROBLEM_JSON)]
    TooManyRequests(ProblemDocument),
    #[response(status = 503, description = "Storage unavailable; retry", content_type = PROBLEM_JSON)]
    Unavailable(ProblemDocument),
}

/// A path that names a command of the caller's tenant.
#[derive(IntoResponses)]
pub enum NoSuchCommand {
    #[response(status = 404, description = "No such command in the tenant", content_type = PROBLEM_JSON)]
    NotFound(ProblemDocument),
}

/// A path that names a person of the caller's tenant.
#[derive(IntoResponses)]
pub enum NoSuchPerson {
    #[response(status = 404, description = "No such person in the tenant", content_type = PROBLEM_JSON)]
    NotFound(ProblemDocument),
}

/// A path that names an approval of the caller's tenant.
#[derive(IntoResponses)]
pub enum NoSuchApproval {
    #[response(status = 404, description = "No such approval in the tenant", content_type = PROBLEM_JSON)]
    NotFound(ProblemDocument),
}

/// A path that names an agent this gateway knows.
#[derive(IntoResponses)]
pub enum NoSuchAgent {
    #[response(status = 404, description = "No such agent", content_type = PROBLEM_JSON)]
    NotFound(ProblemDocument),
}

/// A change made only at the version `If-Match` names ([`IfMatch`]).
#[derive(IntoResponses)]
pub enum StaleVersion {
    #[response(status = 412, description = "Not at the version `If-Match` names", content_type = PROBLEM_JSON)]
    PreconditionFailed(ProblemDocument),
}

/// A request made once under its `Idempotency-Key`.
#[derive(IntoResponses)]
pub enum KeyReused {
    #[response(status = 422, description = "The key was used for another request", content_type = PROBLEM_JSON)]
    UnprocessableEntity(ProblemDocument),
}

/// A JSON body the route reads.
#[derive(IntoResponses)]
pub enum BadBody {
    #[response(status = 400, description = "A bad body", content_type = PROBLEM_JSON)]
    BadRequest(ProblemDocument),
}

/// Meta's subscription handshake: the challenge echoed, or why not.
#[derive(IntoResponses)]
pub enum HandshakeAnswers {
    #[response(status = 200, description = "The challenge", content_type = "text/plain")]
    Challenge(String),
    #[response(status = 400, description = "A bad handshake", content_type = PROBLEM_JSON)]
    BadRequest(ProblemDocument),
    #[response(status = 403, description = "Wrong verify token", content_type = PROBLEM_JSON)]
    Forbidden(ProblemDocument),
}

/// A path that names a configured WhatsApp app.
#[derive(IntoResponses)]
pub enum NoSuchApp {
    #[response(status = 404, description = "No such app", content_type = PROBLEM_JSON)]
    NotFound(ProblemDocument),
}

/// What a chat provider's webhook may be answered besides its success (WhatsApp, Messenger,
/// Instagram, Telegram, Slack, LINE): the same for each, since every channel refuses for the same
/// reasons — the body is not the provider's, the signature or secret is wrong, the channel (or
/// the app named) is not configured, the body is too large, or the store cannot take it now
/// (the only one the provider should retry).
#[derive(IntoResponses)]
pub enum ProviderErrors {
    #[response(status = 400, description = "Not what the provider sends there", content_type = PROBLEM_JSON)]
    BadRequest(ProblemDocument),
    #[response(status = 401, description = "Missing, stale or wrong signature or secret", content_type = PROBLEM_JSON)]
    Unauthorized(ProblemDocument),
    #[response(status = 404, description = "The channel, or the app named, is not configured",
        content_type = PROBLEM_JSON)]
    NotFound(ProblemDocument),
    #[response(status = 413, description = "Body too large", content_type = PROBLEM_JSON)]
    TooLarge(ProblemDocument),
    #[response(status = 503, description = "Storage unavailable or inbox full; the provider retries",
        content_type = PROBLEM_JSON)]
    Unavailable(ProblemDocument),
}

/// A Twilio webhook or status callback.
#[derive(IntoResponses)]
pub enum TwilioErrors {
    #[response(status = 400, description = "Not a Twilio message or status callback", content_type = PROBLEM_JSON)]
    BadRequest(ProblemDocument),
    #[response(status = 401, description = "Missing or wrong signature", content_type = PROBLEM_JSON)]
    Unauthorized(ProblemDocument),
    #[response(status = 404, description = "Twilio is not configured", content_type = PROBLEM_JSON)]
    NotFound(ProblemDocument),
    #[response(status = 415, description = "Not a form", content_type = PROBLEM_JSON)]
    UnsupportedMediaType(ProblemDocument),
    #[response(status = 503, description = "Storage unavailable; Twilio may retry", content_type = PROBLEM_JSON)]
    Unavailable(ProblemDocument),
}

/// A Standard Webhooks delivery.
#[derive(IntoResponses)]
pub enum StandardErrors {
    #[response(status = 400, description = "The payload lacks what the source's mapping needs",
        content_type = PROBLEM_JSON)]
    BadRequest(ProblemDocument),
    #[response(status = 401, description = "Missing or wrong signature, or a stale timestamp",
        content_type = PROBLEM_JSON)]
    Unauthorized(ProblemDocument),
    #[response(status = 404, description = "No such source", content_type = PROBLEM_JSON)]
    NotFound(ProblemDocument),
    #[response(status = 503, description = "Storage unavailable; retry", content_type = PROBLEM_JSON)]
    Unavailable(ProblemDocument),
}

/// Why the hook bridge refuses a call.
#[derive(IntoResponses)]
pub enum HookErrors {
    #[response(status = 400, description = "A bad body, header or a token in the URL", content_type = PROBLEM_JSON)]
    BadRequest(ProblemDocument),
    #[response(status = 401, description = "Missing or wrong hook token", content_type = PROBLEM_JSON)]
    Unauthorized(ProblemDocument),
    #[response(status = 404, description = "The bridge or this hook is not configured", content_type = PROBLEM_JSON)]
    NotFound(ProblemDocument),
    #[response(status = 413, description = "The body is larger than the bridge takes", content_type = PROBLEM_JSON)]
    TooLarge(ProblemDocument),
    #[response(status = 422, description = "The Idempotency-Key was used for another call",
        content_type = PROBLEM_JSON)]
    KeyReused(ProblemDocument),
    #[response(status = 429, description = "Too many failed authentications from this address; honour `Retry-After`",
        content_type = PROBLEM_JSON)]
    Throttled(ProblemDocument),
    #[response(status = 503, description = "Storage unavailable; retry", content_type = PROBLEM_JSON)]
    Unavailable(ProblemDocument),
}
