//! WhatsApp ingress over real HTTP with Meta-shaped payloads, on both backends.

use chatgate::channels::whatsapp::simulate;

use chatgate::channels::whatsapp::simulate::notification;

use chatgate::channels::whatsapp::simulate::text;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::Executor;

use crate::helpers::{
    ADMIN, Backend, CUSTOMER, DEMO_NUMBER, Meta, TestDb, on_both_backends, spawn_app, spawn_app_with,
};

on_both_backends!(
    the_verification_handshake_echoes_the_challenge_only_for_the_right_token,
    a_text_command_becomes_one_canonical_command_awaiting_confirmation,
    several_messages_and_statuses_in_one_delivery_are_each_handled,
    every_message_type_is_stored_and_an_unknown_type_is_no_error,
    a_changed_byte_or_a_bad_signature_is_401_and_stores_nothing,
    malformed_bodies_are_400_and_store_nothing,
    a_body_over_the_limit_is_413_and_stores_nothing,
    twenty_concurrent_copies_of_one_delivery_make_exactly_one_command,
    the_same_command_in_a_new_message_replays_per_ids,
    unknown_numbers_and_senders_are_acknowledged_and_stored,
    a_command_the_actor_may_not_run_is_refused_before_confirmation,
    reads_go_to_authorization_and_help_lists_the_actors_commands,
    named_apps_verify_with_their_own_secret,
    an_unusual_message_never_costs_the_others_of_its_delivery,
);

async fn stored(db: &TestDb) -> (i64, i64) {
    let inbound = db.count("SELECT COUNT(*) FROM inbound_messages WHERE channel = $1", "whatsapp").await;
    let commands = db.count("SELECT COUNT(*) FROM commands WHERE channel = $1", "whatsapp").await;
    (inbound, commands)
}

async fn assert_problem(response: reqwest::Response, status: StatusCode, code: &str) {
    assert_eq!(response.status(), status);
    assert_eq!(response.headers()["content-type"], "application/problem+json");
    let body: Value = response.json().await.expect("problem");
    assert_eq!(body["code"], code, "{body}");
}

async fn the_verification_handshake_echoes_the_challenge_only_for_the_right_token(db: &TestDb) {
    let app = spawn_app(db).await;
    let token = db.config.whatsapp.apps["default"].verify_token.expose().to_owned();
    let get = |query: String| app.client.get(app.url(&format!("/webhooks/whatsapp{query}"))).send();
    let ok = get(format!("?hub.mode=subscribe&hub.verify_token={token}&hub.challenge=1158201444")).await.expect("send");
    assert_eq!(ok.status(), StatusCode::OK);
    assert!(ok.headers()["content-type"].to_str().expect("ascii").starts_with("text/plain"));
    assert_eq!(ok.text().await.expect("body"), "1158201444");
    let named =
        get(format!("/default?hub.mode=subscribe&hub.verify_token={token}&hub.challenge=7")).await.expect("send");
    assert_eq!(named.text().await.expect("body"), "7");
    let wrong = get("?hub.mode=subscribe&hub.verify_token=guess&hub.challenge=1".into()).await.expect("send");
    assert_problem(wrong, StatusCode::FORBIDDEN, "verification_failed").await;
    let no_mode = get(format!("?hub.verify_token={token}&hub.challenge=1")).await.expect("send");
    assert_eq!(no_mode.status(), StatusCode::FORBIDDEN);
    let unknown_app =
        get(format!("/nope?hub.mode=subscribe&hub.verify_token={token}&hub.challenge=1")).await.expect("send");
    assert_eq!(unknown_app.status(), StatusCode::NOT_FOUND);
    app.stop().await.expect("stop");
}

