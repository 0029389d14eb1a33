//! Rate limits with governor (GCRA, keyed), each a named [`Budget`]: inbound chat messages per
//! actor and per tenant, API requests per client, refusals sent to unknown senders per tenant,
//! console sign-ins per client address, link codes offered per sender and per tenant. A refused
//! request learns when to come back. The inbound budgets, the refusals and the link attempts can
//! be the deployment's, kept in the database (PostgreSQL).

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::config::{Rate, RateLimitConfig};
use crate::service::database::Database;
use crate::service::security::shared_takes::SharedTakes;
use crate::store::{Store, StoreError, Take};

/// What a limit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// Inbound messages of a tenant.
    Tenant,
    /// Inbound messages of one sender in a tenant (a known actor, or an unknown address).
    Actor,
    /// API requests of one client.
    ApiClient,
    /// Replies to unknown senders, per tenant.
    UnknownSenderReplies,
    /// Console sign-ins from one client address.
    SignIn,
    /// Link codes offered from one address ("link CODE"), so that nobody guesses one.
    LinkAttempts,
    /// Link codes offered to a tenant from any address, so that many addresses guess no faster.
    LinkAttemptsTenant,
}

impl Budget {
    const ALL: [Self; 7] = [
        Self::Tenant,
        Self::Actor,
        Self::ApiClient,
        Self::UnknownSenderReplies,
        Self::SignIn,
        Self::LinkAttempts,
        Self::LinkAttemptsTenant,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Tenant => "tenant",
            Self::Actor => "actor",
            Self::ApiClient => "api_client",
            Self::UnknownSenderReplies => "unknown_sender_replies",
            Self::SignIn => "sign_in",
            Self::LinkAttempts => "link_attempts",
            Self::LinkAttemptsTenant => "link_attempts_tenant",
        }
    }

    fn rate(self, rates: &RateLimitConfig) -> Rate {
        match self {
            Self::Tenant => rates.tenant,
            Self::Actor => rates.actor,
            Self::ApiClient => rates.api_client,
            Self::UnknownSenderReplies => rates.unknown_sender_replies,
            Self::SignIn => rates.sign_in,
            Self::LinkAttempts => rates.link_attempts,
            Self::LinkAttemptsTenant => rates.link_attempts_tenant,
        }
    }
}

pub struct Limits {
    /// The configured rates, for the limits kept in the database.
    rates: RateLimitConfig,
    /// One keyed limiter per budget, in `Budget::ALL`'s order.
    limiters: Vec<DefaultKeyedRateLimiter<String>>,
    clock: DefaultClock,
    /// The batching writer of the shared budgets, started on the first shared take.
    shared: std::sync::OnceLock<SharedTakes>,
}

impl std::fmt::Debug for Limits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limits").finish_non_exhaustive()
    }
}

fn quota(rate: Rate) -> Quota {
    let per_minute = NonZeroU32::new(rate.per_minute).unwrap_or(NonZeroU32::MIN);
    let burst = NonZeroU32::new(rate.burst).unwrap_or(NonZeroU32::MIN);
    Quota::per_minute(per_minute).allow_burst(burst)
}

impl Limits {
    pub fn new(config: &RateLimitConfig) -> Self {
        let limiters = Budget::ALL.iter().map(|b| RateLimiter::keyed(quota(b.rate(config)))).collect();
        Self { rates: config.clone(), limiters, clock: DefaultClock::default(), shared: std::sync::OnceLock::new() }
    }

    /// Takes one from `key`'s `budget` in this process. `Err` says how long until one more.
    pub fn take_here(&self, budget: Budget, key: &str) -> Result<(), Duration> {
        let at = Budget::ALL.iter().position(|b| *b == budget).unwrap_or_default();
        self.limiters[at].check_key(&key.to_owned()).map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }

    /// Takes one from `key`'s `budget`, counted against what every instance on `store` shares
    /// (on PostgreSQL, where several gateways can run); a lone SQLite gateway counts in memory.
    pub async fn take(
        &self,
        database: &Database,
        budget: Budget,
        key: &str,
        now: time::OffsetDateTime,
    ) -> Result<Result<(), Duration>, StoreError> {
        let store = database.store();
        self.take_chain(store, &[(budget, key)], now).await
    }

