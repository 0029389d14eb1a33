//! Instants as the API, the executors' envelopes and the console write them.

use time::OffsetDateTime;

/// `at` in RFC 3339 (`2026-11-27T21:50:40Z`).
pub fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}
