//! chatgate's integration tests: one binary, so that the suite links once.
//!
//! PostgreSQL scenarios run when `CHATGATE_TEST_POSTGRES_URL` is set (`.ci/run` sets it) and say
//! they were skipped otherwise.

mod architecture;
mod bloodbank_agent;
mod browser;
mod chat_cli;
mod cli;
mod conformance;
mod conformance_runner;
mod console_browser;
mod descriptors;
mod directory_api;
mod directory_browser;
mod directory_erasure;
mod directory_import;
mod e2e_amqp;
mod e2e_console;
mod e2e_conversation;
mod e2e_execution;
mod e2e_health;
mod e2e_hook_callers;
mod e2e_hooks;
mod e2e_nats;
mod e2e_ooc;
mod e2e_openclaw_hooks;
mod e2e_operator;
mod e2e_outbound;
mod e2e_security;
mod e2e_server;
mod e2e_standard;
mod e2e_twilio;
mod e2e_whatsapp;
mod e2e_whatsapp_corpus;
mod ended_commands;
mod event_streams;
mod fake_executor;
mod fake_graph;
mod fake_resolver;
mod faults;
mod helpers;
mod identity_resolver;
mod inbox_kill;
mod language_corpus;
mod metrics_scrape;
mod nats_agent;
mod process;
mod reference_docs;
mod reload;
mod scale_out;
mod security_headers;
mod shared_limits;
mod strangers;
mod tenancy;
mod traces;
mod value_rules;
