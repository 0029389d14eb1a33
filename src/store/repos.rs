//! The store's repositories, one per aggregate: `store.commands().get(..)`,
//! `store.outbox().claim(..)`. Each borrows the store (its pool and its write gate); the methods
//! live beside their SQL in the file of their aggregate.

use super::Store;

/// Commands: admission, reads, moves and the causation trace.
#[derive(Clone, Copy)]
pub struct Commands<'a> {
    pub(crate) store: &'a Store,
}

/// Locks on what mutations change, each held by one command until it ends.
#[derive(Clone, Copy)]
pub struct Locks<'a> {
    pub(crate) store: &'a Store,
}

/// Agents: each executor target's state machine.
#[derive(Clone, Copy)]
pub struct Agents<'a> {
    pub(crate) store: &'a Store,
}

/// Approvals waiting for other people's decisions, and the decisions.
#[derive(Clone, Copy)]
pub struct Approvals<'a> {
    pub(crate) store: &'a Store,
}

/// Idempotency-Key records of the API and the hook bridge.
#[derive(Clone, Copy)]
pub struct ApiKeys<'a> {
    pub(crate) store: &'a Store,
}

/// The operator console's sessions and the figures its overview draws.
#[derive(Clone, Copy)]
pub struct Console<'a> {
    pub(crate) store: &'a Store,
}

/// Rate limits shared by the instances on one database.
#[derive(Clone, Copy)]
pub struct RateLimits<'a> {
    pub(crate) store: &'a Store,
}

/// Confirmations waiting for an answer.
#[derive(Clone, Copy)]
pub struct Confirmations<'a> {
    pub(crate) store: &'a Store,
}

/// The directory as data: roles, people, addresses.
#[derive(Clone, Copy)]
pub struct Directory<'a> {
    pub(crate) store: &'a Store,
}

/// An identity resolver's answers and the messages waiting for them.
#[derive(Clone, Copy)]
pub struct Identities<'a> {
    pub(crate) store: &'a Store,
}

/// Every command registry the gateway has run, by version.
#[derive(Clone, Copy)]
pub struct RegistryVersions<'a> {
    pub(crate) store: &'a Store,
}

/// Dedupe records (idempotency keys) and their expiry.
#[derive(Clone, Copy)]
pub struct Dedupe<'a> {
    pub(crate) store: &'a Store,
}

/// Dispatches to executors: the delivery machine per target, attempts and their log.
#[derive(Clone, Copy)]
pub struct Deliveries<'a> {
    pub(crate) store: &'a Store,
}

/// The hash-chained evidence, per tenant.
#[derive(Clone, Copy)]
pub struct Evidence<'a> {
    pub(crate) store: &'a Store,
}

/// Messages received: transport dedupe and delivery statuses of what was sent.
#[derive(Clone, Copy)]
pub struct Inbound<'a> {
    pub(crate) store: &'a Store,
}

/// Verified provider messages waiting for admission.
#[derive(Clone, Copy)]
pub struct Inbox<'a> {
    pub(crate) store: &'a Store,
}

/// Messages and dispatches to send: claims, leases and what became of them.
#[derive(Clone, Copy)]
pub struct Outbox<'a> {
    pub(crate) store: &'a Store,
}

/// Link codes: a listed person's one-time codes for linking another channel (issue #48).
#[derive(Clone, Copy)]
pub struct LinkCodes<'a> {
    pub(crate) store: &'a Store,
}

/// Single-use tokens (step-up `jti`s) consumed.
#[derive(Clone, Copy)]
pub struct Tokens<'a> {
    pub(crate) store: &'a Store,
}

impl Store {
    pub fn commands(&self) -> Commands<'_> {
        Commands { store: self }
    }

    pub fn agents(&self) -> Agents<'_> {
        Agents { store: self }
    }

    pub fn approvals(&self) -> Approvals<'_> {
        Approvals { store: self }
    }

    pub fn locks(&self) -> Locks<'_> {
        Locks { store: self }
    }

    pub fn api_keys(&self) -> ApiKeys<'_> {
        ApiKeys { store: self }
    }

    pub fn console(&self) -> Console<'_> {
        Console { store: self }
    }

    pub fn rate_limits(&self) -> RateLimits<'_> {
        RateLimits { store: self }
    }

    pub fn confirmations(&self) -> Confirmations<'_> {
        Confirmations { store: self }
    }

    pub fn directory(&self) -> Directory<'_> {
        Directory { store: self }
    }

    pub fn inbox(&self) -> Inbox<'_> {
        Inbox { store: self }
    }

    pub fn identities(&self) -> Identities<'_> {
        Identities { store: self }
    }

    pub fn registry_versions(&self) -> RegistryVersions<'_> {
        RegistryVersions { store: self }
    }

    pub fn dedupe(&self) -> Dedupe<'_> {
        Dedupe { store: self }
    }

    pub fn deliveries(&self) -> Deliveries<'_> {
        Deliveries { store: self }
    }

    pub fn evidence(&self) -> Evidence<'_> {
        Evidence { store: self }
    }

    pub fn inbound(&self) -> Inbound<'_> {
        Inbound { store: self }
    }

    pub fn outbox(&self) -> Outbox<'_> {
        Outbox { store: self }
    }

    pub fn link_codes(&self) -> LinkCodes<'_> {
        LinkCodes { store: self }
    }

    pub fn tokens(&self) -> Tokens<'_> {
        Tokens { store: self }
    }
}
