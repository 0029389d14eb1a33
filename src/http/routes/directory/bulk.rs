//! `POST /v1/directory/import` and `GET /v1/directory/export`: the directory a file at a time.
//! The import reads its body as it arrives, a line at a time, and writes a batch at a time, so a
//! file of 100,000 people is never held whole; the export is written a page at a time.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::StreamExt;

use super::{READ, WRITE, changing};
use crate::domain::directory::PersonFields;
use crate::http::auth::{Caller, require};
use crate::http::responses::{BearerErrors, PROBLEM_JSON, ProblemDocument};
use crate::http::{ApiError, AppState, Problem};
use crate::service::directory::{ImportFormat, ImportReport, Importer};
use crate::service::reads::Search;

/// A line longer than this is refused (and the rest of the file read on).
const MAX_LINE: usize = 64 * 1024;
/// People per page of the export.
const EXPORT_PAGE: u32 = 1_000;

/// The import, served apart from the other routes: its body may be far larger than theirs and it
/// may take longer (`[directory] import_max_bytes`, `import_timeout_ms`).
pub fn import_router() -> Router<AppState> {
    Router::new().route("/v1/directory/import", post(import).route_layer(require(WRITE)))
}

pub fn export_router() -> Router<AppState> {
    Router::new().route("/v1/directory/export", get(export).route_layer(require(READ)))
}

#[utoipa::path(
    post,
    path = "/v1/directory/import",
    operation_id = "import_actors",
    tag = "directory",
    security(("bearer" = ["directory:write"])),
    request_body(
        description = "One person a line: JSON lines (`application/x-ndjson`) of the fields \
            `POST /v1/directory/actors` takes, or CSV (`text/csv`) with a header line naming the columns \
            (id, name, roles, locale, active, whatsapp, whatsapp_user_id, phone)",
        content(
            (String = "application/x-ndjson"),
            (String = "text/csv")
        )
    ),
    responses(
        (status = 200, description = "Imported, line by line: what was made, changed, left and refused (with line \
            numbers)", body = ImportReport),
        (status = 413, description = "Larger than `[directory] import_max_bytes`", content_type = PROBLEM_JSON,
            body = ProblemDocument),
        (status = 415, description = "Neither JSON lines nor CSV", content_type = PROBLEM_JSON, body = ProblemDocument),
        (status = 422, description = "No line could be imported, or the CSV header is not one",
            content_type = PROBLEM_JSON, body = ProblemDocument),
        BearerErrors
    )
)]
pub(crate) async fn import(
    Caller { state, principal }: Caller,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<ImportReport>, ApiError> {
    let format = format_of(&headers)?;
    let mut importer = Importer::new(&state.policy.people, changing(&principal), format).await?;
    let mut lines = Lines::default();
    let mut chunks = body.into_data_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| too_large(&e.to_string(), lines.number))?;
        for (number, line) in lines.push(&chunk) {
            importer.line(number, line.as_deref().map_err(Clone::clone)).await.map_err(import_error)?;
        }
    }
    if let Some((number, line)) = lines.finish() {
        importer.line(number, line.as_deref().map_err(Clone::clone)).await.map_err(import_error)?;
    }
    let report = importer.finish().await.map_err(import_error)?;
    if report.refused > 0 && report.created + report.updated + report.unchanged == 0 {
        let first = report.problems.first().map(|p| format!("line {}: {}", p.line, p.problem)).unwrap_or_default();
        return Err(Problem::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_lines", "No line could be imported")
            .detail(format!("{} lines refused, nothing stored; {first}", report.refused))
            .with("problems", serde_json::to_value(&report.problems).unwrap_or_default())
            .into());
    }
    Ok(Json(report))
}

#[utoipa::path(get, path = "/v1/directory/export", operation_id = "export_actors", tag = "directory",
    security(("bearer" = ["directory:read"])),
    responses((status = 200, description = "Every person, one JSON line each, as the import takes them",
            content_type = "application/x-ndjson", body = String), BearerErrors))]