async fn a_text_command_becomes_one_canonical_command_awaiting_confirmation(db: &TestDb) {
    let app = spawn_app(db).await;
    let meta = Meta::new(&app, db);
    let response = meta.text("wamid.R1", CUSTOMER, "Refund 1234  25.00").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.json::<Value>().await.expect("json")["commands"], 1);
    assert_eq!(stored(db).await, (1, 1));

    let mut conn = db.raw().await;
    let row = sqlx::query(
        "SELECT command_id, tenant_id, actor_id, intent_entity, intent_action, intent_target, args, state, conversation_id, message_ids
         FROM commands",
    )
    .fetch_one(&mut conn)
    .await
    .expect("command row");
    let get = |c: &str| sqlx::Row::try_get::<String, _>(&row, c).expect(c);
    assert_eq!((get("tenant_id"), get("actor_id")), ("demo".into(), CUSTOMER.into()));
    assert_eq!(
        (get("intent_entity"), get("intent_action"), get("intent_target")),
        ("order".into(), "refund".into(), "1234".into())
    );
    assert_eq!(serde_json::from_str::<Value>(&get("args")).expect("args"), json!({"order_id": "1234", "amount": "25"}));
    assert_eq!(get("state"), "confirmation_required");
    assert_eq!(get("message_ids"), r#"["wamid.R1"]"#);
    assert_eq!(get("conversation_id"), format!("whatsapp:{DEMO_NUMBER}:{CUSTOMER}"));

    let command_id: uuid::Uuid = get("command_id").parse().expect("uuid");
    let artifacts = db.store.evidence().for_command("demo", command_id).await.expect("evidence");
    let kinds: Vec<&str> = artifacts.iter().map(|a| a.kind.as_str()).collect();
    assert_eq!(kinds, ["command.accepted", "command.confirmation.requested"]);
    assert_eq!(artifacts[0].body["decision"]["dedupe"], "first_seen");
    let linked = db.count("SELECT COUNT(*) FROM inbound_messages WHERE command_id = $1", &command_id.to_string()).await;
    assert_eq!(linked, 1, "the message row names its command");

    let outbox = db.outbox().await;
    assert_eq!(outbox.len(), 1);
    let (kind, prompt) = &outbox[0];
    assert_eq!((kind.as_str(), prompt["template"].as_str()), ("message", Some("confirmation_prompt")));
    assert_eq!(prompt["purpose"], "prompt");
    assert_eq!((prompt["to"].as_str(), prompt["in_reply_to"].as_str()), (Some(CUSTOMER), Some("wamid.R1")));
    app.stop().await.expect("stop");
}

