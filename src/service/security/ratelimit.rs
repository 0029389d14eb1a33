//! Rate limits with governor (GCRA, keyed): inbound chat messages per actor and per tenant, API
//! requests per client. A refused request learns when to come back.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::config::{Rate, RateLimitConfig};

pub struct Limits {
    /// The configured rates, for the limits kept in the database.
    rates: RateLimitConfig,
    actor: DefaultKeyedRateLimiter<String>,
    tenant: DefaultKeyedRateLimiter<String>,
    api_client: DefaultKeyedRateLimiter<String>,
    clock: DefaultClock,
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
        Self {
            rates: config.clone(),
            actor: RateLimiter::keyed(quota(config.actor)),
            tenant: RateLimiter::keyed(quota(config.tenant)),
            api_client: RateLimiter::keyed(quota(config.api_client)),
            clock: DefaultClock::default(),
        }
    }

    /// One inbound message from `actor` of `tenant`: the tenant's limit, then the actor's. `Err`
    /// says how long until one more would be allowed.
    pub fn inbound(&self, tenant: &str, actor: &str) -> Result<(), Duration> {
        self.check(&self.tenant, tenant.to_owned())?;
        self.check(&self.actor, format!("{tenant}|{actor}"))
    }

    /// One inbound message, counted against the budget every instance on `store` shares (on
    /// PostgreSQL, where several gateways can run); a lone SQLite gateway counts in memory.
    pub async fn inbound_shared(
        &self,
        store: &crate::store::Store,
        tenant: &str,
        actor: &str,
        now: time::OffsetDateTime,
    ) -> Result<Result<(), Duration>, crate::store::StoreError> {
        if !self.rates.shared || store.backend() != crate::config::BackendKind::Postgres {
            return Ok(self.inbound(tenant, actor));
        }
        for (key, rate) in
            [(format!("tenant|{tenant}"), self.rates.tenant), (format!("actor|{tenant}|{actor}"), self.rates.actor)]
        {
            let interval_ms = (60_000 / i64::from(rate.per_minute.max(1))).max(1);
            let taken = store.rate_limits().take(&key, interval_ms, i64::from(rate.burst.max(1)), now).await?;
            if let Err(wait_ms) = taken {
                return Ok(Err(Duration::from_millis(u64::try_from(wait_ms).unwrap_or(1))));
            }
        }
        Ok(Ok(()))
    }

    /// One API request from a client (a token's issuer and subject).
    pub fn api_client(&self, client: &str) -> Result<(), Duration> {
        self.check(&self.api_client, client.to_owned())
    }

    fn check(&self, limiter: &DefaultKeyedRateLimiter<String>, key: String) -> Result<(), Duration> {
        limiter.check_key(&key).map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }

    /// Forgets keys that are back to full capacity (run now and then: keys are actors and clients).
    pub fn shrink(&self) {
        for limiter in [&self.actor, &self.tenant, &self.api_client] {
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
        };
        let limits = Limits::new(&config);
        assert!(limits.inbound("demo", "a").is_ok());
        assert!(limits.inbound("demo", "a").is_ok());
        let wait = limits.inbound("demo", "a").expect_err("third in a burst of two");
        assert!(wait > Duration::ZERO && wait <= Duration::from_secs(30), "{wait:?}");
        assert!(limits.inbound("demo", "b").is_ok(), "another actor is unaffected");
        assert!(limits.inbound("other", "a").is_ok(), "the same number in another tenant too");
        assert!(limits.api_client("x").is_ok());
        assert!(limits.api_client("x").is_err());
        assert!(limits.api_client("y").is_ok());
    }
}
