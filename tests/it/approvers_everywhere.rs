//! Approvers asked where they are (issue #46, goal 3), on both backends: a supervisor whose
//! directory entry names Slack is asked in a Slack DM with Approve and Deny blocks, one on Telegram
//! with an inline keyboard, one with only a phone number by SMS with the words to reply (`APPROVE
//! <code>`); a tap on Telegram approves, and an SMS reply in words denies another request.

use std::time::Duration;

use chatgate::domain::registry::approvals::Vote;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::e2e_approvals::asked_and_confirmed;
use crate::fake_graph::{Answer, FakeGraph, FakeServer, sending_through};
use crate::helpers::{CUSTOMER, TestApp, TestDb, api_token, on_both_backends, settled, spawn_app_with, tenant};

on_both_backends!(supervisors_are_asked_on_slack_telegram_and_sms_and_decide_there);

const SLACK_SUPERVISOR: &str = "U0SUPER9";
const TELEGRAM_SUPERVISOR: i64 = 700000009;
const SMS_SUPERVISOR: &str = "+15559990009";

fn slack_answer(n: usize) -> Answer {
    let body = json!({"ok": true, "channel": "D0SUPER9", "ts": format!("1764150000.{n:06}"), "message": {}});
    Answer { status: 200, body, retry_after: None }
}

fn telegram_answer(n: usize) -> Answer {
    let message = json!({"message_id": 1000 + n, "chat": {"id": TELEGRAM_SUPERVISOR, "type": "private"}, "date": 0});
    Answer { status: 200, body: json!({"ok": true, "result": message}), retry_after: None }
}

struct Rig {
    app: TestApp,
    slack: FakeServer,
    telegram: FakeServer,
    twilio: FakeServer,
}

async fn rig(db: &TestDb) -> Rig {
    let (slack, telegram, twilio) = (
        FakeServer::start_with(slack_answer).await,
        FakeServer::start_with(telegram_answer).await,
        FakeServer::twilio().await,
    );
    let mut config = sending_through(&db.config, &FakeGraph::start().await);
    config.slack.api_base = format!("{}/api", slack.url);
    config.slack.bot_token = chatgate::config::Secret::new("xoxb-test");
    config.telegram.api_base = telegram.url.clone();
    config.telegram.bot_token = chatgate::config::Secret::new("123456:test");
    config.server.public_base_url = crate::e2e_twilio::PUBLIC_BASE.into();
    config.twilio.auth_token = chatgate::config::Secret::new(crate::e2e_twilio::AUTH_TOKEN);
    config.twilio.account_sid = crate::e2e_twilio::ACCOUNT.into();
    config.twilio.api_base = twilio.url.clone();
    let app = spawn_app_with(db, config).await;
    let token = api_token(db, "demo", "ops-1", "directory:write");
    for (id, addresses) in [
        ("s-slack", json!({"slack": SLACK_SUPERVISOR})),
        ("s-telegram", json!({"telegram": TELEGRAM_SUPERVISOR.to_string()})),
        ("s-sms", json!({"phone": SMS_SUPERVISOR})),
    ] {
        let person = json!({"id": id, "name": id, "roles": ["supervisor"], "addresses": addresses});
        let url = app.url("/v1/directory/actors");
        let made = app.client.post(url).bearer_auth(&token).json(&person).send().await.expect("a supervisor");
        assert_eq!(made.status(), StatusCode::CREATED, "{:?}", made.text().await);
    }
    Rig { app, slack, telegram, twilio }
}

