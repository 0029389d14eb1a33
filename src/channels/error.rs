//! The channels' one error type: a webhook refused (with the status and problem fields the edge
//! answers with) or a failure of the layers below. `http::error` turns it into a problem
//! document; nothing here builds a response.

use axum::http::StatusCode;

use crate::domain::standard_webhooks::SignatureRefusal;
use crate::service::database::StoreError;
use crate::service::engine::EngineError;
use crate::service::intake::inbox::InboxError;

/// A refusal of the caller's input (never worth a retry as it is), or of the delivery for now
/// (a full inbox: 503 with `Retry-After`).
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub status: StatusCode,
    pub code: &'static str,
    pub title: &'static str,
    pub detail: Option<String>,
    /// `WWW-Authenticate`, for a 401.
    pub challenge: Option<&'static str>,
    /// `Retry-After` in seconds, for a 429.
    pub retry_after: Option<u64>,
}

impl Refusal {
    pub fn new(status: StatusCode, code: &'static str, title: &'static str) -> Self {
        Self { status, code, title, detail: None, challenge: None, retry_after: None }
    }

    /// 400 with `code`.
    pub fn bad_request(code: &'static str, detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, "Bad Request").detail(detail)
    }

    /// 400: a body that is not the notification the endpoint takes (nothing of it is stored).
    pub fn invalid_payload(detail: impl std::fmt::Display) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_payload", "Invalid payload").detail(detail.to_string())
    }

    /// 404: the app, source, hook or provider named is not configured here.
    pub fn not_configured(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", "Not Found").detail(detail)
    }

    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    pub fn challenge(mut self, challenge: &'static str) -> Self {
        self.challenge = Some(challenge);
        self
    }

    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("{}", .0.detail.as_deref().unwrap_or(.0.title))]
    Refused(Box<Refusal>),
    /// Our configuration cannot serve the call (a source naming a tenant that cannot be): a 500,
    /// logged, with nothing stored.
    #[error("misconfigured: {0}")]
    Misconfigured(&'static str),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<Refusal> for ChannelError {
    fn from(refusal: Refusal) -> Self {
        Self::Refused(Box::new(refusal))
    }
}

impl From<SignatureRefusal> for ChannelError {
    fn from(refusal: SignatureRefusal) -> Self {
        Refusal::new(StatusCode::UNAUTHORIZED, refusal.code(), "Unauthorized").detail(refusal.to_string()).into()
    }
}

impl From<InboxError> for ChannelError {
    fn from(error: InboxError) -> Self {
        match error {
            InboxError::Full { backlog, retry_after_secs } => {
                Refusal::new(StatusCode::SERVICE_UNAVAILABLE, "backlog_full", "Service Unavailable")
                    .detail(format!(
                        "{backlog} messages wait for admission, the most this gateway holds; nothing of this \
                         delivery was stored. Send it again later."
                    ))
                    .retry_after(retry_after_secs)
                    .into()
            }
            InboxError::Store(error) => Self::Store(error),
        }
    }
}

/// How a webhook ended, the `outcome` label of `chatgate_webhooks_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookOutcome {
    Accepted,
    BadSignature,
    Malformed,
    UnknownApp,
    Unavailable,
}

impl WebhookOutcome {
    pub fn of<T>(result: &Result<T, ChannelError>) -> Self {
        match result {
            Ok(_) => Self::Accepted,
            Err(ChannelError::Refused(r)) if r.status == StatusCode::UNAUTHORIZED => Self::BadSignature,
            Err(ChannelError::Refused(r)) if r.status == StatusCode::NOT_FOUND => Self::UnknownApp,
            Err(ChannelError::Refused(r)) if r.status.is_server_error() => Self::Unavailable,
            Err(ChannelError::Refused(_)) => Self::Malformed,
            Err(_) => Self::Unavailable,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::BadSignature => "bad_signature",
            Self::Malformed => "malformed",
            Self::UnknownApp => "unknown_app",
            Self::Unavailable => "unavailable",
        }
    }
}

/// Counts a webhook of `channel` in `chatgate_webhooks_total` by how it ended.
pub fn counted<T>(channel: &'static str, result: Result<T, ChannelError>) -> Result<T, ChannelError> {
    let outcome = WebhookOutcome::of(&result).as_str();
    metrics::counter!("chatgate_webhooks_total", "channel" => channel, "outcome" => outcome).increment(1);
    result
}