async fn several_messages_and_statuses_in_one_delivery_are_each_handled(db: &TestDb) {
    // A message this gateway sent a moment ago, whose statuses arrive in the delivery.
    let mut conn = db.raw().await;
    let sent_at = (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64;
    sqlx::query(
        "INSERT INTO outbound_messages (id, tenant_id, channel, provider_message_id, recipient, status, status_rank, created_at, updated_at)
         VALUES ('o1', 'demo', 'whatsapp', 'wamid.OUT1', '15550000001', 'sent', 1, $1, $2)",
    )
    .bind(sent_at)
    .bind(sent_at)
    .execute(&mut conn)
    .await
    .expect("outbound row");
    let app = spawn_app(db).await;
    let meta = Meta::new(&app, db);
    let delivery = notification(
        DEMO_NUMBER,
        vec![
            text("wamid.M1", CUSTOMER, "refund 1 10"),
            text("wamid.M2", CUSTOMER, "order status 1"),
            text("wamid.M3", ADMIN, "close account 77"),
            text("wamid.M4", CUSTOMER, "help"),
        ],
        vec![
            simulate::status("wamid.OUT1", CUSTOMER, "delivered"),
            simulate::status("wamid.OUT1", CUSTOMER, "read"),
            simulate::status("wamid.OUT1", CUSTOMER, "delivered"),
            simulate::status("wamid.UNKNOWN", CUSTOMER, "failed"),
        ],
    );
    let response = meta.post(&delivery).await;
    assert_eq!(response.status(), StatusCode::OK);
    let summary: Value = response.json().await.expect("json");
    assert_eq!(
        (summary["messages"].as_u64(), summary["statuses"].as_u64(), summary["commands"].as_u64()),
        (Some(4), Some(4), Some(3))
    );
    assert_eq!(stored(db).await, (4, 3));
    let status = db
        .store
        .inbound()
        .delivery_status(&chatgate::domain::command::Channel::parse("whatsapp").expect("channel"), "wamid.OUT1")
        .await;
    assert_eq!(status.expect("status").as_deref(), Some("read"), "a late `delivered` does not undo `read`");
    app.stop().await.expect("stop");
}

async fn every_message_type_is_stored_and_an_unknown_type_is_no_error(db: &TestDb) {
    let app = spawn_app(db).await;
    let meta = Meta::new(&app, db);
    let m = |n: u32, kind: &str, body: Value| simulate::message(&format!("wamid.T{n}"), CUSTOMER, kind, body);
    let messages = vec![
        m(1, "text", json!({"body": "hello"})),
        simulate::button_reply("wamid.T2", CUSTOMER, "order_status:55", "Status"),
        m(3, "interactive", json!({"type": "list_reply", "list_reply": {"id": "order_status:56", "title": "Status"}})),
        m(4, "button", json!({"payload": "order_status:57", "text": "Status"})),
        m(5, "reaction", json!({"message_id": "wamid.X", "emoji": "👍"})),
        m(6, "image", json!({"id": "m1", "mime_type": "image/jpeg"})),
        m(7, "audio", json!({"id": "m2"})),
        m(8, "video", json!({"id": "m3"})),
        m(9, "document", json!({"id": "m4", "filename": "x.pdf"})),
        m(10, "sticker", json!({"id": "m5"})),
        m(11, "location", json!({"latitude": 38.7, "longitude": -9.1})),
        m(12, "contacts", json!([{"name": {"formatted_name": "Bo"}}])),
        m(13, "telepathy", json!({"intensity": 9})),
    ];
    let response = meta.post(&notification(DEMO_NUMBER, messages, vec![])).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(stored(db).await, (13, 3), "every message stored; the three status replies are commands");
    let statuses = |status: &'static str| db.count("SELECT COUNT(*) FROM inbound_messages WHERE status = $1", status);
    assert_eq!(statuses("not_a_command").await, 8, "media, location, contacts and the unknown type");
    assert_eq!(statuses("reaction").await, 1);
    assert_eq!(statuses("no_match").await, 1);
    // Messages to the person other than outcomes (the three status queries run at once).
    let replies: Vec<_> =
        db.outbox().await.into_iter().filter(|(k, p)| k == "message" && p["template"] != "executed").collect();
    assert_eq!(replies.len(), 9, "the text and the eight non-commands are answered; the reaction is not");
    assert!(replies.iter().any(|(_, p)| p["vars"]["unsupported"] == "telepathy"));
    app.stop().await.expect("stop");
}

async fn a_changed_byte_or_a_bad_signature_is_401_and_stores_nothing(db: &TestDb) {
    let app = spawn_app(db).await;
    let meta = Meta::new(&app, db);
    let body =
        notification(DEMO_NUMBER, vec![text("wamid.S1", CUSTOMER, "refund 9 9.00")], vec![]).to_string().into_bytes();
    let signature = chatgate::channels::whatsapp::signature::sign(meta.secret.as_bytes(), &body);
    let mut changed = body.clone();
    let at = changed.iter().position(|b| *b == b'9').expect("a digit");
    changed[at] = b'8';
    assert_problem(
        meta.post_raw(changed, Some(signature.clone())).await,
        StatusCode::UNAUTHORIZED,
        "invalid_signature",
    )
    .await;
    assert_problem(meta.post_raw(body.clone(), None).await, StatusCode::UNAUTHORIZED, "invalid_signature").await;
    assert_problem(
        meta.post_raw(body.clone(), Some("sha256=zz".into())).await,
        StatusCode::UNAUTHORIZED,
        "invalid_signature",
    )
    .await;
    let other_secret = chatgate::channels::whatsapp::signature::sign(b"not-the-secret", &body);
    assert_problem(
        meta.post_raw(body.clone(), Some(other_secret)).await,
        StatusCode::UNAUTHORIZED,
        "invalid_signature",
    )
    .await;
    assert_eq!(stored(db).await, (0, 0));
    assert!(db.outbox().await.is_empty());
    // The untouched body with its signature is accepted.
    assert_eq!(meta.post_raw(body, Some(signature)).await.status(), StatusCode::OK);
    assert_eq!(stored(db).await, (1, 1));
    app.stop().await.expect("stop");
}

async fn malformed_bodies_are_400_and_store_nothing(db: &TestDb) {
    let app = spawn_app(db).await;
    let meta = Meta::new(&app, db);
    let whole = notification(DEMO_NUMBER, vec![text("wamid.B1", CUSTOMER, "refund 1 1")], vec![]).to_string();
    let nested = format!("{}{}", "[".repeat(5_000), "]".repeat(5_000));
    let bodies: Vec<Vec<u8>> = vec![
        vec![],
        b"refund 1234 25.00".to_vec(),
        whole.as_bytes()[..whole.len() / 2].to_vec(),
        nested.into_bytes(),
        br#"{"object":"page","entry":[]}"#.to_vec(),
        br#"[{"object":"whatsapp_business_account"}]"#.to_vec(),
    ];
    for body in bodies {
        let signature = chatgate::channels::whatsapp::signature::sign(meta.secret.as_bytes(), &body);
        let response = meta.post_raw(body, Some(signature)).await;
        assert_problem(response, StatusCode::BAD_REQUEST, "invalid_payload").await;
    }
    assert_eq!(stored(db).await, (0, 0));
    app.stop().await.expect("stop");
}

async fn a_body_over_the_limit_is_413_and_stores_nothing(db: &TestDb) {
    let app = spawn_app(db).await;
    let meta = Meta::new(&app, db);
    let padding = "x".repeat(db.config.server.body_limit_bytes);
    let body = notification(DEMO_NUMBER, vec![text("wamid.L1", CUSTOMER, &padding)], vec![]);
    assert_problem(meta.post(&body).await, StatusCode::PAYLOAD_TOO_LARGE, "body_too_large").await;
    assert_eq!(stored(db).await, (0, 0));
    app.stop().await.expect("stop");
}

async fn twenty_concurrent_copies_of_one_delivery_make_exactly_one_command(db: &TestDb) {
    let app = spawn_app(db).await;
    let meta = Meta::new(&app, db);
    let body = notification(DEMO_NUMBER, vec![text("wamid.C1", CUSTOMER, "refund 4242 99.90")], vec![]);
    let bytes = body.to_string().into_bytes();
    let signature = chatgate::channels::whatsapp::signature::sign(meta.secret.as_bytes(), &bytes);
    let copies: Vec<_> = (0..20)
        .map(|_| {
            let request = app
                .client
                .post(app.url("/webhooks/whatsapp"))
                .header("x-hub-signature-256", signature.clone())
                .body(bytes.clone());
            tokio::spawn(request.send())
        })
        .collect();
    for copy in copies {
        let response = copy.await.expect("task").expect("response");
        assert_eq!(response.status(), StatusCode::OK, "every copy is acknowledged");
    }
    assert_eq!(stored(db).await, (1, 1), "exactly one message row and one command");
    assert_eq!(db.outbox().await.len(), 1, "one confirmation prompt");
    app.stop().await.expect("stop");
}

async fn the_same_command_in_a_new_message_replays_per_ids(db: &TestDb) {
    let app = spawn_app(db).await;
    let meta = Meta::new(&app, db);
    assert_eq!(meta.text("wamid.D1", CUSTOMER, "refund 77 25").await.status(), StatusCode::OK);
    // The same logical command in a new message, written differently: 25.00 is 25.
    assert_eq!(meta.text("wamid.D2", CUSTOMER, "REFUND 77 25.00").await.status(), StatusCode::OK);
    assert_eq!(stored(db).await, (2, 1), "two messages, one command");
    let outbox = db.outbox().await;
    let templates: Vec<&str> = outbox.iter().filter_map(|(_, p)| p["template"].as_str()).collect();
    assert_eq!(templates, ["confirmation_prompt", "confirmation_prompt"], "the pending prompt again");
    assert_eq!(outbox[0].1, outbox[1].1, "the same prompt: same code, same buttons, not a second confirmation");
    assert_eq!(db.count("SELECT COUNT(*) FROM confirmations WHERE status = $1", "pending").await, 1);
    app.stop().await.expect("stop");
}

/// The value of one counter in `/metrics` (0 when it has not been counted yet).
async fn counter(app: &crate::helpers::TestApp, series: &str) -> u64 {
    let response = app.client.get(app.url("/metrics")).send().await.expect("metrics");
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers()["content-type"].to_str().expect("ascii").starts_with("text/plain"));
    let text = response.text().await.expect("body");
    text.lines().find_map(|line| line.strip_prefix(series).and_then(|rest| rest.trim().parse().ok())).unwrap_or(0)
}

