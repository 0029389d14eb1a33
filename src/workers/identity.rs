//! Asks the tenants' identity resolvers about the senders whose messages wait, and handles those
//! messages, in the order they came, once an answer comes: as the person it names, or as an
//! unknown sender's. A resolver that times out or is down is asked again (backing off, at most
//! every `MAX_BACKOFF`) until the tenant's `give_up_after`, when the messages are handled as an
//! unknown sender's. Each lookup is leased by one instance at a time; every message is handled
//! once (a message handled before reads as a redelivery).

use std::time::Duration;

use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::domain::command::{ExternalId, TenantId};
use crate::domain::directory::{Actor, Lookup, Resolver};
use crate::executors::resolver::ResolverClient;
use crate::service::Services;
use crate::store::{ClaimedLookup, StoreError};

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
    crate::workers::periodically(every, stopping, || async {
        if let Err(error) = pass(&services, &client).await {
            tracing::warn!(%error, "identity lookups cannot reach the database");
        }
    })
    .await;
}

async fn pass(services: &Services, client: &ResolverClient) -> Result<(), StoreError> {
    let now = OffsetDateTime::now_utc();
    let identities = services.store.identities();
    identities.repair(now).await?;
    let claimed = identities.claim(now, now + LEASE, LOOKUPS_AT_ONCE).await?;
    let settled = claimed.iter().map(|lookup| settle(services, client, lookup));
    for result in futures_util::future::join_all(settled).await {
        result?;
    }
    Ok(())
}

/// Asks about one sender; with an answer (or past giving up), handles their waiting messages.
async fn settle(services: &Services, client: &ResolverClient, lookup: &ClaimedLookup) -> Result<(), StoreError> {
    let now = OffsetDateTime::now_utc();
    let Ok(tenant) = TenantId::parse(&lookup.tenant) else { return Ok(()) };
    let tenants = services.policy.tenants.get();
    let person = match tenants.tenant(&lookup.tenant).and_then(|t| t.resolver.as_ref()) {
        // The tenant no longer has a resolver (a reload): its senders are unknown.
        None => None,
        Some(resolver) => match ask(services, client, (&tenant, lookup), resolver, now).await? {
            Asked::Answered(person) => person,
            Asked::Later => return Ok(()),
        },
    };
    handle_waiting(services, lookup, person).await
}

/// What asking came to: who the sender is (`None`: unknown, or no answer in time), or asked
/// again later.
enum Asked {
    Answered(Option<Actor>),
    Later,
}

async fn ask(
    services: &Services,
    client: &ResolverClient,
    (tenant, lookup): (&TenantId, &ClaimedLookup),
    resolver: &Resolver,
    now: OffsetDateTime,
) -> Result<Asked, StoreError> {
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
            let actor = match person {
                Some(person) => Some(people.resolved_actor(tenant, &person).await?),
                None => None,
            };
            return Ok(Asked::Answered(actor));
        }
        Err(error) => error,
    };
    if now - lookup.first_asked_at >= resolver.give_up_after {
        tracing::warn!(%tenant, %error, "no answer from the resolver in time: an unknown sender");
        return Ok(Asked::Answered(None));
    }
    tracing::info!(%tenant, attempts = lookup.attempts, %error, "the resolver did not answer: asking again");
    let next = now + backoff(lookup.attempts);
    services.store.identities().retry_later(&lookup.tenant, &lookup.address, next, &error).await?;
    Ok(Asked::Later)
}

/// The sender's waiting messages, oldest first, each handled once; then the lookup ends (unless a
/// message came meanwhile: the next pass takes it).
async fn handle_waiting(services: &Services, lookup: &ClaimedLookup, person: Option<Actor>) -> Result<(), StoreError> {
    let identities = services.store.identities();
    loop {
        let waiting = identities.waits(&lookup.tenant, &lookup.address, 50).await?;
        if waiting.is_empty() {
            break;
        }
        for wait in waiting {
            let conversation = ExternalId::parse(&wait.conversation_id).ok();
            let message = conversation.and_then(|c| services.ingress.reread(&wait.channel, &wait.payload, &c));
            let Some(message) = message else {
                tracing::error!(id = %wait.provider_message_id, "a waiting message cannot be read again; kept");
                return identities
                    .retry_later(&lookup.tenant, &lookup.address, OffsetDateTime::now_utc() + MAX_BACKOFF, "unreadable")
                    .await;
            };
            if let Err(error) =
                services.ingress.handle_resolved(&message, person.clone(), OffsetDateTime::now_utc()).await
            {
                tracing::warn!(%error, "a waiting message could not be handled; asked again later");
                let next = OffsetDateTime::now_utc() + MAX_BACKOFF;
                return identities.retry_later(&lookup.tenant, &lookup.address, next, &error.to_string()).await;
            }
            identities.done_waiting(&wait.channel, &wait.provider_message_id).await?;
        }
    }
    identities.finish(&lookup.tenant, &lookup.address).await.map(|_| ())
}

/// 1 s, 2 s, 4 s, ... at most `MAX_BACKOFF`.
fn backoff(attempts: i64) -> Duration {
    let exponent = u32::try_from(attempts.clamp(1, 8) - 1).unwrap_or(0);
    Duration::from_secs(1u64 << exponent).min(MAX_BACKOFF)
}
