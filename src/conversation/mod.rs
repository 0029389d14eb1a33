//! The conversation: what chatgate says back (templates), the confirmations it asks for and how
//! answers to them are read, the outcome replies, and the worker that sends all of it.

pub mod answers;
pub mod confirm;
pub mod graph;
pub mod inline;
pub mod outcome;
pub mod sender;
pub mod standard;
pub mod templates;
pub mod twilio;

pub use templates::{FALLBACK_LOCALE, REQUIRED, TemplateError, Templates};
