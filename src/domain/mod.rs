//! The domain: the command envelope and its identifiers, the three state machines as transition
//! tables (lifecycle, delivery, agent), evidence and its chain, the registry, the directory, the
//! retry policy. Pure: no I/O, no axum, no sqlx. Imports nothing else of the crate.

pub mod agent;
pub mod canonical;
pub mod command;
pub mod delivery;
pub mod directory;
pub mod evidence;
pub mod instants;
pub mod lifecycle;
pub mod locks;
pub mod message;
pub(crate) mod names;
pub mod outbound;
pub mod preview;
pub mod reach;
pub mod registry;
pub mod replies;
pub mod retry;
pub mod standard_webhooks;
