//! RFC 9457 problem documents: the only shape an error body takes.

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Map, Value};

pub const PROBLEM_JSON: &str = "application/problem+json";

/// A problem document. `code` is a stable machine-readable name; `type` is derived from it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Problem {
    #[serde(rename = "type")]
    pub type_uri: String,
    pub title: String,
    pub status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    pub code: String,
    #[serde(flatten)]
    pub extensions: Map<String, Value>,
    #[serde(skip)]
    retry_after_secs: Option<u64>,
    /// `WWW-Authenticate`, for 401 and 403.
    #[serde(skip)]
    challenge: Option<String>,
}

impl Problem {
    pub fn new(status: StatusCode, code: &str, title: &str) -> Self {
        Self {
            type_uri: format!("urn:chatgate:problem:{code}"),
            title: title.to_owned(),
            status: status.as_u16(),
            detail: None,
            code: code.to_owned(),
            extensions: Map::new(),
            retry_after_secs: None,
            challenge: None,
        }
    }

    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.extensions.insert(key.to_owned(), value.into());
        self
    }

    /// Tells the caller to come back (`Retry-After`), for 503 and 429.
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after_secs = Some(secs);
        self
    }

    /// How to authenticate (`WWW-Authenticate`), for 401 and 403.
    pub fn challenge(mut self, challenge: impl Into<String>) -> Self {
        self.challenge = Some(challenge.into());
        self
    }

    /// The problem a bare error status stands for, when a layer or the router produced it.
    pub fn for_status(status: StatusCode) -> Self {
        let (code, title, detail) = match status {
            StatusCode::NOT_FOUND => ("not_found", "Not Found", "No resource at this path."),
            StatusCode::METHOD_NOT_ALLOWED => {
                ("method_not_allowed", "Method Not Allowed", "This path does not accept this method.")
            }
            StatusCode::PAYLOAD_TOO_LARGE => {
                ("body_too_large", "Payload Too Large", "The request body is larger than this server accepts.")
            }
            StatusCode::SERVICE_UNAVAILABLE => {
                ("unavailable", "Service Unavailable", "The request could not be completed in time; retry later.")
            }
            StatusCode::UNSUPPORTED_MEDIA_TYPE => {
                ("unsupported_media_type", "Unsupported Media Type", "The request body has the wrong content type.")
            }
            _ => ("http_error", status.canonical_reason().unwrap_or("Error"), ""),
        };
        let problem = Self::new(status, code, title);
        let problem = if detail.is_empty() { problem } else { problem.detail(detail) };
        if status == StatusCode::SERVICE_UNAVAILABLE { problem.retry_after(1) } else { problem }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self).unwrap_or_else(|_| b"{\"title\":\"Error\"}".to_vec());
        let mut response = (status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if let Some(secs) = self.retry_after_secs {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if let Some(challenge) = self.challenge.as_deref().and_then(|c| HeaderValue::from_str(c).ok()) {
            headers.insert(header::WWW_AUTHENTICATE, challenge);
        }
        response
    }
}

/// Makes every error response a problem document that names the request id: a bare error from
/// the router (404, 405), the body limit (413), the timeout (503) or an extractor's rejection is
/// rebuilt as one, keeping its status and headers; a handler's problem gains the request id. A
/// page for people (the step-up page) stays a page for a browser that asked for HTML.
pub async fn problem_bodies(request: Request, next: Next) -> Response {
    let request_id = request.headers().get("x-request-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let wants_html = names(request.headers(), &header::ACCEPT, "text/html");
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    if wants_html && names(response.headers(), &header::CONTENT_TYPE, "text/html") {
        return response;
    }
    let (mut parts, mut document) = problem_members(response).await;
    if let Some(id) = request_id {
        document.entry("request_id").or_insert(Value::String(id));
    }
    let body = serde_json::to_vec(&document).unwrap_or_default();
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    parts.headers.remove(header::CONTENT_LENGTH);
    if status == StatusCode::SERVICE_UNAVAILABLE && !parts.headers.contains_key(header::RETRY_AFTER) {
        parts.headers.insert(header::RETRY_AFTER, HeaderValue::from(1));
    }
    Response::from_parts(parts, axum::body::Body::from(body))
}

/// An error response taken apart: its head, and its body as a problem document's members — the
/// problem it carries, or the one its status stands for (a bare status from the router, a layer or
/// an extractor's rejection, whose short text is kept as the detail where nothing better is said).
pub(crate) async fn problem_members(response: Response) -> (axum::http::response::Parts, Map<String, Value>) {
    let status = response.status();
    let is_problem =
        response.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(PROBLEM_JSON.as_bytes()));
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, 64 * 1024).await.unwrap_or_default();
    let document = match serde_json::from_slice::<Map<String, Value>>(&bytes) {
        Ok(document) if is_problem => document,
        _ => {
            let mut problem = Problem::for_status(status);
            let text = String::from_utf8_lossy(&bytes).trim().to_owned();
            if problem.detail.is_none() && !text.is_empty() {
                problem = problem.detail(text);
            }
            match serde_json::to_value(&problem) {
                Ok(Value::Object(document)) => document,
                _ => Map::new(),
            }
        }
    };
    (parts, document)
}

/// Whether header `name` (`Accept`, `Content-Type`) names `media_type`.
fn names(headers: &axum::http::HeaderMap, name: &header::HeaderName, media_type: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').any(|part| part.trim().to_ascii_lowercase().starts_with(media_type)))
}

/// The router's fallback: a 404 problem.
pub async fn not_found() -> Response {
    Problem::for_status(StatusCode::NOT_FOUND).into_response()
}
