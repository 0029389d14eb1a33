//! Replies: the templates per channel and locale, and which reply each outcome gets.

pub mod outcome;
pub mod outgoing;
pub mod samples;
pub mod sending;
pub mod templates;

pub use templates::{FALLBACK_LOCALE, REQUIRED, TemplateError, Templates};
