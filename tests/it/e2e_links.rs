//! A person links their other channels (issue #48, goal 5), through the channels on both
//! backends: Ana, listed with her WhatsApp number only, writes "link" there and gets a one-time
//! code; "link CODE" from a Telegram account nobody lists adds it to her entry (evidence naming
//! the kind of address, never the address), she is told on WhatsApp ("not you? reply STOP"), and
//! her Telegram then acts as her; the code used again, from anywhere, links nothing; "STOP" on
//! WhatsApp undoes it. Wrong codes link nothing, and the attempts a sender and a tenant may make
//! are bounded, so that the right code past them links nothing either. And the codes themselves:
//! single-use, short-lived, bound to their tenant, a few pending per person.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chatgate::channels::telegram::simulate;
use chatgate::config::Rate;
use chatgate::domain::command::ActorId;
use chatgate::domain::directory::{Address, AddressKind, LinkCode, Person, Roles, Seed};
use chatgate::domain::evidence::Pseudonymizer;
use chatgate::service::directory::{LinkRules, Linked, People};
use reqwest::StatusCode;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::directory_api::Api;
use crate::e2e_telegram::Telegram;
use crate::fake_graph::{FakeGraph, sending_through, text_of};
use crate::helpers::{CUSTOMER, Meta, TestDb, on_both_backends, tenant};

on_both_backends!(
    a_person_links_telegram_by_code_is_told_on_whatsapp_and_can_undo_it,
    wrong_codes_link_nothing_and_guessing_is_bounded,
    a_code_is_single_use_short_lived_bound_to_its_tenant_and_few_are_pending,
);

/// Ana's WhatsApp number: her only address until she links another.
const ANA: &str = "15550007777";
/// Telegram accounts nobody lists.
const ANAS_TELEGRAM: i64 = 700000077;
const SOMEONE_ELSE: i64 = 700000088;
const WAIT: Duration = Duration::from_secs(20);

/// A gateway with stand-ins for Meta's Graph API and Telegram's Bot API, and Ana listed.
async fn with_ana(db: &TestDb, tweak: impl FnOnce(&mut chatgate::config::Config)) -> (Telegram, FakeGraph) {
    let graph = FakeGraph::start().await;
    let mut config = sending_through(&db.config, &graph);
    tweak(&mut config);
    let telegram = Telegram::start_with(db, config).await;
    let ana = json!({"id": "c-ana", "name": "Ana", "roles": ["customer"], "addresses": {"whatsapp": ANA}});
    assert_eq!(Api::new(&telegram.app, db).post("/v1/directory/actors", ana).await.0, StatusCode::CREATED);
    (telegram, graph)
}

/// What Telegram user `user` is sent after update `n` of theirs (the `sent`-th message of the bot).
async fn on_telegram(telegram: &Telegram, (n, user, text): (i64, i64, &str), sent: usize) -> String {
    let (status, _, _) =
        telegram.post(simulate::text(n, user, text).to_string().as_bytes(), Some(&telegram.secret)).await;
    assert_eq!(status, StatusCode::OK);
    let sent = telegram.api.wait_for(sent, WAIT).await;
    let last = &sent[sent.len() - 1].body;
    assert_eq!(last["chat_id"], user, "{last}");
    last["text"].as_str().unwrap_or_default().to_owned()
}

/// The code a reply about linking gives ("Your link code is K7M2QX9P. …").
fn code_in(text: &str) -> String {
    let code = text.split_whitespace().find_map(|word| LinkCode::parse(word.trim_end_matches('.')));
    code.unwrap_or_else(|| panic!("no code in {text:?}")).as_str().to_owned()
}

/// The decision of the tenant's latest directory change.
async fn last_directory_change(db: &TestDb) -> Value {
    let latest = "SELECT body FROM evidence WHERE kind = 'directory.changed' ORDER BY seq DESC LIMIT 1";
    let row = sqlx::query(latest).fetch_one(&mut db.raw().await).await.expect("a change");
    let body: Value = serde_json::from_str(&sqlx::Row::get::<String, _>(&row, "body")).expect("json");
    body["decision"].clone()
}

