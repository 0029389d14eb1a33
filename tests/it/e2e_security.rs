//! The security gates over HTTP: bad API tokens and bad step-up tokens, each refused with the
//! right status; tenant isolation; single use of a step-up token, concurrent uses included; the
//! step-up flow end to end; rate limits.

use std::path::PathBuf;

use chatgate::config::{Config, IssuerConfig, Rate};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::StatusCode;
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::helpers::{ADMIN, CUSTOMER, Meta, TestApp, TestDb, on_both_backends, spawn_app_with, tenant};

on_both_backends!(
    bad_api_tokens_are_refused_each_with_its_status,
    bad_step_up_tokens_are_refused_each_with_its_status,
    a_step_up_token_is_used_once_even_concurrently,
    close_account_waits_for_step_up_and_moves_on_once,
    the_step_up_link_opens_a_page_that_takes_the_proof_once,
    inbound_commands_are_rate_limited_per_actor,
    api_clients_are_rate_limited_with_retry_after,
    a_nul_character_is_refused_not_a_failure,
);

fn key_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/keys").join(name)
}

fn pem(name: &str) -> Vec<u8> {
    std::fs::read(key_file(name)).expect("fixture key")
}

fn issuer(iss: &str, algorithm: &str) -> IssuerConfig {
    IssuerConfig {
        issuer: iss.into(),
        algorithms: vec![algorithm.into()],
        secret: None,
        public_key_file: None,
        jwks_file: None,
        signing_key_file: None,
    }
}

/// The shipped configuration plus issuers for every key family the tests sign with.
fn with_test_issuers(db: &TestDb) -> Config {
    let mut config = db.config.clone();
    let issuers = &mut config.auth.issuers;
    issuers.insert(
        "rsa".into(),
        IssuerConfig { public_key_file: Some(key_file("rsa_public.pem")), ..issuer("test-rsa", "RS256") },
    );
    issuers.insert(
        "ec".into(),
        IssuerConfig { public_key_file: Some(key_file("ec_public.pem")), ..issuer("test-ec", "ES256") },
    );
    issuers.insert(
        "ed".into(),
        IssuerConfig { public_key_file: Some(key_file("ed_public.pem")), ..issuer("test-ed", "EdDSA") },
    );
    issuers
        .insert("jwks".into(), IssuerConfig { jwks_file: Some(key_file("jwks.json")), ..issuer("test-jwks", "RS256") });
    config
}

fn now() -> i64 {
    OffsetDateTime::now_utc().unix_timestamp()
}

/// Valid API claims for the demo tenant, with `changes` applied.
fn api_claims(iss: &str, changes: Value) -> Value {
    let mut claims = json!({
        "iss": iss, "aud": "chatgate", "sub": "ops-1", "tenant": "demo",
        "scope": "commands:read stepup:verify", "iat": now(), "exp": now() + 600,
    });
    if let (Some(map), Value::Object(changes)) = (claims.as_object_mut(), changes) {
        for (k, v) in changes {
            if v.is_null() {
                map.remove(&k);
            } else {
                map.insert(k, v);
            }
        }
    }
    claims
}

/// A token signed by hand with the demo issuer's key for `tenant`, whoever serves it.
pub(crate) fn token_for_tenant(config: &Config, tenant: &str, scope: &str) -> String {
    hs256(&demo_secret(config), &api_claims("chatgate-demo", json!({"tenant": tenant, "scope": scope})))
}

/// A token of the demo issuer for the person `sub` of the demo tenant, with `scope`.
pub(crate) fn token_as(config: &Config, sub: &str, scope: &str) -> String {
    hs256(&demo_secret(config), &api_claims("chatgate-demo", json!({"sub": sub, "scope": scope})))
}

fn demo_secret(config: &Config) -> Vec<u8> {
    config.auth.issuers["demo"].secret.as_ref().expect("demo secret").expose().as_bytes().to_vec()
}

fn hs256(secret: &[u8], claims: &Value) -> String {
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &EncodingKey::from_secret(secret)).expect("sign")
}

