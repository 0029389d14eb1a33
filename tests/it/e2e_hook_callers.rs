//! The hook bridge's two families of callers, replaying each family's documented calls and
//! checking what each caller reads: Bloodbank's hookd bridge callers (delorenj/bloodbank
//! `hookd/bridge.py`: `text`, `[Command] action= id= from= priority=`, `sessionKey:
//! "agent:<name>:main"`, `{status, queued, command_id, routing_key, outbox_id}`, 204 for an empty
//! text) and OpenClaw's as its callers were written against (`docs/automation/webhook.md` at
//! 013c24e7: 200 for a wake, 202 for an agent run, the example payload with `"channel": "last"`),
//! each answered 202 for an accepted run as hookd's bridge answers (Bloodbank MIG-1 step 4). Newest
//! OpenClaw's 200 is `hooks.accepted_status = 200`: `e2e_openclaw_hooks`.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::e2e_hooks::{bearer, call};
use crate::helpers::{TestApp, TestDb, on_both_backends, spawn_app_with, tenant};

on_both_backends!(hookd_bridge_callers_work_unchanged, openclaw_callers_work_unchanged);

/// A gateway whose bridge may call `orders` (the default) and `shipping`.
async fn two_agents(db: &TestDb) -> TestApp {
    let mut config = db.config.clone();
    config.outbound.poll_interval_ms = 20;
    let mut shipping = config.executors["orders"].clone();
    shipping.url = "builtin:echo".into();
    config.executors.insert("shipping".into(), shipping);
    config.hooks.agents = vec!["orders".into(), "shipping".into()];
    spawn_app_with(db, config).await
}

async fn commands(db: &TestDb) -> i64 {
    db.count("SELECT COUNT(*) FROM commands WHERE actor_id = $1", "hookd-bridge").await
}

async fn command(db: &TestDb, id: &Value) -> chatgate::store::StoredCommand {
    let id = id.as_str().expect("a command id").parse().expect("a uuid");
    db.store.commands().get(&tenant("demo"), id).await.expect("read").expect("the command")
}

/// What hookd's callers read, as its bridge answers it.
fn assert_hookd_answer(status: StatusCode, body: &Value, routing_key: &str) {
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!((&body["status"], &body["queued"]), (&json!("accepted"), &json!(true)), "{body}");
    assert_eq!(body["routing_key"], routing_key, "{body}");
    assert!(body["command_id"].as_str().is_some_and(|id| id.parse::<uuid::Uuid>().is_ok()), "{body}");
    assert!(body["outbox_id"].as_str().is_some_and(|id| id.parse::<uuid::Uuid>().is_ok()), "{body}");
}

async fn hookd_bridge_callers_work_unchanged(db: &TestDb) {
    let app = two_agents(db).await;
    // A structured command for the agent the session key names, with a JSON payload after it.
    let text = "[Command] action=Ship-Order id=GOD-5 from=cack priority=high\n{\"order_id\": \"A-7\"}";
    let hook = json!({"text": text, "sessionKey": "agent:shipping:main"});
    let (status, body, location) = call(&app, "/hooks/agent", hook.clone(), bearer(), None).await;
    assert_hookd_answer(status, &body, "command.shipping.ship_order");
    assert_eq!(location, body["status_url"].as_str().map(str::to_owned));
    let shipped = command(db, &body["command_id"]).await;
    assert_eq!(shipped.envelope.intent.action.as_str(), "ship_order");
    assert_eq!(shipped.envelope.args["order_id"], "A-7");
    assert_eq!(shipped.envelope.idempotency_key.as_str(), "GOD-5", "the caller's id is the key");
    assert_eq!(shipped.envelope.conversation_id.as_str(), "hooks:agent:shipping:main");
    let dispatch = db.outbox().await.into_iter().filter(|(kind, _)| kind == "dispatch").count();
    assert!(dispatch >= 1, "the dispatch row hookd's outbox_id names is stored");
    // The same command again (the caller retried): the same command, not a second one.
    let (status, again, _) = call(&app, "/hooks/agent", hook, bearer(), None).await;
    assert_eq!((status, &again["command_id"]), (StatusCode::ACCEPTED, &body["command_id"]));

    // Plain text: `hook_dispatch`, the text as `raw_text`; an agent this gateway does not know
    // gets the default agent, as OpenClaw does.
    let plain = json!({"text": "Check the RabbitMQ logs for auth failures", "sessionKey": "agent:lenoon:main"});
    let (status, body, _) = call(&app, "/hooks/agent", plain, bearer(), None).await;
    assert_hookd_answer(status, &body, "command.orders.hook_dispatch");
    let plain = command(db, &body["command_id"]).await;
    assert_eq!(plain.envelope.args["raw_text"], "Check the RabbitMQ logs for auth failures");

    // An empty text: 204, nothing stored.
    let before = commands(db).await;
    for empty in ["", "   \n"] {
        let response = app
            .client
            .post(app.url("/hooks/agent"))
            .bearer_auth("demo-hooks-token-change-me")
            .json(&json!({"text": empty, "sessionKey": "agent:orders:main"}))
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), StatusCode::NO_CONTENT);
        assert_eq!(response.bytes().await.expect("body").len(), 0);
    }
    // An empty text is no excuse for a bad call: its fields are checked first. A replay key
    // chatgate could not use as it is (a space in it) is kept as its digest, as OpenClaw keeps any.
    let odd_key = app
        .client
        .post(app.url("/hooks/agent"))
        .bearer_auth("demo-hooks-token-change-me")
        .header("idempotency-key", "has space")
        .json(&json!({"text": "", "sessionKey": "agent:orders:main"}))
        .send()
        .await
        .expect("request");
    assert_eq!(odd_key.status(), StatusCode::NO_CONTENT);
    let bad_field = json!({"text": "", "deliver": "yes"});
    assert_eq!(call(&app, "/hooks/agent", bad_field, bearer(), None).await.0, StatusCode::BAD_REQUEST);
    assert_eq!(commands(db).await, before, "an empty hook stores nothing");

    // hookd's callers hand the command on: it reaches the agent and is done.
    let deadline = Instant::now() + Duration::from_secs(20);
    while db
        .store
        .commands()
        .get(&tenant("demo"), shipped.envelope.command_id)
        .await
        .expect("read")
        .map(|c| c.lifecycle.state.to_string())
        != Some("executed".into())
    {
        assert!(Instant::now() < deadline, "the hookd command did not execute");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    app.stop().await.expect("stop");
}