async fn anas_addresses(telegram: &Telegram, db: &TestDb) -> Value {
    Api::new(&telegram.app, db).get("/v1/directory/actors/c-ana").await.1["addresses"].clone()
}

async fn a_person_links_telegram_by_code_is_told_on_whatsapp_and_can_undo_it(db: &TestDb) {
    let (telegram, graph) = with_ana(db, |_| {}).await;
    let meta = Meta::new(&telegram.app, db);
    // Ana asks where she is known.
    assert_eq!(meta.text("wamid.L1", ANA, "link").await.status(), 200);
    let asked = text_of(&graph.wait_for(1, WAIT).await[0].body);
    let code = code_in(&asked);
    let told = format!(
        "Your link code is {code}. Within 60 minutes, send \"link {code}\" from the other app or number you want to \
         use here. Never share it: whoever sends it becomes you here."
    );
    assert_eq!(asked, told);
    assert_eq!(db.count("SELECT COUNT(*) FROM link_codes WHERE code_hash = $1", &code).await, 0, "kept hashed");

    // From her Telegram, which nobody lists, the code links it (typed in lower case, in halves).
    let typed = format!("link {} {}", code[..4].to_lowercase(), &code[4..]);
    let linked = on_telegram(&telegram, (1, ANAS_TELEGRAM, &typed), 1).await;
    assert_eq!(linked, "Linked: this Telegram is now yours here too. Send \"help\" to see what you can ask.");
    let notice = &graph.wait_for(2, WAIT).await[1].body;
    assert_eq!(notice["to"], ANA, "told on the channel she had");
    assert_eq!(text_of(notice), "Your Telegram was just linked to your account. Not you? Reply STOP and it is undone.");
    assert_eq!(anas_addresses(&telegram, db).await["telegram"], json!([format!("tg:{ANAS_TELEGRAM}")]));
    let decision = last_directory_change(db).await;
    assert_eq!((&decision["change"], &decision["address_kind"]), (&json!("linked"), &json!("telegram")));
    assert_eq!(decision["by"], json!({"person": "themselves"}));
    assert!(!decision.to_string().contains(&ANAS_TELEGRAM.to_string()), "no address in the evidence");

    // The same update again changes nothing; her Telegram now acts as her.
    let again = simulate::text(1, ANAS_TELEGRAM, &typed).to_string();
    assert_eq!(telegram.post(again.as_bytes(), Some(&telegram.secret)).await.0, StatusCode::OK);
    on_telegram(&telegram, (2, ANAS_TELEGRAM, "order status 1234"), 2).await;
    let actor = "SELECT COUNT(*) FROM commands WHERE actor_id = $1 AND channel = 'telegram'";
    assert_eq!(db.count(actor, "c-ana").await, 1, "her Telegram is her");

    // "stop" on the Telegram it linked is no undoing (a cancel there, with nothing to cancel).
    on_telegram(&telegram, (3, ANAS_TELEGRAM, "stop"), 3).await;
    assert_eq!(anas_addresses(&telegram, db).await["telegram"].as_array().map(Vec::len), Some(1));
    // The code used again, from someone else's Telegram: nothing linked.
    let reused = on_telegram(&telegram, (4, SOMEONE_ELSE, &format!("link {code}")), 4).await;
    assert!(reused.starts_with("That code is not valid"), "{reused}");
    assert_eq!(anas_addresses(&telegram, db).await["telegram"].as_array().map(Vec::len), Some(1));

    // "STOP" on WhatsApp undoes it; her Telegram is a stranger again.
    assert_eq!(meta.text("wamid.L2", ANA, "STOP").await.status(), 200);
    let undone = text_of(&graph.wait_for(3, WAIT).await[2].body);
    assert_eq!(undone, "Done: the Telegram link was undone. It can no longer act for you.");
    assert!(anas_addresses(&telegram, db).await.get("telegram").is_none());
    let refused = on_telegram(&telegram, (5, ANAS_TELEGRAM, "order status 1234"), 5).await;
    assert!(!refused.is_empty() && db.count(actor, "c-ana").await == 1, "not her any more: {refused}");
    // Nor does her code link it again, redelivered or retyped.
    let retyped = on_telegram(&telegram, (6, ANAS_TELEGRAM, &format!("link {code}")), 6).await;
    assert!(retyped.starts_with("That code is not valid"), "{retyped}");
    // Each message answered once: the redelivered update, nothing.
    assert_eq!(telegram.api.exactly(6).await.len(), 6);
    assert_eq!(graph.exactly(3).await.len(), 3, "the code, the notice, the undoing");
    telegram.app.stop().await.expect("stop");
}