fn signed(algorithm: Algorithm, key: EncodingKey, kid: Option<&str>, claims: &Value) -> String {
    let mut header = Header::new(algorithm);
    header.kid = kid.map(str::to_owned);
    jsonwebtoken::encode(&header, claims, &key).expect("sign")
}

fn b64(value: &Value) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
}

/// A command of the admin's, confirmed, waiting for step-up: (id, idempotency key).
pub(crate) async fn awaiting_step_up(db: &TestDb, app: &TestApp, order: &str) -> (Uuid, String) {
    let meta = Meta::new(app, db);
    let asked = format!("wamid.S-{order}");
    assert_eq!(meta.text(&asked, ADMIN, &format!("close account {order}")).await.status(), 200);
    let (id, key, code) = crate::helpers::confirmation_of(db, &asked).await;
    assert_eq!(meta.text(&format!("wamid.Y-{order}"), ADMIN, &format!("YES {code}")).await.status(), 200);
    let command = db.store.commands().get(&tenant("demo"), id).await.expect("read").expect("command");
    assert_eq!(command.lifecycle.state.as_str(), "authz_pending");
    assert_eq!(command.reason_code.as_deref(), Some("step_up_required"));
    (id, key)
}

async fn get_status(app: &TestApp, id: Uuid, token: Option<&str>) -> reqwest::Response {
    let mut request = app.client.get(app.url(&format!("/v1/commands/{id}")));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.expect("request")
}

