//! Evidence artifacts: their content, the per-tenant hash chain that makes them tamper-evident,
//! and the redaction that keeps personal data out of them. Pure: the store writes them.

pub mod artifact;
pub mod chain;
pub mod decision;
pub mod export;
pub mod redact;

pub use artifact::{EvidenceDraft, TraceBindings};
pub use chain::{
    ChainBreak, ChainHead, ChainVerifier, Checkpoint, GENESIS_HASH, LinkProblem, StoredLink, hash_body, hash_canonical,
    verify_chain,
};
pub use export::{CheckedChain, ExportedLink, verify_exported};
pub use redact::{Pseudonymizer, mask};
