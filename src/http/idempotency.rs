//! `Idempotency-Key` (IETF httpapi draft) for the operator's changes: the first request with a
//! key runs and its answer is stored; the same request again gets that answer, another request
//! with the key a 422, and one while the first still runs a 409. The single recovery, the bulk
//! recovery and the console's forms share it.

use axum::Json;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use time::OffsetDateTime;

use crate::domain::command::IdempotencyKey;
use crate::http::error::invalid_body;
use crate::http::{ApiError, Problem};
use crate::service::database::Database;
use crate::service::request_keys::{self, KeyClaim};

/// The request's `Idempotency-Key`, if it sent one that is valid.
pub(crate) fn key_of(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    match headers.get("idempotency-key").map(|v| v.to_str().map(str::to_owned)) {
        None => Ok(None),
        Some(Ok(key)) if IdempotencyKey::parse(&key).is_ok() => Ok(Some(key)),
        Some(_) => Err(invalid_body("`Idempotency-Key` is 1 to 255 visible ASCII characters")),
    }
}

/// What keeping a request to its key gave.
pub(crate) enum Once<T> {
    /// The request ran now (or there was no key).
    Ran(Result<(StatusCode, T), ApiError>),
    /// It ran before: its stored answer.
    Replayed { status: StatusCode, body: String },
}

impl<T: Serialize> Once<T> {
    pub(crate) fn into_response(self) -> Result<Response, ApiError> {
        match self {
            Self::Ran(Ok((status, body))) => Ok((status, Json(body)).into_response()),
            Self::Ran(Err(error)) => Err(error),
            Self::Replayed { status, body } => {
                let kind = if status.is_success() { "application/json" } else { crate::http::problem::PROBLEM_JSON };
                Ok((status, [(header::CONTENT_TYPE, kind)], body).into_response())
            }
        }
    }
}

impl<T: DeserializeOwned> Once<T> {
    /// The answer as a value again, for a page that shows it.
    pub(crate) fn into_result(self) -> Result<T, ApiError> {
        match self {
            Self::Ran(result) => result.map(|(_, body)| body),
            Self::Replayed { status, body } if status.is_success() => serde_json::from_str(&body).map_err(|e| {
                Problem::for_status(StatusCode::INTERNAL_SERVER_ERROR)
                    .detail(format!("a stored answer does not read back: {e}"))
                    .into()
            }),
            Self::Replayed { body, .. } => Err(stored_problem(&body).into()),
        }
    }
}

fn stored_problem(body: &str) -> Problem {
    let value: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    let status = value["status"].as_u64().and_then(|s| StatusCode::from_u16(u16::try_from(s).ok()?).ok());
    let problem = Problem::new(
        status.unwrap_or(StatusCode::CONFLICT),
        value["code"].as_str().unwrap_or("replayed"),
        value["title"].as_str().unwrap_or("Replayed"),
    );
    match value["detail"].as_str() {
        Some(detail) => problem.detail(detail),
        None => problem,
    }
}

/// What makes two JSON bodies the same request: the body read as JSON, members whose value is
/// `null` left out (the same as absent to the types that read them), in RFC 8785 canonical form, so
/// that a retry written with other spacing or member order is the same request, not another (422);
/// a body that is not JSON, as its bytes.
pub(crate) fn body_fingerprint(body: &[u8]) -> Vec<u8> {
    fn without_nulls(value: serde_json::Value) -> serde_json::Value {
        match value {
            serde_json::Value::Object(members) => {
                members.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, without_nulls(v))).collect()
            }
            serde_json::Value::Array(items) => items.into_iter().map(without_nulls).collect(),
            other => other,
        }
    }
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(value) => crate::domain::canonical::to_string(&without_nulls(value)).into_bytes(),
        Err(_) => body.to_vec(),
    }
}

/// Runs `run` at most once for `key` and this request (`fingerprint`: what makes two requests
/// the same), storing its answer; without a key it simply runs.
pub(crate) async fn once<T: Serialize>(
    database: &Database,
    tenant: &str,
    key: Option<&str>,
    fingerprint: &[u8],
    run: impl Future<Output = Result<(StatusCode, T), ApiError>>,
) -> Result<Once<T>, ApiError> {
    let Some(key) = key else { return Ok(Once::Ran(run.await)) };
    match request_keys::claim(database, tenant, key, fingerprint, OffsetDateTime::now_utc()).await? {
        KeyClaim::Fresh => {}
        KeyClaim::Replay { status, response } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
            return Ok(Once::Replayed { status, body: response });
        }
        KeyClaim::InProgress => {
            return Err(Problem::new(StatusCode::CONFLICT, "request_in_progress", "Request in progress")
                .detail("A request with this Idempotency-Key is still being processed.")
                .into());
        }
        KeyClaim::Mismatch => {
            return Err(Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency_key_reused",
                "Idempotency-Key reused",
            )
            .detail("This Idempotency-Key was used for a different request.")
            .into());
        }
    }
    let result = run.await;
    let (status, text) = match &result {
        Ok((status, body)) => (*status, serde_json::to_string(body).unwrap_or_default()),
        Err(error) => {
            let problem = error.problem();
            let status = StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, serde_json::to_string(&problem).unwrap_or_default())
        }
    };
    request_keys::finish(database, tenant, key, status.as_u16(), &text).await?;
    Ok(Once::Ran(result))
}