async fn bad_api_tokens_are_refused_each_with_its_status(db: &TestDb) {
    let config = with_test_issuers(db);
    let app = spawn_app_with(db, config.clone()).await;
    let (id, _) = awaiting_step_up(db, &app, "1").await;
    let secret = demo_secret(&config);
    let good = api_claims("chatgate-demo", json!({}));
    let header_none = json!({"alg": "none", "typ": "JWT"});

    // The RSA issuer accepts RS256 only: an HS256 token "signed" with its public key is refused.
    let confusion = hs256(&pem("rsa_public.pem"), &api_claims("test-rsa", json!({})));
    let tampered = {
        let token = hs256(&secret, &good);
        let parts: Vec<&str> = token.split('.').collect();
        format!("{}.{}.{}", parts[0], b64(&api_claims("chatgate-demo", json!({"tenant": "other"}))), parts[2])
    };
    let cases: Vec<(&str, Option<String>, StatusCode)> = vec![
        ("valid HS256", Some(hs256(&secret, &good)), StatusCode::OK),
        (
            "valid RS256",
            Some(signed(
                Algorithm::RS256,
                EncodingKey::from_rsa_pem(&pem("rsa_private.pem")).expect("rsa"),
                None,
                &api_claims("test-rsa", json!({})),
            )),
            StatusCode::OK,
        ),
        (
            "valid ES256",
            Some(signed(
                Algorithm::ES256,
                EncodingKey::from_ec_pem(&pem("ec_private.pem")).expect("ec"),
                None,
                &api_claims("test-ec", json!({})),
            )),
            StatusCode::OK,
        ),
        (
            "valid EdDSA",
            Some(signed(
                Algorithm::EdDSA,
                EncodingKey::from_ed_pem(&pem("ed_private.pem")).expect("ed"),
                None,
                &api_claims("test-ed", json!({})),
            )),
            StatusCode::OK,
        ),
        (
            "valid RS256 from a JWKS",
            Some(signed(
                Algorithm::RS256,
                EncodingKey::from_rsa_pem(&pem("rsa_private.pem")).expect("rsa"),
                Some("test-rsa"),
                &api_claims("test-jwks", json!({})),
            )),
            StatusCode::OK,
        ),
        ("no token", None, StatusCode::UNAUTHORIZED),
        ("alg none", Some(format!("{}.{}.", b64(&header_none), b64(&good))), StatusCode::UNAUTHORIZED),
        ("HS256 signed with the RSA public key", Some(confusion), StatusCode::UNAUTHORIZED),
        (
            "expired",
            Some(hs256(&secret, &api_claims("chatgate-demo", json!({"exp": now() - 120})))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "not yet valid",
            Some(hs256(&secret, &api_claims("chatgate-demo", json!({"nbf": now() + 600})))),
            StatusCode::UNAUTHORIZED,
        ),
        ("wrong issuer", Some(hs256(&secret, &api_claims("someone-else", json!({})))), StatusCode::UNAUTHORIZED),
        (
            "wrong audience",
            Some(hs256(&secret, &api_claims("chatgate-demo", json!({"aud": "another-api"})))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "signed with another secret",
            Some(hs256(b"another-secret-of-32-bytes-length", &good)),
            StatusCode::UNAUTHORIZED,
        ),
        ("tampered payload", Some(tampered), StatusCode::UNAUTHORIZED),
        (
            "no expiry",
            Some(hs256(&secret, &api_claims("chatgate-demo", json!({"exp": null})))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "missing scope",
            Some(hs256(&secret, &api_claims("chatgate-demo", json!({"scope": "agents:write"})))),
            StatusCode::FORBIDDEN,
        ),
        (
            "scope as an scp array",
            Some(hs256(&secret, &api_claims("chatgate-demo", json!({"scope": null, "scp": ["commands:read"]})))),
            StatusCode::OK,
        ),
        (
            "another tenant's command",
            Some(hs256(&secret, &api_claims("chatgate-demo", json!({"tenant": "other"})))),
            StatusCode::NOT_FOUND,
        ),
        ("garbage", Some("not.a.token".into()), StatusCode::UNAUTHORIZED),
    ];
    for (name, token, expected) in cases {
        let response = get_status(&app, id, token.as_deref()).await;
        assert_eq!(response.status(), expected, "{name}");
        let challenge = response.headers().get("www-authenticate").and_then(|v| v.to_str().ok()).map(str::to_owned);
        match expected {
            StatusCode::UNAUTHORIZED => assert!(
                challenge.as_deref().is_some_and(|c| c.starts_with("Bearer realm=\"chatgate\"")),
                "{name}: {challenge:?}"
            ),
            StatusCode::FORBIDDEN => {
                assert!(challenge.as_deref().is_some_and(|c| c.contains("insufficient_scope")), "{name}")
            }
            _ => {}
        }
        let body: Value = response.json().await.expect("json body");
        if expected == StatusCode::OK {
            assert_eq!(body["command_id"], id.to_string(), "{name}");
        } else {
            assert_eq!(body["status"], expected.as_u16(), "{name}: a problem document");
        }
    }
    app.stop().await.expect("stop");
}

/// Valid step-up claims for `id` by the admin, with `changes` applied.
fn step_up_claims(id: Uuid, key: &str, changes: Value) -> Value {
    let mut claims = json!({
        "iss": "chatgate-demo-stepup", "aud": "chatgate-stepup", "sub": ADMIN, "command_id": id,
        "idempotency_key": key, "acr": "urn:chatgate:acr:mfa", "jti": Uuid::now_v7().to_string(),
        "iat": now(), "exp": now() + 300, "auth_time": now() - 10,
    });
    if let (Some(map), Value::Object(changes)) = (claims.as_object_mut(), changes) {
        map.extend(changes);
    }
    claims
}

/// A valid step-up proof of `sub` for command `id` with idempotency key `key`.
pub(crate) fn step_up_token_of(config: &Config, sub: &str, id: Uuid, key: &str) -> String {
    hs256(&step_up_secret(config), &step_up_claims(id, key, json!({"sub": sub})))
}

fn step_up_secret(config: &Config) -> Vec<u8> {
    config.stepup.issuer.secret.as_ref().expect("step-up secret").expose().as_bytes().to_vec()
}

fn operator_token(config: &Config, sub: &str) -> String {
    hs256(&demo_secret(config), &api_claims("chatgate-demo", json!({"sub": sub})))
}

async fn post_step_up(app: &TestApp, operator: &str, id: Uuid, token: &str) -> reqwest::Response {
    app.client
        .post(app.url(&format!("/v1/commands/{id}/step-up")))
        .bearer_auth(operator)
        .json(&json!({"token": token}))
        .send()
        .await
        .expect("request")
}

async fn bad_step_up_tokens_are_refused_each_with_its_status(db: &TestDb) {
    let config = db.config.clone();
    let app = spawn_app_with(db, config.clone()).await;
    let (id, key) = awaiting_step_up(db, &app, "2").await;
    let (other_id, other_key) = awaiting_step_up(db, &app, "3").await;
    let operator = operator_token(&config, "ops-step-up");
    let secret = step_up_secret(&config);
    let sign = |claims: Value| hs256(&secret, &claims);
    let cases: Vec<(&str, String, StatusCode, &str)> = vec![
        (
            "for another command",
            sign(step_up_claims(other_id, &key, json!({}))),
            StatusCode::FORBIDDEN,
            "step_up_mismatch",
        ),
        (
            "for another actor",
            sign(step_up_claims(id, &key, json!({"sub": CUSTOMER}))),
            StatusCode::FORBIDDEN,
            "step_up_mismatch",
        ),
        (
            "for another idempotency key",
            sign(step_up_claims(id, &other_key, json!({}))),
            StatusCode::FORBIDDEN,
            "step_up_mismatch",
        ),
        (
            "a too low acr",
            sign(step_up_claims(id, &key, json!({"acr": "urn:chatgate:acr:password"}))),
            StatusCode::UNAUTHORIZED,
            "insufficient_user_authentication",
        ),
        (
            "a too old auth_time",
            sign(step_up_claims(id, &key, json!({"auth_time": now() - 3600}))),
            StatusCode::UNAUTHORIZED,
            "insufficient_user_authentication",
        ),
        (
            "living over 10 minutes",
            sign(step_up_claims(id, &key, json!({"exp": now() + 3600}))),
            StatusCode::UNAUTHORIZED,
            "invalid_step_up_token",
        ),
        (
            "expired",
            sign(step_up_claims(id, &key, json!({"iat": now() - 900, "exp": now() - 400}))),
            StatusCode::UNAUTHORIZED,
            "invalid_step_up_token",
        ),
        (
            "another audience",
            sign(step_up_claims(id, &key, json!({"aud": "chatgate"}))),
            StatusCode::UNAUTHORIZED,
            "invalid_step_up_token",
        ),
        ("an API token instead", operator_token(&config, "x"), StatusCode::UNAUTHORIZED, "invalid_step_up_token"),
        (
            "signed with the API secret",
            hs256(&demo_secret(&config), &step_up_claims(id, &key, json!({}))),
            StatusCode::UNAUTHORIZED,
            "invalid_step_up_token",
        ),
    ];
    for (name, token, expected, code) in cases {
        let response = post_step_up(&app, &operator, id, &token).await;
        assert_eq!(response.status(), expected, "{name}");
        if expected == StatusCode::UNAUTHORIZED {
            let challenge = response.headers()["www-authenticate"].to_str().expect("ascii").to_owned();
            assert!(challenge.contains("error=\"insufficient_user_authentication\""), "{name}: RFC 9470: {challenge}");
            assert!(
                challenge.contains("acr_values=\"urn:chatgate:acr:mfa\"") && challenge.contains("max_age=300"),
                "{challenge}"
            );
        }
        let body: Value = response.json().await.expect("problem");
        assert_eq!(body["code"], code, "{name}");
    }
    assert_eq!(
        db.store.commands().get(&tenant("demo"), id).await.expect("read").expect("command").lifecycle.state.as_str(),
        "authz_pending",
        "nothing moved"
    );

    // The step-up endpoint needs its own scope, and another tenant's operator sees nothing.
    let reader = hs256(&demo_secret(&config), &api_claims("chatgate-demo", json!({"scope": "commands:read"})));
    assert_eq!(
        post_step_up(&app, &reader, id, &sign(step_up_claims(id, &key, json!({})))).await.status(),
        StatusCode::FORBIDDEN
    );
    let stranger = hs256(&demo_secret(&config), &api_claims("chatgate-demo", json!({"tenant": "other"})));
    assert_eq!(
        post_step_up(&app, &stranger, id, &sign(step_up_claims(id, &key, json!({})))).await.status(),
        StatusCode::NOT_FOUND
    );
    app.stop().await.expect("stop");
}

async fn a_step_up_token_is_used_once_even_concurrently(db: &TestDb) {
    let config = db.config.clone();
    let app = spawn_app_with(db, config.clone()).await;
    let (id, key) = awaiting_step_up(db, &app, "4").await;
    let operator = operator_token(&config, "ops-once");
    let token = hs256(&step_up_secret(&config), &step_up_claims(id, &key, json!({})));
    let (a, b) = tokio::join!(post_step_up(&app, &operator, id, &token), post_step_up(&app, &operator, id, &token));
    let mut statuses = [a.status(), b.status()];
    statuses.sort();
    assert_eq!(statuses, [StatusCode::OK, StatusCode::CONFLICT], "exactly one use succeeds");
    // Used: refused as such, not as "not waiting".
    let again = post_step_up(&app, &operator, id, &token).await;
    assert_eq!(again.status(), StatusCode::CONFLICT);
    assert_eq!(again.json::<Value>().await.expect("problem")["code"], "step_up_token_used");
    // Proved once: one approval opened (the shipped policy has a supervisor approve it too).
    assert_eq!(db.count("SELECT COUNT(*) FROM approvals WHERE command_id = $1", &id.to_string()).await, 1);
    app.stop().await.expect("stop");
}

/// The step-up link the one step-up reply in the outbox carries.
pub(crate) async fn step_up_link(db: &TestDb) -> String {
    let outbox = db.outbox().await;
    let link = outbox.iter().find(|(_, p)| p["template"] == "step_up_required").map(|(_, p)| p["vars"]["link"].clone());
    link.expect("a step-up reply").as_str().expect("link").to_owned()
}

async fn close_account_waits_for_step_up_and_moves_on_once(db: &TestDb) {
    let config = db.config.clone();
    let app = spawn_app_with(db, config.clone()).await;
    let (id, key) = awaiting_step_up(db, &app, "77").await;
    // The admin was sent the step-up link for this command.
    let link = step_up_link(db).await;
    assert!(link.contains(&id.to_string()) && link.starts_with("http://127.0.0.1:8080/step-up?command="), "{link}");

    // The development issuer's token (what `chatgate stepup mint` prints) is accepted.
    let settings = chatgate::service::Settings::with_shipped_registry(config.clone()).expect("settings");
    let token = settings.security.stepup.mint(ADMIN, id, &key, OffsetDateTime::now_utc()).expect("mint");
    let operator = operator_token(&config, "ops-77");
    let response = post_step_up(&app, &operator, id, &token).await;
    assert_eq!(response.status(), StatusCode::OK);
    // Proved: and the shipped policy has a supervisor approve closing an account too.
    assert_eq!(response.json::<Value>().await.expect("json")["state"], "authz_pending", "waiting for approval");
    let evidence = db.store.evidence().for_command("demo", id).await.expect("evidence");
    let requested = evidence.iter().rfind(|a| a.kind == "approval.requested").expect("approval.requested");
    assert_eq!(requested.body["decision"]["step_up_proof"]["acr"], "urn:chatgate:acr:mfa");
    assert_eq!(requested.body["decision"]["approval"]["rules"], json!(["closing an account"]));
    let supervisor = token_as(&config, "15550000003", "approvals:read approvals:decide");
    let listed = app.client.get(app.url("/v1/approvals")).bearer_auth(&supervisor).send().await.expect("list");
    let listed: Value = listed.json().await.expect("json");
    let approval_id = listed["approvals"][0]["approval_id"].as_str().expect("one pending").to_owned();
    let decision = app.client.post(app.url(&format!("/v1/approvals/{approval_id}/decision")));
    let decided = decision.bearer_auth(&supervisor).json(&json!({"decision": "approve"})).send().await.expect("decide");
    assert_eq!(decided.json::<Value>().await.expect("json")["outcome"], "approved", "authorized and dispatched");

    // A second proof moves nothing: the command moved on once.
    let second = settings.security.stepup.mint(ADMIN, id, &key, OffsetDateTime::now_utc()).expect("mint");
    let response = post_step_up(&app, &operator, id, &second).await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    assert_eq!(response.json::<Value>().await.expect("problem")["code"], "not_awaiting_step_up");
    // The demo executor (builtin:echo) ran it, once.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !db
        .store
        .commands()
        .get(&tenant("demo"), id)
        .await
        .expect("read")
        .expect("command")
        .lifecycle
        .state
        .is_terminal()
    {
        assert!(std::time::Instant::now() < deadline, "the command did not finish");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let moves: Vec<String> =
        db.store.commands().transitions(id).await.expect("moves").iter().map(|m| m.event.to_string()).collect();
    assert_eq!(
        moves,
        ["canonicalize", "request_confirmation", "confirm", "submit_for_authorization", "allow", "start", "succeed"]
    );

    // The same request from the customer is refused before anyone is asked to confirm.
    let meta = Meta::new(&app, db);
    assert_eq!(meta.text("wamid.C77", CUSTOMER, "close account 77").await.status(), 200);
    let refused =
        db.count("SELECT COUNT(*) FROM commands WHERE state = $1 AND reason_code = 'missing_scope'", "rejected").await;
    assert_eq!(refused, 1);
    assert_eq!(db.count("SELECT COUNT(*) FROM confirmations WHERE actor_id = $1", CUSTOMER).await, 0);
    app.stop().await.expect("stop");
}

async fn the_step_up_link_opens_a_page_that_takes_the_proof_once(db: &TestDb) {
    let config = db.config.clone();
    let app = spawn_app_with(db, config.clone()).await;
    let (id, key) = awaiting_step_up(db, &app, "78").await;
    let link = step_up_link(db).await;
    let query = link.split_once('?').expect("a query").1.to_owned();
    let nonce = query.split("nonce=").nth(1).expect("a nonce").to_owned();
    // The link opens the page: which request, and the form.
    let page = app.client.get(app.url(&format!("/step-up?{query}"))).send().await.expect("page");
    assert_eq!(page.status(), StatusCode::OK);
    assert!(page.headers()["content-type"].to_str().expect("type").starts_with("text/html"));
    let html = page.text().await.expect("html");
    let reference = chatgate::domain::command::ShortRef::of(id).to_string();
    assert!(html.contains("close_account") && html.contains(&reference) && html.contains(r#"name="token""#), "{html}");
    // Another nonce: nothing to prove, and nothing said about the command; a browser gets a page,
    // any other client a problem document.
    let wrong = app.url(&format!("/step-up?command={id}&nonce=not-the-one"));
    let browser = app.client.get(&wrong).header("accept", "text/html,*/*;q=0.8").send().await.expect("page");
    assert_eq!(browser.status(), StatusCode::NOT_FOUND);
    assert!(browser.headers()["content-type"].to_str().expect("type").starts_with("text/html"));
    assert!(!browser.text().await.expect("html").contains(&reference));
    let client = app.client.get(&wrong).send().await.expect("problem");
    assert_eq!(client.status(), StatusCode::NOT_FOUND);
    assert_eq!(client.headers()["content-type"], "application/problem+json");
    let post = |token: String, nonce: String| {
        let form = [("command", id.to_string()), ("nonce", nonce), ("token", token)];
        app.client.post(app.url("/step-up")).form(&form).send()
    };
    // A token that is not a proof for this person and request is refused, and changes nothing.
    let forged = hs256(&step_up_secret(&config), &step_up_claims(id, &key, json!({"sub": CUSTOMER})));
    assert_eq!(post(forged, nonce.clone()).await.expect("post").status(), StatusCode::UNAUTHORIZED);
    let settings = chatgate::service::Settings::with_shipped_registry(config.clone()).expect("settings");
    let token = settings.security.stepup.mint(ADMIN, id, &key, OffsetDateTime::now_utc()).expect("mint");
    assert_eq!(post(token.clone(), "not-the-one".into()).await.expect("post").status(), StatusCode::NOT_FOUND);
    assert_eq!(
        db.store.commands().get(&tenant("demo"), id).await.expect("read").expect("command").lifecycle.state.as_str(),
        "authz_pending"
    );
    // The proof: accepted once; the command moves on, and the link has nothing more to ask.
    let done = post(token.clone(), nonce.clone()).await.expect("post");
    assert_eq!(done.status(), StatusCode::OK);
    assert!(done.text().await.expect("html").contains("return to the chat"));
    let command = db.store.commands().get(&tenant("demo"), id).await.expect("read").expect("command");
    assert_eq!(command.reason_code.as_deref(), Some("approval_required"), "no longer waiting for the proof");
    assert_eq!(post(token, nonce).await.expect("post").status(), StatusCode::NOT_FOUND);
    // Proved once: one approval opened (the shipped policy has a supervisor approve it too).
    assert_eq!(db.count("SELECT COUNT(*) FROM approvals WHERE command_id = $1", &id.to_string()).await, 1);
    app.stop().await.expect("stop");
}

async fn inbound_commands_are_rate_limited_per_actor(db: &TestDb) {
    let mut config = db.config.clone();
    config.rate_limits.actor = Rate { per_minute: 2, burst: 2 };
    let app = spawn_app_with(db, config).await;
    let meta = Meta::new(&app, db);
    for (i, order) in ["1", "2", "3"].iter().enumerate() {
        // Always 200: the provider must not retry a message that was received and kept.
        assert_eq!(meta.text(&format!("wamid.RL{i}"), CUSTOMER, &format!("order status {order}")).await.status(), 200);
    }
    assert_eq!(db.count("SELECT COUNT(*) FROM inbound_messages WHERE status = $1", "rate_limited").await, 1);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM commands WHERE actor_id = $1", CUSTOMER).await,
        2,
        "the third is not acted on"
    );
    assert_eq!(meta.text("wamid.RL-admin", ADMIN, "order status 9").await.status(), 200);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM commands WHERE actor_id = $1", ADMIN).await,
        1,
        "other actors are unaffected"
    );
    app.stop().await.expect("stop");
}

async fn api_clients_are_rate_limited_with_retry_after(db: &TestDb) {
    let mut config = db.config.clone();
    config.rate_limits.api_client = Rate { per_minute: 2, burst: 2 };
    let app = spawn_app_with(db, config.clone()).await;
    let id = Uuid::now_v7();
    let first = operator_token(&config, "client-a");
    for _ in 0..2 {
        assert_eq!(get_status(&app, id, Some(&first)).await.status(), StatusCode::NOT_FOUND);
    }
    let limited = get_status(&app, id, Some(&first)).await;
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after: u64 = limited.headers()["retry-after"].to_str().expect("ascii").parse().expect("seconds");
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    assert_eq!(limited.json::<Value>().await.expect("problem")["code"], "rate_limited");
    let other = operator_token(&config, "client-b");
    assert_eq!(
        get_status(&app, id, Some(&other)).await.status(),
        StatusCode::NOT_FOUND,
        "another client is unaffected"
    );
    app.stop().await.expect("stop");
}

/// Issue 27.10b: a NUL character in a path or a filter is refused 400 on both backends
/// (PostgreSQL refuses it in text and answered 500; SQLite answered an empty list), the console's
/// filters too; and one in a body field PostgreSQL cannot store is a 400, never a 500.
async fn a_nul_character_is_refused_not_a_failure(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let token = crate::helpers::api_token(db, "demo", "ops-1", "commands:read recovery:write");
    for path in [
        "/v1/commands?actor=%00",
        "/v1/commands?command=refund%00",
        "/v1/traces/%00",
        "/v1/traces/abc%00def",
        "/v1/commands/%00/evidence",
        "/console/commands?actor=%00",
    ] {
        let response = app.client.get(app.url(path)).bearer_auth(&token).send().await.expect("request");
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{path}");
        assert_eq!(response.headers()["content-type"], "application/problem+json", "{path}");
    }
    let id = crate::conformance::drive(
        db,
        crate::helpers::refund("demo", "5", "1.00", "m-nul"),
        crate::conformance::path_to(chatgate::domain::lifecycle::State::ConfirmationRequired),
    )
    .await;
    let body = json!({"action": "cancel", "reason": "because\u{0}"});
    let recovery = app.url(&format!("/v1/commands/{id}/recovery"));
    let response = app.client.post(recovery).bearer_auth(&token).json(&body).send().await.expect("request");
    assert!(!response.status().is_server_error(), "{}", response.status());
    app.stop().await.expect("stop");
}
