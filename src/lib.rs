//! chatgate: an HTTP gateway that turns chat webhooks into verified, confirmed, authorized
//! commands and hands each to its executor exactly once.
//!
//! The modules follow the pipeline: `command` (the envelope and its key), `lifecycle` (the pure
//! state machine), `evidence` (artifacts and their chain), `engine` (driving commands through the
//! lifecycle against the store), `store` (SQLite and PostgreSQL), `api` and `app` (HTTP).

pub mod agents;
pub mod api;
pub mod app;
pub mod command;
pub mod config;
pub mod conversation;
pub mod delivery;
pub mod directory;
pub mod engine;
pub mod evidence;
pub mod ingress;
pub mod lifecycle;
pub(crate) mod names;
pub mod ooc;
pub mod recovery;
pub mod security;
pub mod simulate;
pub mod store;
pub mod tasks;