async fn wrong_codes_link_nothing_and_guessing_is_bounded(db: &TestDb) {
    let (telegram, _graph) = with_ana(db, |config| {
        config.rate_limits.link_attempts = Rate { per_minute: 1, burst: 3 };
        config.rate_limits.link_attempts_tenant = Rate { per_minute: 1, burst: 6 };
    })
    .await;
    let api = Api::new(&telegram.app, db);
    let (status, issued) = api.post("/v1/directory/actors/c-ana/link-codes", json!({})).await;
    assert_eq!(status, StatusCode::CREATED, "{issued}");
    let code = issued["code"].as_str().expect("a code").to_owned();
    assert_eq!(issued["send"], format!("link {code}"));
    let wrong = if code == "AAAAAAAA" { "BBBBBBBB" } else { "AAAAAAAA" };
    // One sender: three wrong codes (one not even a code's shape), then the right one, past its attempts.
    let mut sent = 0;
    let mut say = |user: i64, text: String| {
        sent += 1;
        let (n, telegram) = (sent, &telegram);
        async move { on_telegram(telegram, (n as i64, user, &text), n).await }
    };
    for text in [format!("link {wrong}"), "link 1234".to_owned(), format!("link {wrong}")] {
        assert!(say(SOMEONE_ELSE, text).await.starts_with("That code is not valid"));
    }
    let too_many = say(SOMEONE_ELSE, format!("link {code}")).await;
    assert!(too_many.starts_with("Too many tries"), "{too_many}");
    // Other senders, one try each, until the tenant's attempts are spent: the right code then links nothing.
    for user in [SOMEONE_ELSE + 1, SOMEONE_ELSE + 2] {
        assert!(say(user, format!("link {wrong}")).await.starts_with("That code is not valid"));
    }
    assert!(say(SOMEONE_ELSE + 3, format!("link {code}")).await.starts_with("Too many tries"));
    assert!(anas_addresses(&telegram, db).await.get("telegram").is_none(), "never linked without the right code");
    let refused = "SELECT COUNT(*) FROM inbound_messages WHERE status = $1";
    assert_eq!(db.count(refused, "link_refused").await, 7);
    assert_eq!(db.count("SELECT COUNT(*) FROM link_codes WHERE used_at IS NULL AND person_id = $1", "c-ana").await, 1);
    // A listed person's "link CODE" links nothing either (their address is theirs already).
    let meta = Meta::new(&telegram.app, db);
    assert_eq!(meta.text("wamid.G1", CUSTOMER, &format!("link {code}")).await.status(), 200);
    let listed = "SELECT COUNT(*) FROM inbound_messages WHERE provider_message_id = $1 AND status = 'link_refused'";
    assert_eq!(db.count(listed, "wamid.G1").await, 1);
    // Nobody's code: an unknown person is 404.
    assert_eq!(api.post("/v1/directory/actors/nobody/link-codes", json!({})).await.0, StatusCode::NOT_FOUND);
    telegram.app.stop().await.expect("stop");
}