async fn openclaw_callers_work_unchanged(db: &TestDb) {
    let app = two_agents(db).await;
    // A wake: 200 with `ok` and the mode (whether an identical one coalesces: e2e_openclaw_hooks).
    let wake = json!({"text": "New email received", "mode": "now"});
    let (status, body, _) = call(&app, "/hooks/wake", wake.clone(), bearer(), None).await;
    assert_eq!((status, &body["ok"], &body["mode"]), (StatusCode::OK, &json!(true), &json!("now")), "{body}");
    // With an Idempotency-Key, a retry is the same wake.
    let keyed: Vec<Value> = {
        let mut ids = vec![];
        for _ in 0..2 {
            let (status, body, _) = call(&app, "/hooks/wake", wake.clone(), bearer(), Some("wake-1")).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            ids.push(body["command_id"].clone());
        }
        ids
    };
    assert_eq!(keyed[0], keyed[1]);

    // An agent run: 202 with `ok` and `runId`; without an `agentId`, the default agent.
    let run = json!({"message": "Summarize inbox", "name": "Email"});
    let (status, body, _) = call(&app, "/hooks/agent", run, bearer(), None).await;
    assert_eq!((status, &body["ok"]), (StatusCode::ACCEPTED, &json!(true)), "{body}");
    assert_eq!(body["runId"], body["command_id"]);
    assert_eq!(body["routing_key"], "command.orders.run");
    let named = json!({"message": "Ship it", "agentId": "shipping"});
    let (_, body, _) = call(&app, "/hooks/agent", named, bearer(), None).await;
    assert_eq!(body["routing_key"], "command.shipping.run", "a known agentId is the agent");

    // The example payload of those docs, copied by callers: `"channel": "last"` is taken, and kept.
    let example = json!({"message": "Run this", "name": "Email", "sessionKey": "hook:email:msg-123",
        "wakeMode": "now", "deliver": true, "channel": "last", "to": "+15551234567",
        "model": "openai/gpt-5.2-mini", "thinking": "low", "timeoutSeconds": 120});
    let (status, body, _) = call(&app, "/hooks/agent", example, bearer(), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let kept = command(db, &body["command_id"]).await;
    assert_eq!((&kept.envelope.args["channel"], &kept.envelope.args["to"]), (&json!("last"), &json!("+15551234567")));
    let (status, body, _) =
        call(&app, "/hooks/agent", json!({"message": "m", "channel": "last"}), bearer(), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "`last` alone: {body}");

    // A mapped hook: 202 and the same body.
    let (status, body, _) = call(&app, "/hooks/order-shipped", json!({"order": {"id": "A-9"}}), bearer(), None).await;
    assert_eq!((status, &body["ok"], &body["status"]), (StatusCode::ACCEPTED, &json!(true), &json!("accepted")));

    // Refusals: a problem document that also carries OpenClaw's `ok: false` and `error`.
    let before = commands(db).await;
    let ghost = json!({"text": "New email received", "agentId": "ghost"});
    let (status, body, _) = call(&app, "/hooks/wake", ghost, bearer(), None).await;
    assert_eq!((status, &body["code"], &body["ok"]), (StatusCode::BAD_REQUEST, &json!("unknown_agent"), &json!(false)));
    assert!(body["error"].as_str().is_some_and(|e| e.contains("ghost")), "{body}");
    let (status, body, _) =
        call(&app, "/hooks/wake", json!({"text": "x", "agentId": "shipping"}), bearer(), None).await;
    assert_eq!(
        (status, &body["routing_key"]),
        (StatusCode::OK, &json!("command.shipping.wake")),
        "a known agent wakes"
    );
    let (status, body, _) =
        call(&app, "/hooks/agent", json!({"message": "m"}), Some(("authorization", "Bearer wrong".into())), None).await;
    assert_eq!((status, &body["ok"], &body["status"]), (StatusCode::UNAUTHORIZED, &json!(false), &json!(401)));
    assert!(body["error"].as_str().is_some_and(|e| !e.is_empty()) && body["type"].is_string(), "{body}");
    let (status, body, _) = call(&app, "/hooks/agent", json!({"message": 7}), bearer(), None).await;
    assert_eq!((status, &body["ok"], &body["code"]), (StatusCode::BAD_REQUEST, &json!(false), &json!("invalid_body")));
    assert_eq!(commands(db).await, before + 1, "only the known agent's wake was stored");
    app.stop().await.expect("stop");
}
