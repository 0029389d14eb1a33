//! The SMCL §XI and IDS §XIII conformance suite, written once and run against both backends.
//!
//! Each scenario is an `async fn(&TestDb)`; `conformance!` (`helpers::on_both_backends!`) makes a
//! SQLite test and a PostgreSQL test of it.

mod audit;
mod batching;
mod idempotency;
mod lifecycle;
mod storage;
mod worker_batches;

use chatgate::domain::command::CommandRequest;

use chatgate::domain::command::TenantId;
use chatgate::domain::lifecycle::Event;
use chatgate::domain::lifecycle::State;
use chatgate::service::engine::MoveContext;
use chatgate::service::engine::Moved;
use chatgate::store::{Admitted, StoredArtifact};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::helpers::TestDb;

pub(crate) use crate::helpers::on_both_backends as conformance;

/// The events that take a new mutation to `target` along allowed paths.
pub fn path_to(target: State) -> &'static [Event] {
    use Event::*;
    match target {
        State::Received | State::Canonicalized => &[],
        State::ConfirmationRequired => &[RequestConfirmation],
        State::Confirmed => &[RequestConfirmation, Confirm],
        State::AuthzPending => &[RequestConfirmation, Confirm, SubmitForAuthorization],
        State::Authorized => &[RequestConfirmation, Confirm, SubmitForAuthorization, Allow],
        State::Rejected => &[SubmitForAuthorization, Deny],
        State::Started => &[RequestConfirmation, Confirm, SubmitForAuthorization, Allow, Start],
        State::Executed => &[RequestConfirmation, Confirm, SubmitForAuthorization, Allow, Start, Succeed],
        State::Failed => &[RequestConfirmation, Confirm, SubmitForAuthorization, Allow, Start, Fail],
        State::Canceled => &[RequestConfirmation, Cancel],
        State::Compensated => {
            &[RequestConfirmation, Confirm, SubmitForAuthorization, Allow, Start, Succeed, Compensate]
        }
    }
}

pub fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// Admits a request that must be new, and returns its id.
pub async fn admit_new(db: &TestDb, request: CommandRequest) -> Uuid {
    match db.engine.accept(request, &[], now()).await.expect("accept") {
        (envelope, Admitted::New { command_id, .. }) => {
            assert_eq!(envelope.command_id, command_id);
            command_id
        }
        (_, other) => panic!("expected a new command, got {other:?}"),
    }
}

pub async fn step(db: &TestDb, tenant: &TenantId, id: Uuid, event: Event) -> Moved {
    db.engine
        .advance(tenant, id, event, MoveContext::default(), now())
        .await
        .unwrap_or_else(|e| panic!("{event} on {id}: {e}"))
}

/// Admits a new command and moves it, one committed transition at a time, along `events`.
pub async fn drive(db: &TestDb, request: CommandRequest, events: &[Event]) -> Uuid {
    let tenant = request.tenant_id.clone();
    let id = admit_new(db, request).await;
    for &event in events {
        step(db, &tenant, id, event).await;
    }
    id
}

pub async fn evidence(db: &TestDb, tenant: &TenantId, id: Uuid) -> Vec<StoredArtifact> {
    db.store.evidence().for_command(tenant.as_str(), id).await.expect("evidence")
}

pub fn kinds(artifacts: &[StoredArtifact]) -> Vec<&str> {
    artifacts.iter().map(|a| a.kind.as_str()).collect()
}