async fn unknown_numbers_and_senders_are_acknowledged_and_stored(db: &TestDb) {
    let app = spawn_app(db).await;
    let meta = Meta::new(&app, db);
    // The recorder is process-wide and other tests count too: compare before and after.
    let unroutable = r#"chatgate_inbound_messages_total{channel="whatsapp",outcome="unroutable"}"#;
    let before = counter(&app, unroutable).await;
    let elsewhere = notification("999999999999999", vec![text("wamid.U1", CUSTOMER, "refund 1 1")], vec![]);
    assert_eq!(meta.post(&elsewhere).await.status(), StatusCode::OK, "acknowledged so Meta stops retrying");
    assert_eq!(db.count("SELECT COUNT(*) FROM inbound_messages WHERE status = $1", "unroutable").await, 1);
    assert!(counter(&app, unroutable).await > before, "the unroutable message is counted");
    assert_eq!(meta.text("wamid.U2", "15559990000", "refund 1 1").await.status(), StatusCode::OK);
    assert_eq!(db.count("SELECT COUNT(*) FROM inbound_messages WHERE status = $1", "refused_unknown_sender").await, 1);
    assert_eq!(stored(db).await, (2, 0), "no command for either");
    let outbox = db.outbox().await;
    assert_eq!(outbox.len(), 1, "the unknown sender is told; the unroutable number cannot be");
    assert_eq!(outbox[0].1["vars"]["reason"], "unknown_sender");
    app.stop().await.expect("stop");
}