async fn a_code_is_single_use_short_lived_bound_to_its_tenant_and_few_are_pending(db: &TestDb) {
    let demo = tenant("demo");
    let now = OffsetDateTime::now_utc();
    let people = People::new(db.store.clone(), Pseudonymizer::new(b"links"));
    let roles = Roles(BTreeMap::from([("customer".to_owned(), BTreeSet::from(["orders:read".to_owned()]))]));
    let customer = Person {
        id: ActorId::parse(CUSTOMER).expect("an id"),
        name: "Demo customer".into(),
        roles: vec!["customer".into()],
        locale: None,
        active: true,
        addresses: BTreeSet::from([Address::new(AddressKind::Whatsapp, CUSTOMER).expect("a number")]),
    };
    let seed = Seed { tenants: BTreeMap::from([(demo.clone(), (roles, vec![customer]))]) };
    people.seed(&seed, now).await.expect("the directory is seeded");
    let telegram = |id: &str| Address::new(AddressKind::Telegram, id).expect("an id");
    let refused = Linked::Refused(chatgate::domain::directory::LinkRefusal::Wrong);
    // Short-lived: a code that lived no time links nothing.
    let at_once = people.clone().with_links(LinkRules { code_ttl: Duration::ZERO, ..LinkRules::default() });
    let issued = at_once.issue_link_code(&demo, CUSTOMER, now).await.expect("a code");
    assert_eq!(at_once.redeem_link_code(&demo, &issued.code, telegram("1"), now).await.expect("read"), refused);
    // Bound to its tenant.
    let issued = people.issue_link_code(&demo, CUSTOMER, now).await.expect("a code");
    let other = tenant("other");
    assert_eq!(people.redeem_link_code(&other, &issued.code, telegram("2"), now).await.expect("read"), refused);
    // A few pending: the fourth retires the oldest.
    let mut codes = vec![issued.code];
    for later in 1..=3 {
        let at = now + Duration::from_millis(later);
        codes.push(people.issue_link_code(&demo, CUSTOMER, at).await.expect("a code").code);
    }
    assert_eq!(people.redeem_link_code(&demo, &codes[0], telegram("3"), now).await.expect("read"), refused);
    let linked = people.redeem_link_code(&demo, &codes[1], telegram("4"), now).await.expect("read");
    assert!(matches!(linked, Linked::Now { .. }), "{linked:?}");
    // Single use: the same address again is told it linked; any other address, refused.
    let again = people.redeem_link_code(&demo, &codes[1], telegram("4"), now).await.expect("read");
    assert!(matches!(again, Linked::Now { .. }), "told it linked, again: {again:?}");
    assert_eq!(people.redeem_link_code(&demo, &codes[1], telegram("5"), now).await.expect("read"), refused);
    // Unknown people get no code.
    assert!(people.issue_link_code(&demo, "nobody", now).await.is_err());
}

/// The console's person page gives a code as the API does (its form guarded as every other), and
/// the code links a second WhatsApp number.
#[tokio::test]
async fn the_console_gives_a_code_that_links_a_second_number() {
    use crate::e2e_console::{csrf_of, page, post_form, session};
    let db = TestDb::sqlite().await;
    let (telegram, graph) = with_ana(&db, |_| {}).await;
    let app = &telegram.app;
    let cookie =
        session(app, &crate::helpers::api_token(&db, "demo", "ops-1", crate::directory_api::DIRECTORY_SCOPES)).await;
    let (status, html) = page(app, &cookie, "/console/directory/c-ana").await;
    assert!(status == StatusCode::OK && html.contains("Make a link code"), "{html}");
    let path = "/console/directory/c-ana/link-code";
    assert_eq!(post_form(app, &cookie, path, &[("csrf", "forged")]).await.0, StatusCode::FORBIDDEN);
    assert_eq!(db.count("SELECT COUNT(*) FROM link_codes WHERE person_id = $1", "c-ana").await, 0);
    let (status, html) = post_form(app, &cookie, path, &[("csrf", &csrf_of(&html))]).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    let code = code_in(html.split("Link code ").nth(1).expect("the code shown").split(':').next().unwrap_or_default());
    let second = "15550007788";
    assert_eq!(Meta::new(app, &db).text("wamid.N1", second, &format!("link {code}")).await.status(), 200);
    let mut to: Vec<String> =
        graph.exactly(2).await.iter().map(|r| r.body["to"].as_str().unwrap_or("").into()).collect();
    to.sort();
    assert_eq!(to, [ANA, second], "the new number told it linked; the one she had, of the link");
    assert_eq!(anas_addresses(&telegram, &db).await["whatsapp"], json!([ANA, second]));
    telegram.app.stop().await.expect("stop");
}
