//! Several gateways on one PostgreSQL (DESIGN §9): Meta's redeliveries of one message hitting
//! different instances at the same moment store it once, execute its command once and send its
//! reply once; the evidence chain stays whole; an instance's event stream shows what the others did.

use std::time::Duration;

use chatgate::channels::whatsapp::simulate::{notification, text};
use reqwest::StatusCode;
use serde_json::json;

use crate::fake_graph::{FakeGraph, FakeServer, sending_through};
use crate::helpers::{CUSTOMER, DEMO_NUMBER, Meta, TestApp, TestDb, respawn_app_with};
use crate::process::ConfigDir;

const MESSAGES: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_instances_on_one_database_do_everything_once() {
    let Some(db) = TestDb::postgres().await else { return };
    let graph = FakeGraph::start().await;
    let executor = FakeServer::succeeding_executor().await;
    let mut config = sending_through(&db.config, &graph);
    config.executors.get_mut("orders").expect("orders").url = executor.url.clone();
    let mut apps: Vec<TestApp> = vec![];
    for _ in 0..3 {
        apps.push(respawn_app_with(config.clone()).await);
    }
    // Every message delivered twice to each instance, all six at the same moment.
    for n in 0..MESSAGES {
        let body = notification(
            DEMO_NUMBER,
            vec![text(&format!("wamid.SCALE{n}"), CUSTOMER, &format!("order status {n}"))],
            vec![],
        );
        let posts =
            apps.iter().flat_map(|app| [Meta::new(app, &db).request(&body), Meta::new(app, &db).request(&body)]);
        let answers = futures_util::future::join_all(posts.map(|r| r.send())).await;
        for answer in answers {
            assert_eq!(answer.expect("answered").status(), StatusCode::OK);
        }
    }
    let calls = executor.wait_for(MESSAGES, Duration::from_secs(20)).await;
    let replies = graph.wait_for(MESSAGES, Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(executor.requests().len(), MESSAGES, "each command executed once");
    assert_eq!(graph.requests().len(), MESSAGES, "each reply sent once");
    let keys: std::collections::BTreeSet<_> = calls.iter().map(|c| c.headers["idempotency-key"].clone()).collect();
    assert_eq!(keys.len(), MESSAGES);
    let quoted: std::collections::BTreeSet<_> =
        replies.iter().filter_map(|r| r.body["context"]["message_id"].as_str().map(str::to_owned)).collect();
    assert_eq!(quoted.len(), MESSAGES, "one reply for each message");
    assert_eq!(db.count("SELECT COUNT(*) AS n FROM inbound_messages WHERE channel <> $1", "-").await, MESSAGES as i64);
    assert_eq!(db.count("SELECT COUNT(*) AS n FROM commands WHERE tenant_id = $1", "demo").await, MESSAGES as i64);
    let audit = db.store.evidence().verify().await.expect("verify");
    assert!(audit.chains.iter().all(|c| c.intact), "the evidence chains are whole: {:?}", audit.first_break);

    // The first instance's event stream shows the moves the others made.
    let token = crate::helpers::api_token(&db, "demo", "ops-1", "commands:read");
    let events = apps[0].client.get(apps[0].url("/v1/events")).bearer_auth(&token).header("last-event-id", "0");
    let mut stream = events.send().await.expect("events");
    let mut seen = std::collections::BTreeSet::new();
    let mut pending = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while seen.len() < MESSAGES {
        let chunk = tokio::time::timeout_at(deadline, stream.chunk()).await.expect("events in time").expect("read");
        let Some(chunk) = chunk else { break };
        pending.push_str(&String::from_utf8_lossy(&chunk));
        // Whole lines only: an event may come in pieces.
        while let Some(end) = pending.find('\n') {
            let line: String = pending.drain(..=end).collect();
            let Some(data) = line.trim_end().strip_prefix("data:") else { continue };
            let event: serde_json::Value = serde_json::from_str(data.trim()).expect("an event");
            if event["transition"]["to"] == "executed" {
                seen.insert(event["command_id"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    assert_eq!(seen.len(), MESSAGES, "every command's execution, whichever instance moved it");
    drop(stream);
    for app in apps {
        app.stop().await.ok();
    }
}

/// Reads `stream`'s events until one says `command` reached `state`, within `within`.
async fn event_until(stream: &mut reqwest::Response, state: &str, within: Duration) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + within;
    let mut pending = String::new();
    loop {
        let chunk = tokio::time::timeout_at(deadline, stream.chunk()).await.expect("the event in time").expect("read");
        pending.push_str(&String::from_utf8_lossy(&chunk.expect("the stream goes on")));
        while let Some(end) = pending.find('\n') {
            let line: String = pending.drain(..=end).collect();
            let Some(data) = line.trim_end().strip_prefix("data:") else { continue };
            let event: serde_json::Value = serde_json::from_str(data.trim()).expect("an event");
            if event["transition"]["to"] == state {
                return event;
            }
        }
    }
}

/// An instance's event stream hears of another instance's moves as they are committed (PostgreSQL
/// `LISTEN/NOTIFY`), not at its next poll: the stream polls every 10 s when nothing wakes it, and
/// the move must arrive within 5.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_event_stream_hears_of_another_instances_moves_at_once() {
    let Some(db) = TestDb::postgres().await else { return };
    let executor = FakeServer::succeeding_executor().await;
    let mut config = db.config.clone();
    config.executors.get_mut("orders").expect("orders").url = executor.url.clone();
    let (watching, working) = (respawn_app_with(config.clone()).await, respawn_app_with(config).await);
    let token = crate::helpers::api_token(&db, "demo", "ops-1", "commands:read");
    for round in 0..2 {
        let events = watching.client.get(watching.url("/v1/events")).bearer_auth(&token);
        let mut stream = events.send().await.expect("events");
        // The stream has read once and now waits.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let answer = Meta::new(&working, &db).text(&format!("wamid.NOTIFY{round}"), CUSTOMER, "order status 5").await;
        assert_eq!(answer.status(), StatusCode::OK);
        let event = event_until(&mut stream, "executed", Duration::from_secs(5)).await;
        let id = crate::helpers::command_of_message(&db, &format!("wamid.NOTIFY{round}")).await;
        assert_eq!(event["command_id"], id.to_string());
    }
    watching.stop().await.ok();
    working.stop().await.ok();
}

/// A person's limit is the deployment's, not each instance's: three instances do not let them
/// through three times as often.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rate_limits_hold_for_the_whole_deployment() {
    let Some(db) = TestDb::postgres().await else { return };
    let mut config = db.config.clone();
    config.rate_limits.actor = chatgate::config::Rate { per_minute: 6, burst: 3 };
    let mut apps: Vec<TestApp> = vec![];
    for _ in 0..3 {
        apps.push(respawn_app_with(config.clone()).await);
    }
    for n in 0..9 {
        let app = &apps[n % 3];
        let sent = Meta::new(app, &db).text(&format!("wamid.LIMIT{n}"), CUSTOMER, &format!("order status {n}")).await;
        assert_eq!(sent.status(), StatusCode::OK);
    }
    let commands = db.count("SELECT COUNT(*) AS n FROM commands WHERE tenant_id = $1", "demo").await;
    let limited = db.count("SELECT COUNT(*) AS n FROM inbound_messages WHERE status = $1", "rate_limited").await;
    assert_eq!((commands, limited), (3, 6), "a burst of 3 across all instances, the rest held");
    for app in apps {
        app.stop().await.ok();
    }
}

/// An executor stand-in whose first call never ends (the gateway that made it is killed while it
/// waits) and whose later calls succeed; it counts the calls and keeps their idempotency keys.
async fn first_call_hangs() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use axum::http::HeaderMap;
    let keys = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = keys.clone();
    let app = axum::Router::new().fallback(move |headers: HeaderMap| {
        let seen = seen.clone();
        async move {
            let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
            let first = {
                let mut keys = seen.lock().expect("lock");
                keys.push(key);
                keys.len() == 1
            };
            if first {
                tokio::time::sleep(Duration::from_secs(3_600)).await;
            }
            axum::Json(json!({"status": "succeeded", "result": {"state": "shipped"}}))
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("port");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, keys)
}

/// An instance killed (SIGKILL) while its call to the executor is under way loses nothing:
/// another instance takes the row when its lease ends and the command is done, with the same key.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_instance_loses_nothing_another_takes_its_leased_rows() {
    let Some(db) = TestDb::postgres().await else { return };
    let (executor_url, calls) = first_call_hangs().await;
    // The first instance: the real binary, with the shipped configuration and a short call timeout
    // for every executor (a claim's lease is twice the longest: the built-in gateway's default
    // of 10 s would hold the row 20 s, as long as `settled` waits).
    let config = ConfigDir::shipped(|config| {
        config
            .replace("[executors.orders]\n", "[executors.orders]\nrequest_timeout_ms = 1000\n")
            .replace("[executors.gateway]\n", "[executors.gateway]\nrequest_timeout_ms = 1000\n")
    });
    let env = [("CHATGATE_DATABASE_URL", db.url.as_str()), ("CHATGATE_ORDERS_EXECUTOR_URL", executor_url.as_str())];
    let mut first = crate::process::start(&config.path(), &env).await;
    let base = first.base.clone();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    crate::helpers::whatsapp_text_to(&db, &base, ("wamid.KILLED", CUSTOMER, "order status 7")).await;
    while calls.lock().expect("lock").is_empty() {
        assert!(std::time::Instant::now() < deadline, "the first instance did not call the executor");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.kill();

    let mut config = db.config.clone();
    let orders = config.executors.get_mut("orders").expect("orders");
    orders.url = executor_url;
    orders.request_timeout_ms = 1_000;
    config.executors.get_mut("gateway").expect("gateway").request_timeout_ms = 1_000;
    config.outbound.poll_interval_ms = 50;
    let second = respawn_app_with(config).await;
    let id = crate::helpers::command_of_message(&db, "wamid.KILLED").await;
    assert_eq!(crate::helpers::settled(&db, id).await, "executed", "the second instance finished it");
    let keys = calls.lock().expect("lock").clone();
    assert_eq!(keys.len(), 2, "called again once, after the lease: {keys:?}");
    assert_eq!(keys[0], keys[1], "with the same idempotency key");
    let audit = db.store.evidence().verify().await.expect("verify");
    assert!(audit.chains.iter().all(|c| c.intact));
    second.stop().await.ok();
}

/// Issue 28.9: a person added through one instance writes to another at once, or, where that
/// instance had just looked the address up and found nobody, within its lookup memory's time
/// (`service::directory::LOOKUP_TTL`, two seconds).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_person_added_on_one_instance_writes_to_another() {
    let Some(db) = TestDb::postgres().await else { return };
    let (first, second) = (respawn_app_with(db.config.clone()).await, respawn_app_with(db.config.clone()).await);
    let (api, meta) = (crate::directory_api::Api::new(&first, &db), Meta::new(&second, &db));
    let status = |id: &'static str| {
        db.count("SELECT COUNT(*) FROM inbound_messages WHERE provider_message_id = $1 AND status = 'command'", id)
    };
    // Someone added on the first, never looked up on the second: known there at once.
    let person = json!({"id": "c-601", "roles": ["customer"], "addresses": {"whatsapp": "15556060601"}});
    assert_eq!(api.post("/v1/directory/actors", person).await.0, StatusCode::CREATED);
    assert_eq!(meta.text("wamid.ADD1", "15556060601", "order status 1").await.status(), 200);
    assert_eq!(status("wamid.ADD1").await, 1, "known on the other instance at once");
    // Someone the second found nobody for a moment ago: known there within the lookup memory's time.
    meta.text("wamid.ADD2", "15556060602", "order status 2").await;
    let person = json!({"id": "c-602", "roles": ["customer"], "addresses": {"whatsapp": "15556060602"}});
    assert_eq!(api.post("/v1/directory/actors", person).await.0, StatusCode::CREATED);
    let added = std::time::Instant::now();
    let ids = ["wamid.ADD3", "wamid.ADD4", "wamid.ADD5", "wamid.ADD6", "wamid.ADD7", "wamid.ADD8", "wamid.ADD9"];
    let mut known = None;
    for id in ids {
        meta.text(id, "15556060602", "order status 3").await;
        if status(id).await == 1 {
            known = Some(added.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let within = chatgate::service::directory::LOOKUP_TTL + Duration::from_secs(1);
    assert!(known.is_some_and(|after| after <= within), "known after {known:?}, not within {within:?}");
    first.stop().await.ok();
    second.stop().await.ok();
}
