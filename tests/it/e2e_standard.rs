//! Standard Webhooks senders over HTTP, with signatures computed here, independently of the code
//! under test (HMAC-SHA256 over `id.timestamp.body`, base64): rotation, stale timestamps, a
//! replayed `webhook-id`, tampering.

use std::time::Duration;

use chatgate::config::Secret;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fake_graph::FakeServer;
use crate::helpers::{TestApp, TestDb, on_both_backends, spawn_app_with, standard_signature as signature, tenant};

on_both_backends!(
    signed_deliveries_become_commands_once,
    bad_deliveries_are_refused_and_store_nothing,
    a_message_source_chats_and_its_replies_come_back_signed,
    secrets_without_the_prefix_or_padding_verify_as_the_reference_libraries_do,
    the_python_library_signs_with_a_secret_typed_without_padding,
);

const OLD: &str = "whsec_b2xkLXNlY3JldC1vZi10aGUtZGVtby1zb3VyY2U=";
const NEW: &str = "whsec_bmV3LXNlY3JldC1vZi10aGUtZGVtby1zb3VyY2U=";
const OTHER: &str = "whsec_c29tZWJvZHktZWxzZXMtc2VjcmV0LXZhbHVl";

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

async fn start(db: &TestDb) -> TestApp {
    let mut config = db.config.clone();
    config.outbound.poll_interval_ms = 20;
    let demo = config.standard_webhooks.get_mut("demo").expect("the demo source");
    // A rotation in progress: the old secret and the new one both verify.
    demo.secrets = vec![Secret::new(OLD), Secret::new(NEW)];
    spawn_app_with(db, config).await
}

