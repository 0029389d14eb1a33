//! What no route should see: a NUL character anywhere in the path or the query (`%00`). No
//! identifier or filter contains one, and PostgreSQL refuses it in text (SQLite would take it and
//! find nothing): it is refused here, 400, before any handler or query runs.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::http::Problem;

pub async fn refuse_nul(request: Request, next: Next) -> Response {
    let uri = request.uri();
    let encoded = |text: &str| text.as_bytes().windows(3).any(|w| w[0] == b'%' && w[1] == b'0' && w[2] == b'0');
    if encoded(uri.path()) || uri.query().is_some_and(encoded) {
        return Problem::new(StatusCode::BAD_REQUEST, "invalid_character", "Bad Request")
            .detail("The path or the query holds a NUL character (%00), which nothing here accepts.")
            .into_response();
    }
    next.run(request).await
}
