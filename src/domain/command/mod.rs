//! Commands: the canonical envelope, its identifiers and its idempotency key.

pub mod demo;
pub mod envelope;
pub mod idempotency;
pub mod ids;
pub mod short_ref;

pub use envelope::{Args, CommandEnvelope, CommandRequest, Intent, Risk};
pub use idempotency::{Fingerprint, IdempotencyClass, IdempotencyKey, InvalidIdempotencyKey, KeyInputs};
pub use ids::{ActorId, Channel, ExternalId, InvalidId, TenantId};
pub use short_ref::{InvalidShortRef, ShortRef};
