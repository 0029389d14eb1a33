//! Locks where gateways run as a deployment does (issue #47): two instances on one PostgreSQL,
//! two people refunding each of several orders at the same moment, one on each instance — one
//! change per order, never two; and a lock held when its gateway is killed with SIGKILL is
//! neither lost nor stuck: the next gateway refuses a second refund while the first still runs,
//! and the order is free once it has ended.

use reqwest::StatusCode;
use uuid::Uuid;

use crate::e2e_approvals::state_and_reason;
use crate::fake_graph::FakeServer;
use crate::helpers::{
    ADMIN, CUSTOMER, Meta, TestDb, command_of_message, confirmation_of, on_both_backends, respawn_app_with, settled,
    whatsapp_text_to,
};
use crate::process::ConfigDir;

on_both_backends!(a_lock_held_by_a_gateway_killed_with_sigkill_is_neither_lost_nor_stuck);

const ORDERS: [&str; 8] = ["5001", "5002", "5003", "5004", "5005", "5006", "5007", "5008"];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_people_on_two_instances_refunding_one_order_at_once_make_one_change() {
    let Some(db) = TestDb::postgres().await else { return };
    let executor = FakeServer::succeeding_executor().await;
    let mut config = db.config.clone();
    config.executors.get_mut("orders").expect("orders").url = executor.url.clone();
    let (one, two) = (respawn_app_with(config.clone()).await, respawn_app_with(config).await);
    let (on_one, on_two) = (Meta::new(&one, &db), Meta::new(&two, &db));
    // For each order, the customer on one instance and the admin on the other, at the same moment.
    let asks = ORDERS.iter().map(|order| {
        let (customer, admin) = (format!("wamid.LS-{order}-c"), format!("wamid.LS-{order}-a"));
        let (on_one, on_two) = (&on_one, &on_two);
        async move {
            let customer_text = format!("refund {order} 25.00");
            let admin_text = format!("refund {order} 30.00");
            let (a, b) =
                tokio::join!(on_one.text(&customer, CUSTOMER, &customer_text), on_two.text(&admin, ADMIN, &admin_text));
            assert_eq!((a.status(), b.status()), (StatusCode::OK, StatusCode::OK));
            (customer, admin)
        }
    });
    let asked = futures_util::future::join_all(asks).await;
    let mut holders: Vec<(Uuid, &str, String)> = vec![];
    for (customer, admin) in &asked {
        let (c, a) = (command_of_message(&db, customer).await, command_of_message(&db, admin).await);
        let (cs, as_) = (state_and_reason(&db, c).await, state_and_reason(&db, a).await);
        let refused = ("rejected".to_owned(), Some("resource_locked".to_owned()));
        match (cs.0.as_str(), as_.0.as_str()) {
            ("confirmation_required", _) => {
                assert_eq!(as_, refused, "{customer}: the other is refused");
                holders.push((c, CUSTOMER, customer.clone()));
            }
            (_, "confirmation_required") => {
                assert_eq!(cs, refused, "{admin}: the other is refused");
                holders.push((a, ADMIN, admin.clone()));
            }
            other => panic!("one of the two holds the order: {other:?}"),
        }
    }
    assert_eq!(db.count("SELECT COUNT(*) FROM resource_locks WHERE tenant_id = $1", "demo").await, 8);
    // Each holder confirms (on either instance): one change per order.
    for (i, (id, who, message)) in holders.iter().enumerate() {
        let (_, _, code) = confirmation_of(&db, message).await;
        let meta = if i % 2 == 0 { &on_one } else { &on_two };
        meta.text(&format!("{message}-yes"), who, &format!("YES {code}")).await;
        assert_eq!(settled(&db, *id).await, "executed");
    }
    executor.exactly(ORDERS.len()).await;
    assert_eq!(db.count("SELECT COUNT(*) FROM resource_locks WHERE tenant_id = $1", "demo").await, 0);
    one.stop().await.ok();
    two.stop().await.ok();
}

async fn a_lock_held_by_a_gateway_killed_with_sigkill_is_neither_lost_nor_stuck(db: &TestDb) {
    let executor = FakeServer::succeeding_executor().await;
    let config = ConfigDir::shipped(|config| config);
    let env = [("CHATGATE_DATABASE_URL", db.url.as_str()), ("CHATGATE_ORDERS_EXECUTOR_URL", executor.url.as_str())];
    let mut first = crate::process::start(&config.path(), &env).await;
    whatsapp_text_to(db, &first.base, ("wamid.LK-KILL1", CUSTOMER, "refund 1234 25.00")).await;
    let (id, _, code) = confirmation_of(db, "wamid.LK-KILL1").await;
    first.kill();
    assert_eq!(db.count("SELECT COUNT(*) FROM resource_locks WHERE command_id = $1", &id.to_string()).await, 1);

    let mut config = db.config.clone();
    config.executors.get_mut("orders").expect("orders").url = executor.url.clone();
    let second = respawn_app_with(config).await;
    let meta = Meta::new(&second, db);
    // The request still runs: another refund of its order is refused on the next gateway.
    meta.text("wamid.LK-KILL2", ADMIN, "refund 1234 30.00").await;
    let other = command_of_message(db, "wamid.LK-KILL2").await;
    assert_eq!(state_and_reason(db, other).await, ("rejected".into(), Some("resource_locked".into())));
    // It ends (confirmed, executed once), and the order is free.
    meta.text("wamid.LK-KILL3", CUSTOMER, &format!("YES {code}")).await;
    assert_eq!(settled(db, id).await, "executed");
    assert_eq!(executor.requests().len(), 1, "executed once");
    assert_eq!(db.count("SELECT COUNT(*) FROM resource_locks WHERE tenant_id = $1", "demo").await, 0);
    meta.text("wamid.LK-KILL4", ADMIN, "refund 1234 30.00").await;
    let next = command_of_message(db, "wamid.LK-KILL4").await;
    assert_eq!(state_and_reason(db, next).await.0, "confirmation_required");
    second.stop().await.ok();
}
