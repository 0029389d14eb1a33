//! The conversation: what chatgate says back, and (with the conversation issue) confirmations
//! and the sending of replies.

pub mod templates;

pub use templates::{FALLBACK_LOCALE, REQUIRED, TemplateError, Templates};