/// The first request `server` took that `wanted` accepts (20 s at most).
async fn sent(server: &FakeServer, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let requests = server.requests();
        if let Some(found) = requests.iter().find(|r| wanted(&r.body)) {
            return found.body.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no {what}: {:?}",
            requests.iter().map(|r| &r.raw).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The SMS sent to `to`, as its form.
async fn sms_to(twilio: &FakeServer, to: &str, containing: &str) -> std::collections::BTreeMap<String, String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let forms: Vec<std::collections::BTreeMap<String, String>> =
            twilio.requests().iter().map(|r| form_urlencoded::parse(r.raw.as_bytes()).into_owned().collect()).collect();
        if let Some(form) = forms.into_iter().find(|f| {
            f.get("To").map(String::as_str) == Some(to) && f.get("Body").is_some_and(|b| b.contains(containing))
        }) {
            return form;
        }
        assert!(std::time::Instant::now() < deadline, "no SMS to {to} saying {containing}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn supervisors_are_asked_on_slack_telegram_and_sms_and_decide_there(db: &TestDb) {
    let rig = rig(db).await;
    let id = asked_and_confirmed(db, &rig.app, CUSTOMER, "refund 1234 250.00").await;
    let approval = db.store.approvals().of_command(&tenant("demo"), id).await.expect("read").expect("approval").id;
    let approve = format!("cg:approve:{approval}");
    // Slack: a DM (the user id as the channel), Approve and Deny as an actions block.
    let dm = sent(&rig.slack, "Slack DM", |b| b["channel"] == SLACK_SUPERVISOR).await;
    assert!(dm["text"].as_str().is_some_and(|t| t.contains("refund 250 on order 1234")), "{dm}");
    assert_eq!(dm["blocks"][1]["elements"][0]["value"], approve.as_str(), "{dm}");
    // Telegram: the private chat, an inline keyboard.
    let chat = sent(&rig.telegram, "Telegram message", |b| b["chat_id"] == TELEGRAM_SUPERVISOR).await;
    assert_eq!(chat["reply_markup"]["inline_keyboard"][0][0]["callback_data"], approve.as_str(), "{chat}");
    // SMS: the words to reply, with the approval's code.
    let code = chatgate::domain::command::ShortRef::of(approval).to_string();
    let sms = sms_to(&rig.twilio, SMS_SUPERVISOR, &format!("APPROVE {code}")).await;
    assert_eq!(sms["From"], "+14155238886");

    // The Telegram supervisor taps Approve: the refund goes ahead once.
    let tap = chatgate::channels::telegram::simulate::button(9001, TELEGRAM_SUPERVISOR, &approve);
    let secret = db.config.telegram.secret_token.expose().to_owned();
    let (status, _, answer) = crate::helpers::post_json(
        &rig.app,
        "/webhooks/telegram",
        Some(("X-Telegram-Bot-Api-Secret-Token", &secret)),
        tap.to_string().as_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(settled(db, id).await, "executed");
    let decided = db.store.approvals().decisions(approval).await.expect("decisions");
    assert_eq!((decided[0].approver.as_str(), decided[0].via.as_str()), ("s-telegram", "telegram"));

    // Another request; the SMS supervisor denies it in words.
    let other = asked_and_confirmed(db, &rig.app, CUSTOMER, "refund 98765 300.00").await;
    let approval = db.store.approvals().of_command(&tenant("demo"), other).await.expect("read").expect("approval").id;
    let code = chatgate::domain::command::ShortRef::of(approval).to_string();
    sms_to(&rig.twilio, SMS_SUPERVISOR, &format!("APPROVE {code}")).await;
    let form = crate::e2e_twilio::message("SMDENY1", SMS_SUPERVISOR, "+14155238886", &format!("deny {code}"), &[]);
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let signature = crate::e2e_twilio::sign(&crate::e2e_twilio::url(), &pairs);
    let body = form_urlencoded::Serializer::new(String::new()).extend_pairs(&form).finish();
    let answered = rig
        .app
        .client
        .post(rig.app.url("/webhooks/twilio"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("x-twilio-signature", signature)
        .body(body)
        .send()
        .await
        .expect("sms");
    assert_eq!(answered.status(), StatusCode::OK);
    assert_eq!(settled(db, other).await, "rejected");
    let decided = db.store.approvals().decisions(approval).await.expect("decisions");
    assert_eq!((decided[0].approver.as_str(), decided[0].vote), ("s-sms", Vote::Deny));
    rig.app.stop().await.expect("stop");
}