async fn deliver(
    app: &TestApp,
    source: &str,
    id: &str,
    timestamp: i64,
    body: &str,
    signatures: &str,
) -> (StatusCode, Value) {
    let response = app
        .client
        .post(app.url(&format!("/webhooks/standard/{source}")))
        .header("content-type", "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signatures)
        .body(body.to_owned())
        .send()
        .await
        .expect("request");
    (response.status(), response.json().await.unwrap_or(Value::Null))
}

async fn signed_deliveries_become_commands_once(db: &TestDb) {
    let app = start(db).await;
    let body = json!({"type": "order.updated", "data": {"order_id": "D-1"}}).to_string();
    let ts = now();
    let (status, first) = deliver(&app, "demo", "msg_1", ts, &body, &signature(OLD, "msg_1", ts, &body)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{first}");
    let id = first["command_id"].as_str().expect("id").to_owned();
    let command =
        db.store.commands().get(&tenant("demo"), id.parse().expect("uuid")).await.expect("read").expect("command");
    assert_eq!((command.envelope.intent.entity.as_str(), command.envelope.intent.action.as_str()), ("order", "event"));
    assert_eq!(Value::Object(command.envelope.args.clone()), json!({"order_id": "D-1"}));
    assert_eq!(command.envelope.actor_id.as_str(), "standard-demo");

    // The sender retries the same delivery: the same command, nothing new.
    let (status, again) = deliver(&app, "demo", "msg_1", ts, &body, &signature(OLD, "msg_1", ts, &body)).await;
    assert_eq!((status, again["command_id"].as_str()), (StatusCode::ACCEPTED, Some(id.as_str())));

    // Signed with the new secret, among other entries: accepted.
    let body2 = json!({"data": {"order_id": "D-2"}}).to_string();
    let entries = format!("v1,bm90LWl0 {}", signature(NEW, "msg_2", ts, &body2));
    let (status, second) = deliver(&app, "demo", "msg_2", ts, &body2, &entries).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{second}");
    assert_ne!(second["command_id"], first["command_id"]);
    // The same event under another webhook-id is the same command (IDS); a retry of that second
    // delivery is answered as it was the first time (it was a 500 once).
    let same = signature(NEW, "msg_3", ts, &body2);
    for attempt in ["first", "retry", "second retry"] {
        let (status, answer) = deliver(&app, "demo", "msg_3", ts, &body2, &same).await;
        assert_eq!(
            (status, &answer["command_id"]),
            (StatusCode::ACCEPTED, &second["command_id"]),
            "{attempt}: {answer}"
        );
    }
    assert_eq!(db.count("SELECT COUNT(*) FROM commands WHERE actor_id = $1", "standard-demo").await, 2);

    // They run through the pipeline like any command.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while db.count("SELECT COUNT(*) FROM commands WHERE actor_id = $1 AND state = 'executed'", "standard-demo").await
        < 2
    {
        assert!(std::time::Instant::now() < deadline, "the deliveries' commands did not execute");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    app.stop().await.expect("stop");
}

/// (what, source, webhook-id, timestamp, body, signatures, expected status, problem code)
type Case = (&'static str, &'static str, &'static str, i64, String, String, StatusCode, &'static str);

async fn bad_deliveries_are_refused_and_store_nothing(db: &TestDb) {
    let app = start(db).await;
    let body = json!({"data": {"order_id": "X-1"}}).to_string();
    let ts = now();
    let good = signature(OLD, "msg_x", ts, &body);
    let cases: Vec<Case> = vec![
        (
            "another secret",
            "demo",
            "msg_x",
            ts,
            body.clone(),
            signature(OTHER, "msg_x", ts, &body),
            StatusCode::UNAUTHORIZED,
            "invalid_signature",
        ),
        (
            "a tampered body",
            "demo",
            "msg_x",
            ts,
            body.replace("X-1", "X-2"),
            good.clone(),
            StatusCode::UNAUTHORIZED,
            "invalid_signature",
        ),
        ("another id", "demo", "msg_y", ts, body.clone(), good.clone(), StatusCode::UNAUTHORIZED, "invalid_signature"),
        (
            "a stale timestamp",
            "demo",
            "msg_x",
            ts - 600,
            body.clone(),
            signature(OLD, "msg_x", ts - 600, &body),
            StatusCode::UNAUTHORIZED,
            "stale_timestamp",
        ),
        (
            "a future timestamp",
            "demo",
            "msg_x",
            ts + 600,
            body.clone(),
            signature(OLD, "msg_x", ts + 600, &body),
            StatusCode::UNAUTHORIZED,
            "stale_timestamp",
        ),
        (
            "no v1 entry",
            "demo",
            "msg_x",
            ts,
            body.clone(),
            good.replace("v1,", "v2,"),
            StatusCode::UNAUTHORIZED,
            "invalid_signature",
        ),
        ("an unknown source", "nobody", "msg_x", ts, body.clone(), good.clone(), StatusCode::NOT_FOUND, "not_found"),
    ];
    for (name, source, id, timestamp, body, signatures, expected, code) in cases {
        let (status, problem) = deliver(&app, source, id, timestamp, &body, &signatures).await;
        assert_eq!((status, problem["code"].as_str()), (expected, Some(code)), "{name}: {problem}");
    }
    // Verified, but the payload lacks what the mapping needs.
    let empty = json!({"data": {}}).to_string();
    let (status, _) = deliver(&app, "demo", "msg_z", ts, &empty, &signature(OLD, "msg_z", ts, &empty)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let missing = app.client.post(app.url("/webhooks/standard/demo")).body(body).send().await.expect("request");
    assert_eq!(missing.status(), StatusCode::UNAUTHORIZED, "no headers at all");
    assert_eq!(
        db.count("SELECT COUNT(*) FROM commands WHERE actor_id = $1", "standard-demo").await,
        0,
        "nothing stored"
    );
    app.stop().await.expect("stop");
}

/// A source whose deliveries are chat messages: the customer asks for a refund through it,
/// confirms through it, and every reply (prompt, confirmation, outcome) comes back to the
/// source's `reply_url`, signed with its secret as the specification says.
async fn a_message_source_chats_and_its_replies_come_back_signed(db: &TestDb) {
    let receiver = FakeServer::executor().await;
    let mut config = db.config.clone();
    config.outbound.poll_interval_ms = 20;
    let mut chat = config.standard_webhooks.get("demo").expect("the demo source").clone();
    chat.secrets = vec![Secret::new(NEW)];
    chat.message = Some(chatgate::config::StandardMessage {
        number: "100000000000001".into(),
        from: "/data/sender".into(),
        text: "/data/text".into(),
        conversation: Some("/data/thread".into()),
        name: None,
        reply_url: Some(format!("{}/replies", receiver.url)),
    });
    config.standard_webhooks.insert("chat".into(), chat);
    let app = spawn_app_with(db, config).await;
    let say = |text: &str| {
        json!({"type": "message.received", "data": {"sender": "15550000001", "text": text, "thread": "T-7"}})
            .to_string()
    };
    let ts = now();
    let body = say("refund 1234 25.00");
    let (status, first) = deliver(&app, "chat", "m1", ts, &body, &signature(NEW, "m1", ts, &body)).await;
    assert_eq!((status, first["outcome"].as_str()), (StatusCode::OK, Some("command")), "{first}");

    // The prompt comes back, signed: verify it as the source would.
    let replies = receiver.wait_for(1, Duration::from_secs(20)).await;
    let prompt = &replies[0];
    assert_eq!(prompt.path, "/replies");
    let (id, sent_at) =
        (&prompt.headers["webhook-id"], prompt.headers["webhook-timestamp"].parse::<i64>().expect("ts"));
    assert_eq!(prompt.headers["webhook-signature"], signature(NEW, id, sent_at, &prompt.raw));
    assert_eq!((prompt.body["to"].as_str(), prompt.body["conversation"].as_str()), (Some("15550000001"), Some("T-7")));
    assert_eq!(prompt.body["in_reply_to"], "chat:m1");
    let text = prompt.body["text"].as_str().expect("text");
    let code = text.split("YES ").nth(1).and_then(|rest| rest.get(..6)).expect("a code").to_owned();

    let body = say(&format!("YES {code}"));
    let (status, answer) = deliver(&app, "chat", "m2", ts, &body, &signature(NEW, "m2", ts, &body)).await;
    assert_eq!((status, answer["outcome"].as_str()), (StatusCode::OK, Some("answer")), "{answer}");
    // Confirmed, then executed by the demo executor: two more replies, and the command is done.
    let replies = receiver.wait_for(3, Duration::from_secs(20)).await;
    assert!(replies[2].body["text"].as_str().is_some_and(|t| !t.is_empty()));
    let mut conn = db.raw().await;
    let row = sqlx::query("SELECT state, channel FROM commands").fetch_one(&mut conn).await.expect("the command");
    let (state, channel): (String, String) =
        (sqlx::Row::try_get(&row, "state").expect("state"), sqlx::Row::try_get(&row, "channel").expect("channel"));
    assert_eq!((state.as_str(), channel.as_str()), ("executed", "standard"));

    // The same delivery again: nothing new, nothing said.
    let body = say(&format!("YES {code}"));
    let (status, again) = deliver(&app, "chat", "m2", ts, &body, &signature(NEW, "m2", ts, &body)).await;
    assert_eq!((status, again["outcome"].as_str()), (StatusCode::OK, Some("redelivered")), "{again}");
    receiver.exactly(3).await;

    // Another request, declined: an operator reprocesses its stored message, and the person is
    // asked again, through the source.
    let body = say("refund 99 1.00");
    let (_, asked) = deliver(&app, "chat", "m3", ts, &body, &signature(NEW, "m3", ts, &body)).await;
    let declined_id = asked["command_id"].as_str().expect("a command").to_owned();
    let replies = receiver.wait_for(4, Duration::from_secs(20)).await;
    let text = replies[3].body["text"].as_str().expect("text");
    let code = text.split("YES ").nth(1).and_then(|rest| rest.get(..6)).expect("a code").to_owned();
    let body = say(&format!("NO {code}"));
    deliver(&app, "chat", "m4", ts, &body, &signature(NEW, "m4", ts, &body)).await;
    receiver.wait_for(5, Duration::from_secs(20)).await;
    let token = crate::helpers::api_token(db, "demo", "ops-1", "recovery:write");
    let response = app
        .client
        .post(app.url(&format!("/v1/commands/{declined_id}/recovery")))
        .bearer_auth(token)
        .json(&json!({"action": "reprocess", "reason": "asked again"}))
        .send()
        .await
        .expect("recovery");
    let status = response.status();
    let recovered: Value = response.json().await.expect("json");
    assert_eq!(status, StatusCode::CREATED, "{recovered}");
    let replies = receiver.wait_for(6, Duration::from_secs(20)).await;
    let again = replies[5].body["text"].as_str().expect("text");
    assert!(again.contains("YES ") && again.contains("99"), "the request asked again: {again}");
    assert_eq!(replies[5].body["conversation"], "T-7");
}

/// The reference libraries' tests (standard-webhooks/standard-webhooks at 10d3e46,
/// `libraries/javascript/src/webhook.test.ts`; `libraries/python/tests/test_webhooks.py`) verify
/// with `MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw` with and without `whsec_`; a secret written without
/// its base64 padding is the same key. Each starts the gateway and verifies its deliveries.
async fn secrets_without_the_prefix_or_padding_verify_as_the_reference_libraries_do(db: &TestDb) {
    // Base64 of "old-secret", written without its `==`.
    let unpadded = "b2xkLXNlY3JldA";
    let reference = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let mut config = db.config.clone();
    let demo = config.standard_webhooks.get_mut("demo").expect("the demo source");
    demo.secrets = vec![Secret::new(reference), Secret::new(unpadded)];
    let app = spawn_app_with(db, config).await;
    for (n, signed_with) in [reference.to_owned(), format!("whsec_{unpadded}==")].into_iter().enumerate() {
        let (id, ts) = (format!("msg_ref_{n}"), now());
        let body = json!({"data": {"order_id": format!("R-{n}")}}).to_string();
        let (status, answer) = deliver(&app, "demo", &id, ts, &body, &signature(&signed_with, &id, ts, &body)).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{signed_with}: {answer}");
    }
    app.stop().await.expect("stop");
}

/// `webhook-signature` as the standard-webhooks Python library makes it (`Webhook(secret).sign`,
/// the package `standardwebhooks` from PyPI: `.ci/run` installs it); `None`, and the test says it
/// was skipped, where it is not installed.
fn python_library_signature(secret: &str, id: &str, timestamp: i64, body: &str) -> Option<String> {
    let script = "import sys, datetime\nfrom standardwebhooks.webhooks import Webhook\n\
        secret, msg_id, ts, body = sys.argv[1:5]\n\
        at = datetime.datetime.fromtimestamp(int(ts), tz=datetime.timezone.utc)\n\
        print(Webhook(secret).sign(msg_id=msg_id, timestamp=at, data=body))\n";
    crate::helpers::python_prints("standardwebhooks", script, &[secret, id, &timestamp.to_string(), body])
}

/// Issue 44.7: a secret without its padding whose last character carries spare bits (typed by
/// hand), which the Python library takes, is taken at start and verifies what the library signs;
/// and the library's own vector (its `test_sign_function`) signs as chatgate does.
async fn the_python_library_signs_with_a_secret_typed_without_padding(db: &TestDb) {
    let vector = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let body = r#"{"test": 2432232314}"#;
    let Some(signed) = python_library_signature(vector, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, body) else {
        return;
    };
    assert_eq!(signed, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", "the library's own vector");
    let key = chatgate::domain::standard_webhooks::key(vector).expect("the vector's key");
    let ours =
        chatgate::domain::standard_webhooks::sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, body.as_bytes());
    assert_eq!(ours, signed);

    let typed = "whsec_dGVzdB";
    let mut config = db.config.clone();
    config.standard_webhooks.get_mut("demo").expect("the demo source").secrets = vec![Secret::new(typed)];
    config.validate().expect("a secret the Python library takes is taken at start");
    let app = spawn_app_with(db, config).await;
    let (id, ts) = ("msg_python_typed", now());
    let body = json!({"data": {"order_id": "P-1"}}).to_string();
    let signed = python_library_signature(typed, id, ts, &body).expect("signed as above");
    let (status, answer) = deliver(&app, "demo", id, ts, &body, &signed).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
    app.stop().await.expect("stop");
}
