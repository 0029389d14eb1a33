//! chatgate: an HTTP gateway that turns chat webhooks into verified, confirmed, authorized
//! commands and hands each to its executor exactly once.
//!
//! The modules are layers, and each imports only the layers below it (docs/ARCHITECTURE.md;
//! `tests/it/architecture.rs` keeps it so):
//!
//! `domain` ← `config` ← `store` ← `service` ← `channels` / `executors` ← `workers` ← `http` ← `cli`

pub mod channels;
pub mod cli;
pub mod config;
pub mod domain;
pub mod executors;
pub mod http;
pub mod service;
pub mod store;
pub mod workers;