async fn a_command_the_actor_may_not_run_is_refused_before_confirmation(db: &TestDb) {
    let app = spawn_app(db).await;
    let meta = Meta::new(&app, db);
    assert_eq!(meta.text("wamid.Z1", CUSTOMER, "close account 12").await.status(), StatusCode::OK);
    let state = db.count("SELECT COUNT(*) FROM commands WHERE state = $1", "rejected").await;
    assert_eq!(state, 1);
    let reason = db.count("SELECT COUNT(*) FROM commands WHERE reason_code = $1", "missing_scope").await;
    assert_eq!(reason, 1);
    let outbox = db.outbox().await;
    assert_eq!(outbox.len(), 1);
    assert_eq!(
        (outbox[0].1["template"].as_str(), outbox[0].1["vars"]["reason"].as_str()),
        (Some("rejected"), Some("missing_scope"))
    );
    let confirmations =
        db.count("SELECT COUNT(*) FROM evidence WHERE kind = $1", "command.confirmation.requested").await;
    assert_eq!(confirmations, 0, "nobody was asked to confirm");
    let denied = db.count("SELECT COUNT(*) FROM evidence WHERE kind = $1", "authz.decided").await;
    assert_eq!(denied, 1);
    app.stop().await.expect("stop");
}

async fn reads_go_to_authorization_and_help_lists_the_actors_commands(db: &TestDb) {
    let app = spawn_app(db).await;
    let meta = Meta::new(&app, db);
    meta.text("wamid.H1", CUSTOMER, "order status 5").await;
    // A read needs no confirmation: authorized at once, with the scopes compared on record, and
    // started with its dispatch row in the same transaction.
    let allowed = db.count("SELECT COUNT(*) FROM evidence WHERE kind = $1", "authz.decided").await;
    assert_eq!(allowed, 1);
    let started = db.count("SELECT COUNT(*) FROM command_transitions WHERE event = $1", "start").await;
    assert_eq!(started, 1);
    meta.text("wamid.H2", CUSTOMER, "help").await;
    meta.text("wamid.H3", ADMIN, "what can you do").await;
    let outbox = db.outbox().await;
    let helps: Vec<&Value> = outbox.iter().filter(|(_, p)| p["template"] == "help").map(|(_, p)| p).collect();
    assert_eq!(helps.len(), 2);
    let lines = |p: &Value| p["vars"]["commands"].as_array().map(Vec::len);
    // The customer's two order commands and the four everyone may ask the gateway (status,
    // status <ref>, why, more); the admin may also close accounts, and operates (ten more).
    assert_eq!((lines(helps[0]), lines(helps[1])), (Some(6), Some(17)));
    app.stop().await.expect("stop");
}

