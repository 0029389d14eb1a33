//! Twilio Messaging over HTTP: form webhooks signed by an implementation that is not the code
//! under test (a vector computed with Python's `hmac`, and the test's own HMAC-SHA1), the TwiML
//! answer carrying the replies due at once, confirmation by `YES <code>` and by `ButtonPayload`,
//! the outcome sent later through a stand-in for the Messages API, and refusals that store
//! nothing (tampered parameters, another URL, no signature, not a form).

use std::time::Duration;

use base64::Engine as _;
use hmac::{Hmac, Mac};
use reqwest::StatusCode;
use serde_json::Value;

use crate::fake_graph::{FakeServer, sending_through};
use crate::helpers::{TestApp, TestDb, on_both_backends, spawn_app_with, tenant};

on_both_backends!(
    a_whatsapp_refund_is_prompted_in_twiml_confirmed_with_yes_and_its_outcome_sent_through_the_api,
    a_button_payload_confirms,
    an_sms_gets_help_in_twiml_and_a_redelivery_the_same_answer,
    status_callbacks_record_what_became_of_a_sent_message,
    bad_signatures_and_bodies_are_refused_and_store_nothing,
    an_sms_suggestion_is_accepted_by_replying_1,
);

pub(crate) const AUTH_TOKEN: &str = "test-twilio-auth-token";
pub(crate) const PUBLIC_BASE: &str = "https://gateway.example.com";
pub(crate) const ACCOUNT: &str = "ACtest0000000000000000000000000000";
const BUSINESS: &str = "whatsapp:+14155238886";
const PERSON: &str = "whatsapp:+15550000001";

/// The first message of the refund scenario, and its signature as Python's `hmac` computes it
/// for `https://gateway.example.com/webhooks/twilio` with the test's auth token.
const REFUND_FORM: &[(&str, &str)] = &[
    ("MessageSid", "SM11111111111111111111111111111111"),
    ("AccountSid", ACCOUNT),
    ("From", PERSON),
    ("To", BUSINESS),
    ("Body", "refund 1234 25.00"),
    ("NumMedia", "0"),
    ("ProfileName", "Ana"),
    ("WaId", "15550000001"),
    ("SmsStatus", "received"),
    ("NumSegments", "1"),
    ("ApiVersion", "2010-04-01"),
];
const REFUND_SIGNATURE_BY_PYTHON: &str = "bY3YyO7wbDmV4blNWYxHVkSATSk=";

