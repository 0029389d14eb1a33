//! Issue 27.6 and 27.7: an event stream ends when the token or the console session that opened it
//! ends; streams are capped per client and per instance (429 with `Retry-After`) so that one
//! read-only token cannot take the connections webhooks need; and one read of the moves per commit
//! serves every open stream.

use std::time::{Duration, Instant};

use reqwest::StatusCode;

use crate::e2e_operator::read_events;
use crate::helpers::{CUSTOMER, Meta, TestApp, TestDb, api_token, on_both_backends, spawn_app_with};

on_both_backends!(
    one_read_of_the_moves_serves_every_open_stream,
    a_stream_ends_with_the_token_or_session_that_opened_it
);

/// Reads `response` until the server ends it; `false` if it is still open after `within`.
async fn ends_within(response: &mut reqwest::Response, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, response.chunk()).await {
            Err(_) => return false,
            Ok(Ok(None) | Err(_)) => return true,
            Ok(Ok(Some(_))) => {}
        }
    }
}

async fn stream(app: &TestApp, token: &str) -> reqwest::Response {
    app.client.get(app.url("/v1/events")).bearer_auth(token).send().await.expect("stream")
}

/// A token of `subject` living `secs` seconds.
fn short_token(db: &TestDb, subject: &str, secs: u64) -> String {
    chatgate::service::security::mint::api_token(
        &crate::helpers::test_settings(db.config.clone()).security.authenticator,
        None,
        "demo",
        subject,
        "commands:read",
        Duration::from_secs(secs),
        time::OffsetDateTime::now_utc(),
    )
    .expect("token")
}

async fn a_stream_ends_with_the_token_or_session_that_opened_it(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    // A token that expires in 2 s: its stream ends then, not later.
    let mut by_token = stream(&app, &short_token(db, "ops-short", 2)).await;
    assert_eq!(by_token.status(), StatusCode::OK);
    let opened = Instant::now();
    assert!(ends_within(&mut by_token, Duration::from_secs(5)).await, "ended with its token");
    // `exp` is in whole seconds: the token lived between one and two.
    assert!(opened.elapsed() >= Duration::from_millis(900), "not before: {:?}", opened.elapsed());

    // A console session: signing out ends the stream it opened at once.
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
    let token = api_token(db, "demo", "ops-1", "commands:read");
    let signed = crate::helpers::console_sign_in(&app, &token, &[]).await;
    let set = signed.headers()["set-cookie"].to_str().expect("ascii").to_owned();
    let cookie = format!("chatgate_session={}", cookie::Cookie::parse(set).expect("cookie").value());
    let mut by_session = client.get(app.url("/v1/events")).header("cookie", &cookie).send().await.expect("stream");
    assert_eq!(by_session.status(), StatusCode::OK);
    let page = client.get(app.url("/console/commands")).header("cookie", &cookie).send().await.expect("page");
    let html = page.text().await.expect("html");
    let at = html.find("name=\"csrf\" value=\"").expect("a form token") + 19;
    let csrf = html[at..].split('"').next().expect("value").to_owned();
    let out = client.post(app.url("/console/sign-out")).header("cookie", &cookie).form(&[("csrf", csrf)]).send();
    assert_eq!(out.await.expect("sign out").status(), StatusCode::SEE_OTHER);
    assert!(ends_within(&mut by_session, Duration::from_secs(2)).await, "ended with its session");
    app.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn streams_are_capped_per_client_and_per_instance_and_webhooks_go_on() {
    let db = TestDb::sqlite().await;
    let mut config = db.config.clone();
    (config.events.max_streams, config.events.max_streams_per_client) = (5, 2);
    let app = spawn_app_with(&db, config).await;
    let mut open = vec![];
    let greedy = api_token(&db, "demo", "reader-1", "commands:read");
    for _ in 0..2 {
        open.push(stream(&app, &greedy).await);
    }
    let refused = stream(&app, &greedy).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS, "a client's third");
    assert!(refused.headers().contains_key("retry-after"));
    assert_eq!(refused.headers()["content-type"], "application/problem+json");
    for n in 2..5 {
        open.push(stream(&app, &api_token(&db, "demo", &format!("reader-{n}"), "commands:read")).await);
    }
    assert!(open.iter().all(|s| s.status() == StatusCode::OK));
    let sixth = stream(&app, &api_token(&db, "demo", "reader-9", "commands:read")).await;
    assert_eq!(sixth.status(), StatusCode::TOO_MANY_REQUESTS, "the instance's sixth");
    // Webhooks and the rest of the API are served meanwhile.
    assert_eq!(Meta::new(&app, &db).text("wamid.CAP1", CUSTOMER, "order status 1").await.status(), 200);
    let list = app.client.get(app.url("/v1/commands")).bearer_auth(&greedy).send().await.expect("list");
    assert_eq!(list.status(), StatusCode::OK);
    // A stream that ends gives its place back.
    drop(open.remove(0));
    let deadline = Instant::now() + Duration::from_secs(5);
    while stream(&app, &greedy).await.status() != StatusCode::OK {
        assert!(Instant::now() < deadline, "the place came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    app.stop().await.expect("stop");
}

/// 30 streams open, 8 commands admitted: every stream gets every move, and the moves are read
/// about as often as with one stream (one read per commit), not 30 times as often.
async fn one_read_of_the_moves_serves_every_open_stream(db: &TestDb) {
    let mut config = db.config.clone();
    (config.events.max_streams, config.events.max_streams_per_client) = (64, 64);
    let app = spawn_app_with(db, config).await;
    let token = api_token(db, "demo", "reader", "commands:read");
    let reads_with = |streams: usize, tag: &'static str| {
        let (app, token) = (&app, token.clone());
        async move {
            let mut open = vec![];
            for _ in 0..streams {
                open.push(stream(app, &token).await);
            }
            let before = db.store.move_reads();
            for n in 0..8 {
                let id = format!("wamid.{tag}{n}");
                assert_eq!(Meta::new(app, db).text(&id, CUSTOMER, &format!("order status {n}")).await.status(), 200);
            }
            // Five moves each (canonicalized → executed), every stream all of them, in order.
            let mut seen = vec![];
            for response in &mut open {
                let ids: Vec<i64> = read_events(response, 40).await.iter().map(|(id, _)| *id).collect();
                seen.push(ids);
            }
            assert!(seen.iter().all(|ids| ids.len() == 40 && ids == &seen[0]), "every stream saw every move");
            db.store.move_reads() - before
        }
    };
    let one = reads_with(1, "ONE").await;
    let thirty = reads_with(30, "MANY").await;
    eprintln!("moves read: {one} with one stream, {thirty} with thirty");
    assert!(thirty <= 2 * one + 10, "30 streams read the moves {thirty} times, one stream {one} times");
    app.stop().await.expect("stop");
}