pub(crate) async fn export(Caller { state, principal }: Caller) -> Response {
    let (people, tenant) = (state.policy.people.clone(), principal.tenant.clone());
    let pages = futures_util::stream::unfold(Some(String::new()), move |after| {
        let (people, tenant) = (people.clone(), tenant.clone());
        async move {
            let after = after?;
            let search = Search { after: Some(after), limit: EXPORT_PAGE, ..Search::default() };
            let page = match people.list(&tenant, &search).await {
                Ok(page) => page,
                // The body is under way: breaking it off is how the caller learns it is short.
                Err(error) => return Some((Err(std::io::Error::other(error.to_string())), None)),
            };
            let next =
                (page.len() == EXPORT_PAGE as usize).then(|| page.last().map(|p| p.person.id.to_string())).flatten();
            let mut text = String::new();
            for stored in &page {
                text.push_str(&serde_json::to_string(&PersonFields::of(&stored.person)).unwrap_or_default());
                text.push('\n');
            }
            (!page.is_empty() || next.is_some()).then_some((Ok(Bytes::from(text)), next))
        }
    });
    let mut response = Body::from_stream(pages).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-ndjson"));
    response
}

fn format_of(headers: &HeaderMap) -> Result<ImportFormat, ApiError> {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    match essence.as_str() {
        "application/x-ndjson" | "application/ndjson" | "application/jsonl" | "application/json-lines" => {
            Ok(ImportFormat::NdJson)
        }
        "text/csv" => Ok(ImportFormat::Csv),
        _ => Err(Problem::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", "Unsupported Media Type")
            .detail("An import is `application/x-ndjson` (one JSON object a line) or `text/csv`.")
            .into()),
    }
}

fn too_large(error: &str, lines: u64) -> ApiError {
    Problem::new(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", "Payload Too Large")
        .detail(format!("The body could not be read whole ({error}); the first {lines} lines were imported."))
        .into()
}

fn import_error(error: crate::service::directory::ImportError) -> ApiError {
    match error {
        crate::service::directory::ImportError::Store(error) => error.into(),
        header @ crate::service::directory::ImportError::Header(_) => {
            Problem::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_header", "The CSV header is not one")
                .detail(header.to_string())
                .into()
        }
    }
}

/// Lines out of a body read in chunks: each numbered, too long or not UTF-8 said so.
#[derive(Debug, Default)]
struct Lines {
    buffer: Vec<u8>,
    /// Lines handed out so far.
    number: u64,
    /// The line under way is longer than `MAX_LINE`: its rest is skipped.
    overlong: bool,
}

type Line = (u64, Result<String, String>);

impl Lines {
    fn push(&mut self, chunk: &[u8]) -> Vec<Line> {
        let mut lines = vec![];
        for part in chunk.split_inclusive(|b| *b == b'\n') {
            let ends = part.last() == Some(&b'\n');
            if !self.overlong {
                self.buffer.extend_from_slice(part);
            }
            if self.buffer.len() > MAX_LINE + 1 {
                self.overlong = true;
                self.buffer.clear();
            }
            if ends {
                lines.push(self.take());
            }
        }
        lines
    }

    fn finish(mut self) -> Option<Line> {
        (!self.buffer.is_empty() || self.overlong).then(|| self.take())
    }

    fn take(&mut self) -> Line {
        self.number += 1;
        let line = if std::mem::take(&mut self.overlong) {
            Err(format!("a line is at most {} KiB", MAX_LINE / 1024))
        } else {
            String::from_utf8(std::mem::take(&mut self.buffer)).map_err(|_| "not UTF-8 text".to_owned())
        };
        self.buffer.clear();
        (self.number, line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_numbered_across_chunks_and_long_ones_refused() {
        let mut lines = Lines::default();
        let mut got = lines.push(b"{\"id\": \"a\"}\n{\"id\"");
        got.extend(lines.push(b": \"b\"}\r\n"));
        got.extend(lines.push(&vec![b'x'; MAX_LINE + 10]));
        got.extend(lines.push(b"y\n\xff\n"));
        got.extend(lines.push(b"last"));
        got.extend(lines.finish());
        let numbers: Vec<u64> = got.iter().map(|(n, _)| *n).collect();
        assert_eq!(numbers, [1, 2, 3, 4, 5]);
        assert_eq!(got[1].1.as_deref().map(str::trim), Ok("{\"id\": \"b\"}"));
        assert!(got[2].1.as_ref().is_err_and(|e| e.contains("KiB")));
        assert!(got[3].1.as_ref().is_err_and(|e| e.contains("UTF-8")));
        assert_eq!(got[4].1.as_deref(), Ok("last"));
    }
}