/// The test's own signer, written from Twilio's description, not from the gateway's code.
pub(crate) fn sign(url: &str, form: &[(&str, &str)]) -> String {
    let mut data = url.to_owned();
    let mut sorted = form.to_vec();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    for (name, value) in sorted {
        data.push_str(name);
        data.push_str(value);
    }
    let mut mac = Hmac::<sha1::Sha1>::new_from_slice(AUTH_TOKEN.as_bytes()).expect("key");
    mac.update(data.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

pub(crate) fn url() -> String {
    format!("{PUBLIC_BASE}/webhooks/twilio")
}

pub(crate) fn message(
    sid: &str,
    from: &str,
    to: &str,
    body: &str,
    extra: &[(&'static str, &'static str)],
) -> Vec<(String, String)> {
    let mut form = vec![
        ("MessageSid".to_owned(), sid.to_owned()),
        ("AccountSid".to_owned(), ACCOUNT.to_owned()),
        ("From".to_owned(), from.to_owned()),
        ("To".to_owned(), to.to_owned()),
        ("Body".to_owned(), body.to_owned()),
        ("NumMedia".to_owned(), "0".to_owned()),
    ];
    form.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    form
}

struct Twilio {
    app: TestApp,
    api: FakeServer,
}

impl Twilio {
    async fn start(db: &TestDb) -> Self {
        let api = FakeServer::twilio().await;
        // The Graph stand-in is not used: every message here is Twilio's.
        let mut config = sending_through(&db.config, &FakeServer::start().await);
        config.server.public_base_url = PUBLIC_BASE.into();
        config.twilio.auth_token = chatgate::config::Secret::new(AUTH_TOKEN);
        config.twilio.account_sid = ACCOUNT.into();
        config.twilio.api_base = api.url.clone();
        Self { app: spawn_app_with(db, config).await, api }
    }

    /// Posts `form` as Twilio does, with `signature`; answers (status, content type, body).
    async fn post(&self, form: &[(String, String)], signature: Option<&str>) -> (StatusCode, String, String) {
        self.post_to("/webhooks/twilio", form, signature).await
    }

    async fn post_to(
        &self,
        path: &str,
        form: &[(String, String)],
        signature: Option<&str>,
    ) -> (StatusCode, String, String) {
        let body = form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
        let mut request = self
            .app
            .client
            .post(self.app.url(path))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        if let Some(signature) = signature {
            request = request.header("x-twilio-signature", signature);
        }
        let response = request.send().await.expect("request");
        let status = response.status();
        let kind = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        (status, kind, response.text().await.expect("body"))
    }

    /// Posts `form` signed by the test's own signer and expects TwiML.
    async fn says(&self, form: &[(String, String)]) -> String {
        let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let (status, kind, body) = self.post(form, Some(&sign(&url(), &pairs))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(kind.starts_with("text/xml"), "{kind}");
        body
    }
}

fn owned(form: &[(&str, &str)]) -> Vec<(String, String)> {
    form.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// The `<Message>` texts of a TwiML answer.
fn messages(twiml: &str) -> Vec<String> {
    twiml
        .split("<Message>")
        .skip(1)
        .filter_map(|part| part.split("</Message>").next())
        .map(|m| {
            m.replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&apos;", "'")
                .replace("&amp;", "&")
        })
        .collect()
}

fn code_in(prompt: &str) -> String {
    prompt.split("YES ").nth(1).and_then(|rest| rest.get(..6)).expect("a code in the prompt").to_owned()
}

async fn command_state(db: &TestDb, within: Duration, want: &str) -> String {
    let deadline = std::time::Instant::now() + within;
    loop {
        let mut conn = db.raw().await;
        let row = sqlx::query("SELECT state FROM commands ORDER BY received_at LIMIT 1")
            .fetch_one(&mut conn)
            .await
            .expect("a command");
        let state: String = sqlx::Row::try_get(&row, "state").expect("state");
        if state == want || std::time::Instant::now() > deadline {
            return state;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn a_whatsapp_refund_is_prompted_in_twiml_confirmed_with_yes_and_its_outcome_sent_through_the_api(db: &TestDb) {
    let twilio = Twilio::start(db).await;
    // Signed by Python and by the test's signer alike.
    assert_eq!(sign(&url(), REFUND_FORM), REFUND_SIGNATURE_BY_PYTHON);
    let (status, kind, twiml) = twilio.post(&owned(REFUND_FORM), Some(REFUND_SIGNATURE_BY_PYTHON)).await;
    assert_eq!((status, kind.starts_with("text/xml")), (StatusCode::OK, true), "{twiml}");
    assert!(twiml.starts_with(r#"<?xml version="1.0" encoding="UTF-8"?><Response><Message>"#), "{twiml}");
    let prompt = messages(&twiml);
    assert_eq!(prompt.len(), 1, "{twiml}");
    assert!(prompt[0].contains("refund") && prompt[0].contains("1234"), "{}", prompt[0]);
    let code = code_in(&prompt[0]);

    let yes = message("SM22222222222222222222222222222222", PERSON, BUSINESS, &format!("YES {code}"), &[]);
    let answer = twilio.says(&yes).await;
    // A retry of the answer (Twilio lost our TwiML) confirms nothing again and says the same.
    assert_eq!(twilio.says(&yes).await, answer);
    let confirmed = messages(&answer);
    assert_eq!(confirmed.len(), 1, "{confirmed:?}");
    assert_eq!(command_state(db, Duration::from_secs(20), "executed").await, "executed");

    // The outcome came later, so it went through the Messages API — alone: the prompt and the
    // confirmation left in the TwiML answers.
    let sent = twilio.api.exactly(1).await;
    let request = &sent[0];
    assert_eq!(request.path, format!("/2010-04-01/Accounts/{ACCOUNT}/Messages.json"));
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{ACCOUNT}:{AUTH_TOKEN}"));
    assert_eq!(request.authorization.as_deref(), Some(format!("Basic {basic}").as_str()));
    assert_eq!(request.content_type.as_deref(), Some("application/x-www-form-urlencoded"));
    let form: std::collections::BTreeMap<String, String> =
        form_urlencoded::parse(request.raw.as_bytes()).into_owned().collect();
    assert_eq!((form["From"].as_str(), form["To"].as_str()), (BUSINESS, PERSON));
    assert!(form["Body"].to_lowercase().contains("done") || form["Body"].contains("refund"), "{}", form["Body"]);

    // Every reply has its evidence; the inline ones say so.
    let mut conn = db.raw().await;
    let rows = sqlx::query("SELECT body FROM evidence WHERE kind = 'conversation.message.sent' ORDER BY seq")
        .fetch_all(&mut conn)
        .await
        .expect("evidence");
    let outcomes: Vec<String> = rows
        .iter()
        .map(|row| {
            let body: String = sqlx::Row::try_get(row, "body").expect("body");
            let body: Value = serde_json::from_str(&body).expect("json");
            body["decision"]["outcome"].as_str().unwrap_or_default().to_owned()
        })
        .collect();
    assert_eq!(outcomes, ["sent_inline", "sent_inline", "sent"]);
}

async fn a_button_payload_confirms(db: &TestDb) {
    let twilio = Twilio::start(db).await;
    let twiml = twilio.says(&message("SM3", PERSON, BUSINESS, "refund 1234 25.00", &[("WaId", "15550000001")])).await;
    assert_eq!(messages(&twiml).len(), 1);
    // The prompt's buttons carry the confirmation's nonce (a Twilio content template with
    // quick replies sends it back as ButtonPayload).
    let outbox = db.outbox().await;
    let yes = outbox.iter().find_map(|(_, p)| p["buttons"][0]["id"].as_str().map(str::to_owned)).expect("a yes button");
    assert!(yes.starts_with("cg:yes:"), "{yes}");
    let payload: &'static str = Box::leak(yes.into_boxed_str());
    let twiml = twilio
        .says(&message("SM4", PERSON, BUSINESS, "Yes", &[("ButtonPayload", payload), ("ButtonText", "Yes")]))
        .await;
    assert_eq!(messages(&twiml).len(), 1, "{twiml}");
    assert_eq!(command_state(db, Duration::from_secs(20), "executed").await, "executed");
}

/// SMS has no buttons: a suggestion is taken by replying "1", and a "1" after anything else (a
/// confirmation prompt) is no answer at all.
async fn an_sms_suggestion_is_accepted_by_replying_1(db: &TestDb) {
    let twilio = Twilio::start(db).await;
    let sms = |sid: &str, body: &str| message(sid, "+15550000001", "+14155238886", body, &[]);
    let offered = messages(&twilio.says(&sms("SM61", "rfnd 4410 12.50")).await);
    assert!(offered[0].starts_with("Did you mean: refund 4410 12.5? Reply 1"), "{offered:?}");
    let prompt = messages(&twilio.says(&sms("SM62", "1")).await);
    assert!(prompt[0].starts_with("Please confirm: refund 12.5 on order 4410"), "{prompt:?}");
    let again = messages(&twilio.says(&sms("SM63", "1")).await);
    assert!(!again[0].starts_with("Please confirm"), "a 1 after the prompt confirms nothing: {again:?}");
    assert_eq!(db.count("SELECT COUNT(*) FROM commands WHERE tenant_id = $1", "demo").await, 1);
}

async fn an_sms_gets_help_in_twiml_and_a_redelivery_the_same_answer(db: &TestDb) {
    let twilio = Twilio::start(db).await;
    let sms = message("SM5", "+15550000001", "+14155238886", "help", &[]);
    let first = twilio.says(&sms).await;
    let help = messages(&first);
    assert_eq!(help.len(), 1);
    assert!(help[0].to_lowercase().contains("refund"), "{}", help[0]);
    // Twilio retries a webhook when our answer was lost (a timeout, a dropped connection): the
    // retry writes nothing and gets the first answer again, so the person still hears it.
    let again = twilio.says(&sms).await;
    assert_eq!(again, first);
    assert_eq!(db.count("SELECT COUNT(*) FROM inbound_messages WHERE provider_message_id = $1", "SM5").await, 1);
    twilio.api.exactly(0).await;
    let store = &db.store;
    assert!(store.commands().get(&tenant("demo"), uuid::Uuid::now_v7()).await.expect("read").is_none());
}

async fn bad_signatures_and_bodies_are_refused_and_store_nothing(db: &TestDb) {
    let twilio = Twilio::start(db).await;
    let form = owned(REFUND_FORM);
    // A parameter changed after signing.
    let mut tampered = form.clone();
    tampered[4].1 = "refund 1234 2500.00".into();
    let (status, _, body) = twilio.post(&tampered, Some(REFUND_SIGNATURE_BY_PYTHON)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let problem: Value = serde_json::from_str(&body).expect("a problem document");
    assert_eq!(problem["code"], "invalid_signature");
    // Signed for another URL (the listening address rather than the public one).
    let pairs: Vec<(&str, &str)> = REFUND_FORM.to_vec();
    let wrong_url = sign(&twilio.app.url("/webhooks/twilio"), &pairs);
    assert_eq!(twilio.post(&form, Some(&wrong_url)).await.0, StatusCode::UNAUTHORIZED);
    // No signature at all.
    assert_eq!(twilio.post(&form, None).await.0, StatusCode::UNAUTHORIZED);
    // Signed, but not a message Twilio would send.
    let no_sid: Vec<(String, String)> = form.iter().filter(|(k, _)| k != "MessageSid").cloned().collect();
    let no_sid_pairs: Vec<(&str, &str)> = no_sid.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (status, _, body) = twilio.post(&no_sid, Some(&sign(&url(), &no_sid_pairs))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // JSON is not what Twilio posts.
    let json = twilio.app.client.post(twilio.app.url("/webhooks/twilio")).json(&serde_json::json!({})).send().await;
    assert_eq!(json.expect("request").status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(db.count("SELECT COUNT(*) FROM inbound_messages WHERE channel = $1", "twilio").await, 0);
    assert_eq!(db.count("SELECT COUNT(*) FROM commands WHERE channel = $1", "twilio").await, 0);
    twilio.api.exactly(0).await;
}

/// The delivery status of the one message sent through the Messages API, and its errors.
async fn sent_status(db: &TestDb) -> (String, String, Option<String>) {
    let mut conn = db.raw().await;
    let row = sqlx::query(
        "SELECT provider_message_id, status, errors FROM outbound_messages
         WHERE channel = 'twilio' AND provider_message_id IS NOT NULL",
    )
    .fetch_one(&mut conn)
    .await
    .expect("one message sent through the API");
    let get = |name: &str| -> Option<String> { sqlx::Row::try_get(&row, name).expect(name) };
    (get("provider_message_id").unwrap_or_default(), get("status").unwrap_or_default(), get("errors"))
}

async fn status_callbacks_record_what_became_of_a_sent_message(db: &TestDb) {
    let twilio = Twilio::start(db).await;
    let twiml = twilio.says(&owned(REFUND_FORM)).await;
    let code = code_in(&messages(&twiml)[0]);
    twilio.says(&message("SM44444444444444444444444444444444", PERSON, BUSINESS, &format!("YES {code}"), &[])).await;
    assert_eq!(command_state(db, Duration::from_secs(20), "executed").await, "executed");
    // The outcome went through the Messages API, asking Twilio to report back to the public URL.
    let sent = twilio.api.exactly(1).await;
    let form: std::collections::BTreeMap<String, String> =
        form_urlencoded::parse(sent[0].raw.as_bytes()).into_owned().collect();
    let callback = format!("{PUBLIC_BASE}/webhooks/twilio/status");
    assert_eq!(form["StatusCallback"], callback);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let sid = loop {
        let (sid, status, _) = sent_status(db).await;
        if status == "queued" {
            break sid;
        }
        assert!(std::time::Instant::now() < deadline, "not recorded as taken: {status}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let report = |status: &str, extra: &[(&str, &str)]| {
        let mut form = vec![
            ("MessageSid".to_owned(), sid.clone()),
            ("AccountSid".to_owned(), ACCOUNT.to_owned()),
            ("MessageStatus".to_owned(), status.to_owned()),
            ("To".to_owned(), PERSON.to_owned()),
        ];
        form.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        form
    };
    let signed = |form: &[(String, String)]| {
        let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        sign(&callback, &pairs)
    };
    let path = "/webhooks/twilio/status";
    // Refused, and nothing recorded: a signature for the message URL, no signature, no status.
    let delivered = report("delivered", &[]);
    let for_messages = {
        let pairs: Vec<(&str, &str)> = delivered.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        sign(&url(), &pairs)
    };
    assert_eq!(twilio.post_to(path, &delivered, Some(&for_messages)).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(twilio.post_to(path, &delivered, None).await.0, StatusCode::UNAUTHORIZED);
    let no_status: Vec<(String, String)> = delivered.iter().filter(|(k, _)| k != "MessageStatus").cloned().collect();
    assert_eq!(twilio.post_to(path, &no_status, Some(&signed(&no_status))).await.0, StatusCode::BAD_REQUEST);
    assert_eq!(sent_status(db).await.1, "queued");
    // Twilio's reports, in order and out of order: each moves the record forward only (statuses
    // before `sent` are not tracked).
    let reports =
        [("sending", "queued"), ("sent", "sent"), ("delivered", "delivered"), ("sent", "delivered"), ("read", "read")];
    for (status, want) in reports {
        let form = report(status, &[]);
        assert_eq!(twilio.post_to(path, &form, Some(&signed(&form))).await.0, StatusCode::NO_CONTENT, "{status}");
        assert_eq!(sent_status(db).await.1, want, "after {status}");
    }
    // A report about a message this gateway did not send is taken and changes nothing.
    let mut other = report("delivered", &[]);
    other[0].1 = "SMnotours".into();
    assert_eq!(twilio.post_to(path, &other, Some(&signed(&other))).await.0, StatusCode::NO_CONTENT);
    // Undelivered, with Twilio's error: the record says failed and keeps why.
    let undelivered = report("undelivered", &[("ErrorCode", "63016"), ("ErrorMessage", "outside the window")]);
    assert_eq!(twilio.post_to(path, &undelivered, Some(&signed(&undelivered))).await.0, StatusCode::NO_CONTENT);
    let (_, status, errors) = sent_status(db).await;
    assert_eq!(status, "failed");
    let errors: Value = serde_json::from_str(&errors.expect("errors kept")).expect("json");
    assert_eq!(errors[0]["code"], 63016);
}
