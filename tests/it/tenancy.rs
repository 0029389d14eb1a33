//! Issue 27.5: agents are the deployment's, shared by every tenant, so a tenant's operator cannot
//! pause them (it takes the deployment-level `agents:admin`), from the API, the console or the
//! chat; and a token for a tenant the gateway does not serve is refused everywhere.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{CUSTOMER, Meta, TestApp, TestDb, api_token, on_both_backends, settled, spawn_app_with};

on_both_backends!(another_tenants_operator_cannot_hold_this_tenants_commands);

async fn post(app: &TestApp, token: &str, path: &str) -> (StatusCode, Value) {
    let response = app.client.post(app.url(path)).bearer_auth(token).json(&json!({})).send().await.expect("post");
    (response.status(), response.json().await.unwrap_or(Value::Null))
}

async fn get(app: &TestApp, token: &str, path: &str) -> StatusCode {
    app.client.get(app.url(path)).bearer_auth(token).send().await.expect("get").status()
}

async fn another_tenants_operator_cannot_hold_this_tenants_commands(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    // The other tenant's operator, with every tenant-level scope there is.
    let theirs = api_token(db, "other", "ops-9", "commands:read recovery:write agents:read agents:write audit:read");
    for agent in ["orders", "gateway"] {
        let (status, body) = post(&app, &theirs, &format!("/v1/agents/{agent}/pause")).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{agent}: {body}");
        assert_eq!(body["required_scope"], "agents:admin");
    }
    assert_eq!(db.store.agents().get("orders").await.expect("agent").state.as_str(), "idle");
    // The console's form is refused alike (no session can change what its token cannot).
    let cookie = console_session(&app, &theirs).await;
    let form = app
        .client
        .post(app.url("/console/agents/orders/pause"))
        .header("cookie", format!("chatgate_session={cookie}"))
        .form(&[("csrf", "irrelevant")])
        .send()
        .await
        .expect("form");
    assert_ne!(form.status(), StatusCode::SEE_OTHER, "the console did not pause it");
    assert_eq!(db.store.agents().get("orders").await.expect("agent").state.as_str(), "idle");

    // Nor from the chat: the other tenant's operator asking on its own number is refused before
    // anyone is asked to confirm.
    use chatgate::channels::whatsapp::simulate;
    let meta = Meta::new(&app, db);
    let ask = simulate::notification(
        "100000000000009",
        vec![simulate::text("wamid.T0", "15550000009", "pause orders")],
        vec![],
    );
    assert_eq!(meta.post(&ask).await.status(), 200);
    let asked = crate::helpers::command_of_message(db, "wamid.T0").await;
    let command = db.store.commands().get(&crate::helpers::tenant("other"), asked).await.expect("read").expect("it");
    assert_eq!((command.lifecycle.state.as_str(), command.reason_code.as_deref()), ("rejected", Some("missing_scope")));

    // This tenant's commands go on.
    assert_eq!(meta.text("wamid.T1", CUSTOMER, "order status 4410").await.status(), 200);
    let id = crate::helpers::command_of_message(db, "wamid.T1").await;
    assert_eq!(settled(db, id).await, "executed");

    // The deployment's operator may.
    let deployment = api_token(db, "demo", "ops-1", "agents:admin");
    assert_eq!(post(&app, &deployment, "/v1/agents/orders/pause").await.0, StatusCode::OK);
    assert_eq!(post(&app, &deployment, "/v1/agents/orders/resume").await.0, StatusCode::OK);

    // A token naming a tenant this gateway does not serve is refused everywhere, even with every
    // scope (it is minted by hand: the development issuer refuses to mint one).
    let stranger = crate::e2e_security::token_for_tenant(&db.config, "nosuch", "agents:admin commands:read");
    for path in ["/v1/commands", "/v1/agents", "/v1/events", "/v1/audit/verify"] {
        assert_eq!(get(&app, &stranger, path).await, StatusCode::UNAUTHORIZED, "{path}");
    }
    let (status, body) = post(&app, &stranger, "/v1/agents/gateway/pause").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let sign_in = crate::helpers::console_sign_in(&app, &stranger, &[]).await;
    assert_eq!(sign_in.status(), StatusCode::UNAUTHORIZED);
    let minted = chatgate::service::security::mint::api_token(
        &crate::helpers::test_settings(db.config.clone()).security.authenticator,
        None,
        "nosuch",
        "ops",
        "commands:read",
        std::time::Duration::from_secs(60),
        time::OffsetDateTime::now_utc(),
    );
    assert!(minted.is_err_and(|e| e.contains("no tenant `nosuch`")));
    assert_eq!(db.store.agents().get("gateway").await.expect("agent").state.as_str(), "idle");
    app.stop().await.expect("stop");
}

/// A console session for `token` (its cookie's value).
async fn console_session(app: &TestApp, token: &str) -> String {
    let response = crate::helpers::console_sign_in(app, token, &[]).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let set = response.headers()["set-cookie"].to_str().expect("ascii").to_owned();
    cookie::Cookie::parse(set).expect("cookie").value().to_owned()
}
