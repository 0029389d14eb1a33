//! The service: what the gateway does, independent of any provider or transport. The engine
//! (moves and their evidence), intake (a channel-neutral message to a command), confirmations,
//! replies, dispatch planning, recovery, chat operations (OoC), agents and the security gates.
//! Imports `domain`, `config` and `store`.

pub mod agents;
pub mod approvals;
pub mod audit;
pub mod confirmations;
pub mod database;
pub mod directory;
pub mod dispatch;
pub mod engine;
pub mod events;
pub mod explain;
pub mod figures;
pub mod intake;
pub mod live;
pub mod locks;
pub mod ooc;
pub mod overview;
pub mod previews;
pub mod reads;
pub mod recovery;
pub mod reload;
pub mod replies;
pub mod request_keys;
pub mod retention;
pub mod scopes;
pub mod security;
pub mod services;
pub mod settings;
pub mod telemetry;
pub mod waiting;

pub use services::Services;
pub use settings::Settings;
