//! Asks the tenants' identity resolvers about the senders whose messages are parked in the inbox,
//! and lets those messages go once an answer comes: admission then takes them in their places
//! (the order they came) as the person the answer names, or as an unknown sender's. A resolver
//! that times out or is down is asked again (backing off, at most every `MAX_BACKOFF`) until the
//! tenant's `give_up_after`, when the messages go as an unknown sender's. Each lookup is leased
//! by one instance at a time; every message is admitted once, by the inbox's admission.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::domain::command::TenantId;
use crate::domain::directory::{Lookup, Resolver};
use crate::executors::resolver::ResolverClient;
use crate::service::Services;
use crate::service::database::StoreError;
use crate::service::intake::{ClaimedLookup, Released};

/// How long an instance holds a lookup (longer than any resolver's timeout).
const LEASE: Duration = Duration::from_secs(60);
const MAX_BACKOFF: Duration = Duration::from_secs(10);
const LOOKUPS_AT_ONCE: i64 = 16;

pub(super) async fn run(services: Services, every: Duration, stopping: CancellationToken) {
    let client = match ResolverClient::new() {
        Ok(client) => client,
        Err(error) => {
            tracing::error!(%error, "cannot build the resolver client: messages from unknown senders wait");
            return;
        }
    };
    // An upgrade's leftovers are moved once: after a pass finds none, no pass looks again.
    let moved_left_waiting = AtomicBool::new(false);
    crate::workers::periodically(every, stopping, || async {
        if let Err(error) = pass(&services, &client, &moved_left_waiting).await {
            tracing::warn!(%error, "identity lookups cannot reach the database");
        }
    })
    .await;
}

async fn pass(services: &Services, client: &ResolverClient, moved_left: &AtomicBool) -> Result<(), StoreError> {
    let now = OffsetDateTime::now_utc();
    let ingress = &services.ingress;
    if !moved_left.load(Ordering::Relaxed) && ingress.adopt_left_waiting(now, LOOKUPS_AT_ONCE * 4).await? {
        moved_left.store(true, Ordering::Relaxed);
    }
    let claimed = ingress.lookups_due(now, now + LEASE, LOOKUPS_AT_ONCE).await?;
    let settled = claimed.iter().map(|lookup| settle(services, client, lookup));
    for result in futures_util::future::join_all(settled).await {
        result?;
    }
    Ok(())
}

/// Asks about one sender; with an answer (or past giving up), lets their parked messages go.
async fn settle(services: &Services, client: &ResolverClient, lookup: &ClaimedLookup) -> Result<(), StoreError> {
    let now = OffsetDateTime::now_utc();
    let Ok(tenant) = TenantId::parse(&lookup.tenant) else { return Ok(()) };
    let tenants = services.policy.tenants.get();
    let released = match tenants.tenant(&lookup.tenant).and_then(|t| t.resolver.as_ref()) {
        // The tenant no longer has a resolver (a reload): its senders are unknown.
        None => Released::GivenUp,
        Some(resolver) => match ask(services, client, (&tenant, lookup), resolver, now).await? {
            Some(released) => released,
            None => return Ok(()),
        },
    };
    services.ingress.let_go((&tenant, lookup), released).await
}

/// Asks the resolver; what lets the sender's messages go (its answer, kept for admission to read,
/// or giving up), or `None` when it is asked again later.
async fn ask(
    services: &Services,
    client: &ResolverClient,
    (tenant, lookup): (&TenantId, &ClaimedLookup),
    resolver: &Resolver,
    now: OffsetDateTime,
) -> Result<Option<Released>, StoreError> {
    let question = Lookup {
        kind: "identity.lookup".into(),
        tenant: lookup.tenant.clone(),
        channel: lookup.channel.clone(),
        address: lookup.address.clone(),
        profile_name: lookup.profile_name.clone(),
    };
    let error = match client.ask(resolver, &question, now).await {
        Ok(person) => {
            let people = &services.policy.people;
            people.answered((tenant, &lookup.address), person.as_ref(), resolver, now).await?;
            return Ok(Some(Released::Answered));
        }
        Err(error) => error,
    };
    if now - lookup.first_asked_at >= resolver.give_up_after {
        tracing::warn!(%tenant, %error, "no answer from the resolver in time: an unknown sender");
        return Ok(Some(Released::GivenUp));
    }
    tracing::info!(%tenant, attempts = lookup.attempts, %error, "the resolver did not answer: asking again");
    let next = now + backoff(lookup.attempts);
    services.ingress.ask_again(lookup, next, &error).await?;
    Ok(None)
}

/// 1 s, 2 s, 4 s, ... at most `MAX_BACKOFF`.
fn backoff(attempts: i64) -> Duration {
    let exponent = u32::try_from(attempts.clamp(1, 8) - 1).unwrap_or(0);
    Duration::from_secs(1u64 << exponent).min(MAX_BACKOFF)
}
