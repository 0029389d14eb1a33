//! A short memory of lookups, so that a busy person costs no query per message: an entry lives a
//! few seconds (`TTL`), this process's own changes forget every entry of their tenant at once, and
//! the memory lets entries past `TTL` go as it grows and never holds more than `CAPACITY` (no whole
//! directory is held). Another instance's change is seen here within `TTL`.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::domain::directory::Actor;

/// How long a lookup is remembered.
pub const TTL: Duration = Duration::from_secs(2);
const CAPACITY: usize = 20_000;

/// Entries below which no sweep is worth its walk.
const FIRST_SWEEP: usize = 64;

/// (tenant, what was looked up) → (when, who it was).
type Entries = HashMap<(String, String), (Instant, Option<Actor>)>;

#[derive(Debug, Default)]
pub struct Lookups {
    memory: Mutex<Memory>,
}

#[derive(Debug, Default)]
struct Memory {
    entries: Entries,
    /// The size at which the entries past `TTL` are let go next: twice what the last sweep kept,
    /// so that a sweep's walk is paid for by as many inserts.
    sweep_at: usize,
}

impl Lookups {
    /// What `(tenant, key)` was found to be, if it was looked up within `TTL`.
    pub fn get(&self, tenant: &str, key: &str) -> Option<Option<Actor>> {
        self.get_within(tenant, key, TTL)
    }

    /// What `(tenant, key)` was found to be, if it was looked up within `age` (at most `TTL`).
    pub fn get_within(&self, tenant: &str, key: &str, age: Duration) -> Option<Option<Actor>> {
        let memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        let (at, actor) = memory.entries.get(&(tenant.to_owned(), key.to_owned()))?;
        (at.elapsed() < age.min(TTL)).then(|| actor.clone())
    }

    pub fn put(&self, tenant: &str, key: &str, actor: Option<Actor>) {
        self.put_at(tenant, key, actor, Instant::now());
    }

    /// Remembers a lookup made at `at`. As the memory grows, the entries older than `TTL` go: it
    /// holds the last few seconds' people, not every person ever looked up (the mix's 3,000
    /// people grew the gateway's memory by megabytes while it waited for `CAPACITY`).
    fn put_at(&self, tenant: &str, key: &str, actor: Option<Actor>, at: Instant) {
        let mut memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        let Memory { entries, sweep_at } = &mut *memory;
        if entries.len() >= *sweep_at {
            entries.retain(|_, (then, _)| then.elapsed() < TTL);
            *sweep_at = (entries.len() * 2).max(FIRST_SWEEP);
        }
        if entries.len() >= CAPACITY {
            entries.clear();
        }
        entries.insert((tenant.to_owned(), key.to_owned()), (at, actor));
    }

    /// Forgets the tenant's lookups (a change was made here).
    pub fn forget(&self, tenant: &str) {
        let mut memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        memory.entries.retain(|(t, _), _| t != tenant);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lookup_is_remembered_for_at_most_the_ttl_and_a_shorter_age_can_be_asked_for() {
        let lookups = Lookups::default();
        lookups.put("acme", "address:15550001001", None);
        assert_eq!(lookups.get("acme", "address:15550001001"), Some(None));
        assert_eq!(
            lookups.get_within("acme", "address:15550001001", TTL * 10),
            Some(None),
            "a longer age is answered as the TTL"
        );
        assert_eq!(lookups.get_within("acme", "address:15550001001", Duration::ZERO), None, "older than asked");
        assert_eq!(lookups.get("other", "address:15550001001"), None, "each tenant its own");
        lookups.forget("acme");
        assert_eq!(lookups.get("acme", "address:15550001001"), None);
    }

    #[test]
    fn lookups_past_the_ttl_are_let_go_before_the_memory_grows() {
        let lookups = Lookups::default();
        let long_ago = Instant::now().checked_sub(TTL * 2).expect("an instant two TTLs back");
        for n in 0..5_000 {
            lookups.put_at("acme", &format!("address:{n}"), None, long_ago);
        }
        for n in 0..1_000 {
            lookups.put("acme", &format!("id:{n}"), None);
        }
        let memory = lookups.memory.lock().expect("entries");
        let entries = &memory.entries;
        // The first sweep among the fresh ones let the last stale ones go.
        assert_eq!(entries.len(), 1_000, "the stale lookups went");
        assert!((0..1_000).all(|n| entries.contains_key(&("acme".to_owned(), format!("id:{n}")))), "the fresh stay");
    }
}