    /// One inbound message from `actor` of `tenant`: the tenant's limit, then the actor's.
    pub async fn inbound_shared(
        &self,
        store: &Store,
        tenant: &str,
        actor: &str,
        now: time::OffsetDateTime,
    ) -> Result<Result<(), Duration>, StoreError> {
        self.tenant_then_sender(store, (Budget::Tenant, Budget::Actor), (tenant, actor), now).await
    }

    /// One link code offered to `tenant` from `sender`: the tenant's attempts, then the sender's.
    pub async fn link_attempt(
        &self,
        store: &Store,
        tenant: &str,
        sender: &str,
        now: time::OffsetDateTime,
    ) -> Result<Result<(), Duration>, StoreError> {
        let budgets = (Budget::LinkAttemptsTenant, Budget::LinkAttempts);
        self.tenant_then_sender(store, budgets, (tenant, sender), now).await
    }

    /// The tenant's budget, then its sender's (keyed within the tenant, `tenant|sender`).
    async fn tenant_then_sender(
        &self,
        store: &Store,
        (of_tenant, of_sender): (Budget, Budget),
        (tenant, sender): (&str, &str),
        now: time::OffsetDateTime,
    ) -> Result<Result<(), Duration>, StoreError> {
        let sender = format!("{tenant}|{sender}");
        self.take_chain(store, &[(of_tenant, tenant), (of_sender, &sender)], now).await
    }

    /// `takes` in order, stopping at the first refused; shared ones through the batching writer.
    async fn take_chain(
        &self,
        store: &Store,
        takes: &[(Budget, &str)],
        now: time::OffsetDateTime,
    ) -> Result<Result<(), Duration>, StoreError> {
        if !self.rates.shared || store.backend() != crate::config::BackendKind::Postgres {
            return Ok(takes.iter().try_for_each(|(budget, key)| self.take_here(*budget, key)));
        }
        let chain = takes
            .iter()
            .map(|(budget, key)| {
                let rate = budget.rate(&self.rates);
                let interval_ms = (60_000 / i64::from(rate.per_minute.max(1))).max(1);
                Take { key: format!("{}|{key}", budget.name()), interval_ms, burst: i64::from(rate.burst.max(1)) }
            })
            .collect();
        let writer = self.shared.get_or_init(|| SharedTakes::start(store.clone()));
        let taken = writer.take(chain, now).await?;
        Ok(taken.map_err(|wait_ms| Duration::from_millis(u64::try_from(wait_ms).unwrap_or(1))))
    }

    /// One API request from a client (a token's issuer and subject).
    pub fn api_client(&self, client: &str) -> Result<(), Duration> {
        self.take_here(Budget::ApiClient, client)
    }

    /// Forgets keys that are back to full capacity (run now and then: keys are actors and clients).
    pub fn shrink(&self) {
        for limiter in &self.limiters {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_actor_has_its_own_budget_within_the_tenant() {
        let config = RateLimitConfig {
            actor: Rate { per_minute: 2, burst: 2 },
            tenant: Rate { per_minute: 100, burst: 100 },
            api_client: Rate { per_minute: 1, burst: 1 },
            shared: false,
            ..RateLimitConfig::default()
        };
        let limits = Limits::new(&config);
        let inbound = |tenant: &str, actor: &str| {
            limits
                .take_here(Budget::Tenant, tenant)
                .and_then(|()| limits.take_here(Budget::Actor, &format!("{tenant}|{actor}")))
        };
        assert!(inbound("demo", "a").is_ok());
        assert!(inbound("demo", "a").is_ok());
        let wait = inbound("demo", "a").expect_err("third in a burst of two");
        assert!(wait > Duration::ZERO && wait <= Duration::from_secs(30), "{wait:?}");
        assert!(inbound("demo", "b").is_ok(), "another actor is unaffected");
        assert!(inbound("other", "a").is_ok(), "the same number in another tenant too");
        assert!(limits.api_client("x").is_ok());
        assert!(limits.api_client("x").is_err());
        assert!(limits.api_client("y").is_ok());
    }
}