async fn named_apps_verify_with_their_own_secret(db: &TestDb) {
    let mut config = db.config.clone();
    config.whatsapp.apps.insert(
        "second".into(),
        chatgate::config::WhatsAppApp {
            app_secret: chatgate::config::Secret::new("second-app-secret"),
            verify_token: chatgate::config::Secret::new("second-token"),
        },
    );
    let app = spawn_app_with(db, config).await;
    let body =
        notification(DEMO_NUMBER, vec![text("wamid.N1", CUSTOMER, "order status 1")], vec![]).to_string().into_bytes();
    let post = |path: &str, secret: &[u8]| {
        let signature = chatgate::channels::whatsapp::signature::sign(secret, &body);
        app.client.post(app.url(path)).header("x-hub-signature-256", signature).body(body.clone()).send()
    };
    let default_secret = db.config.whatsapp.apps["default"].app_secret.expose().as_bytes().to_vec();
    assert_eq!(
        post("/webhooks/whatsapp/second", &default_secret).await.expect("send").status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(post("/webhooks/whatsapp/second", b"second-app-secret").await.expect("send").status(), StatusCode::OK);
    assert_eq!(
        post("/webhooks/whatsapp/missing", b"second-app-secret").await.expect("send").status(),
        StatusCode::NOT_FOUND
    );
    app.stop().await.expect("stop");
}

/// The delivery sent again as a provider does, until it is taken (for 3 s at most): right after a
/// failure the store refuses at once for half a second before it tries the database again.
async fn retried(meta: &Meta<'_>, body: &serde_json::Value) -> StatusCode {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    loop {
        let status = meta.post(body).await.status();
        if status != StatusCode::SERVICE_UNAVAILABLE || std::time::Instant::now() > deadline {
            return status;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Storage goes away under the running server: the delivery is answered 503 (Meta retries) and
/// nothing half-written remains; once storage is back, the retried delivery is processed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn storage_unavailable_is_503_and_the_retry_succeeds_on_sqlite() {
    let db = TestDb::new_with(Backend::Sqlite, |c| c.storage.sqlite_busy_timeout_ms = 200).await.expect("sqlite");
    let app = spawn_app(&db).await;
    let meta = Meta::new(&app, &db);
    // Another process holds the write lock of the inbox's SQLite file, where a delivery is stored
    // before its answer (the main file's lock only holds up admission, behind the answer).
    let mut holder = db.raw_inbox().await;
    holder.execute("BEGIN EXCLUSIVE").await.expect("take the write lock");
    let body = notification(DEMO_NUMBER, vec![text("wamid.O1", CUSTOMER, "refund 5 5")], vec![]);
    let response = meta.post(&body).await;
    assert!(response.headers().contains_key("retry-after"));
    assert_problem(response, StatusCode::SERVICE_UNAVAILABLE, "store_unavailable").await;
    holder.execute("ROLLBACK").await.expect("release");
    assert_eq!(retried(&meta, &body).await, StatusCode::OK);
    assert_eq!(stored(&db).await, (1, 1));
    app.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn storage_unavailable_is_503_and_the_retry_succeeds_on_postgres() {
    let Some(db) = TestDb::new_with(Backend::Postgres, |c| c.storage.acquire_timeout_ms = 1_000).await else { return };
    let app = spawn_app(&db).await;
    let meta = Meta::new(&app, &db);
    let (admin_url, name) = db.postgres_name().expect("postgres");
    let mut admin = <sqlx::AnyConnection as sqlx::Connection>::connect(admin_url).await.expect("admin");
    let set = |allow: bool| sqlx::AssertSqlSafe(format!("ALTER DATABASE {name} ALLOW_CONNECTIONS {allow}"));
    admin.execute(set(false)).await.expect("refuse connections");
    let kick = format!("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'");
    admin.execute(sqlx::AssertSqlSafe(kick)).await.expect("terminate");
    let body = notification(DEMO_NUMBER, vec![text("wamid.O2", CUSTOMER, "refund 6 6")], vec![]);
    let response = meta.post(&body).await;
    assert_problem(response, StatusCode::SERVICE_UNAVAILABLE, "store_unavailable").await;
    admin.execute(set(true)).await.expect("allow connections");
    assert_eq!(retried(&meta, &body).await, StatusCode::OK);
    assert_eq!(stored(&db).await, (1, 1));
    app.stop().await.expect("stop");
}

/// Shapes from Meta's webhook reference that once failed a whole delivery or got the help text:
/// an `interactive` message with `errors` and no `interactive` object, `system`, `revoke` and
/// `edit` messages, a sender named only by a business-scoped user id, a `played` status.
async fn an_unusual_message_never_costs_the_others_of_its_delivery(db: &TestDb) {
    let app = spawn_app(db).await;
    let meta = Meta::new(&app, db);
    let at = time::OffsetDateTime::now_utc().unix_timestamp().to_string();
    let user_id = "US.13491208655302741918"; // the demo customer's, in config/directory.toml
    let errors = json!([{"code": 131051, "title": "Message type unknown", "message": "Message type unknown",
        "error_data": {"details": "Message type is currently not supported."}}]);
    let messages = json!([
        {"from": CUSTOMER, "id": "wamid.U1", "timestamp": at, "type": "text", "text": {"body": "order status 41"}},
        {"from": CUSTOMER, "id": "wamid.U2", "timestamp": at, "type": "interactive", "errors": errors},
        {"from": CUSTOMER, "id": "wamid.U3", "timestamp": at, "type": "system",
            "system": {"body": "Customer changed from 15550000001 to 15550000009", "wa_id": "15550000009",
                "type": "user_changed_number"}},
        {"from": CUSTOMER, "id": "wamid.U4", "timestamp": at, "type": "revoke",
            "revoke": {"original_message_id": "wamid.U1"}},
        {"from": CUSTOMER, "id": "wamid.U5", "timestamp": at, "type": "edit",
            "edit": {"original_message_id": "wamid.U1", "message": {"type": "text", "text": {"body": "order status 42"}}}},
        {"from_user_id": user_id, "id": "wamid.U6", "timestamp": at, "type": "text", "text": {"body": "order status 43"}},
    ]);
    let statuses = json!([{"id": "wamid.OUT1", "status": "played", "timestamp": at, "recipient_id": CUSTOMER}]);
    let delivery = json!({"object": "whatsapp_business_account", "entry": [{"id": "WABA", "changes": [{
        "field": "messages",
        "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550000000", "phone_number_id": DEMO_NUMBER},
            "contacts": [{"profile": {"name": "Demo"}, "wa_id": CUSTOMER, "user_id": user_id},
                         {"profile": {"name": "Demo"}, "user_id": user_id}],
            "messages": messages,
            "statuses": statuses,
        },
    }]}]});
    let response = meta.post(&delivery).await;
    assert_eq!(response.status(), StatusCode::OK);
    let summary: Value = response.json().await.expect("json");
    assert_eq!((summary["messages"].as_i64(), summary["commands"].as_i64()), (Some(6), Some(2)), "{summary}");
    assert_eq!(stored(db).await, (6, 2), "every message stored; the two status queries are commands");
    let status = |status: &'static str| db.count("SELECT COUNT(*) FROM inbound_messages WHERE status = $1", status);
    assert_eq!(status("unreadable").await, 1, "the interactive message without its content");
    assert_eq!(status("notice").await, 3, "system, revoke and edit");
    // The one named by its user id is the demo customer's command.
    assert_eq!(db.count("SELECT COUNT(*) FROM commands WHERE actor_id = $1", CUSTOMER).await, 2);
    // None of the unusual ones is answered (no help text): only the commands' outcomes go out.
    let replies: Vec<_> =
        db.outbox().await.into_iter().filter(|(k, p)| k == "message" && p["template"] != "executed").collect();
    assert!(replies.is_empty(), "{replies:?}");
    app.stop().await.expect("stop");
}
