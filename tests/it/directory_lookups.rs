//! The writers of an admission pass looked up together (`People::know`): each is then found from
//! memory, and found as `People::find` finds them alone — a listed person with their role's
//! scopes, a deactivated person and an unlisted address as nobody.

use std::collections::{BTreeMap, BTreeSet};

use chatgate::domain::command::ActorId;
use chatgate::domain::directory::{Address, AddressKind, Person, Roles, Seed};
use chatgate::domain::evidence::Pseudonymizer;
use chatgate::service::directory::People;
use sqlx::Executor;
use time::OffsetDateTime;

use crate::helpers::{TestDb, on_both_backends, tenant};

on_both_backends!(a_batchs_writers_are_looked_up_together_as_each_would_be_alone);

fn person(id: &str, number: &str, active: bool) -> Person {
    let address = Address::new(AddressKind::Whatsapp, number).expect("a number");
    Person {
        id: ActorId::parse(id).expect("an id"),
        name: id.to_owned(),
        roles: vec!["customer".to_owned()],
        locale: None,
        active,
        addresses: BTreeSet::from([address]),
    }
}

async fn a_batchs_writers_are_looked_up_together_as_each_would_be_alone(db: &TestDb) {
    let acme = tenant("acme");
    let roles = Roles(BTreeMap::from([("customer".to_owned(), BTreeSet::from(["orders:read".to_owned()]))]));
    let listed = vec![person("ana", "15550001001", true), person("bo", "15550001002", false)];
    let seed = Seed { tenants: BTreeMap::from([(acme.clone(), (roles, listed))]) };
    let pseudonymizer = Pseudonymizer::new(b"lookups");
    let batch = People::new(db.store.clone(), pseudonymizer.clone());
    batch.seed(&seed, OffsetDateTime::now_utc()).await.expect("the directory is seeded");
    let addresses = ["15550001001", "15550001002", "15550009999", "15550001001"];

    // Each looked up on its own, by a memory of its own.
    let alone = People::new(db.store.clone(), pseudonymizer.clone());
    let mut expected = vec![];
    for address in addresses {
        expected.push(alone.find(&acme, address).await.expect("a lookup"));
    }
    let ana = expected[0].as_ref().expect("ana is listed and active");
    assert_eq!(ana.id.as_str(), "ana");
    assert_eq!(ana.scopes, BTreeSet::from(["orders:read".to_owned()]));
    assert_eq!(expected[1..3], [None, None], "a deactivated person and an unlisted address are nobody");

    batch.know(&acme, &addresses).await.expect("the batch is looked up");
    // Behind every memory's back: the directory emptied. The batch's lookups still answer (they
    // were made by `know`), exactly as each was found alone; a fresh memory finds nobody.
    let mut raw = db.raw().await;
    raw.execute("DELETE FROM directory_addresses").await.expect("addresses removed");
    for (address, expected) in addresses.iter().zip(&expected) {
        assert_eq!(&batch.find(&acme, address).await.expect("a lookup"), expected, "{address}");
    }
    let fresh = People::new(db.store.clone(), pseudonymizer);
    assert_eq!(fresh.find(&acme, "15550001001").await.expect("a lookup"), None);
}
