//! Issue 50, goal 1 (texts): `retention.texts`. A person asks, refunds and confirms, and starts a
//! second refund left waiting; a pass within the retention overwrites nothing, a dry run as of
//! 91 days on counts what a pass then overwrites, and that pass overwrites exactly the texts of
//! the ended commands (messages, replies, the answered prompt), never the waiting refund's, and
//! records itself in the tenant's chain, which still verifies; a redelivery is still known.
//! A retention shorter than what the registry keeps open is refused, naming the setting.

use std::time::{Duration, Instant};

use chatgate::domain::directory::Tenants;
use chatgate::service::database::Database;
use chatgate::service::retention::{PurgeMode, PurgedRecords, PurgedTexts, RetentionPolicy};
use chatgate::store::EXPIRED_PAYLOAD;
use time::OffsetDateTime;

use crate::cli::{chatgate, run, stderr};
use crate::fake_graph::{FakeGraph, sending_through};
use crate::helpers::{CUSTOMER, Meta, TestDb, command_of_message, on_both_backends, settled, spawn_app_with};

on_both_backends!(
    texts_past_their_retention_are_overwritten_and_what_is_under_way_is_kept,
    a_purge_running_while_webhooks_arrive_loses_nothing
);

/// The tenants of the shipped directory, under `config`.
pub fn tenants_of(config: &chatgate::config::Config) -> Tenants {
    chatgate::service::Settings::with_shipped_registry(config.clone()).expect("the shipped settings").tenants
}

/// Waits until nothing but dispatches waits in the outbox: every reply sent (10 s at most).
pub async fn replies_sent(db: &TestDb) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let waiting = "SELECT COUNT(*) FROM outbox WHERE status = 'pending' AND kind <> $1";
    while db.count(waiting, "dispatch").await > 0 {
        assert!(Instant::now() < deadline, "replies still waiting");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn payload_of(db: &TestDb, message_id: &str) -> String {
    let mut conn = db.raw().await;
    sqlx::query_scalar("SELECT payload FROM inbound_messages WHERE provider_message_id = $1")
        .bind(message_id)
        .fetch_one(&mut conn)
        .await
        .expect("the message")
}

async fn texts_past_their_retention_are_overwritten_and_what_is_under_way_is_kept(db: &TestDb) {
    let graph = FakeGraph::start().await;
    let app = spawn_app_with(db, sending_through(&db.config, &graph)).await;
    let meta = Meta::new(&app, db);
    for (id, text) in [("wamid.R1", "order status 4242"), ("wamid.R2", "refund 4242 9.99")] {
        assert_eq!(meta.text(id, CUSTOMER, text).await.status(), 200);
    }
    replies_sent(db).await;
    assert_eq!(meta.text("wamid.R3", CUSTOMER, "yes").await.status(), 200);
    let refund = command_of_message(db, "wamid.R2").await;
    assert_eq!(settled(db, refund).await, "executed");
    assert_eq!(meta.text("wamid.R4", CUSTOMER, "refund 4243 5.00").await.status(), 200);
    replies_sent(db).await;
    let waiting = command_of_message(db, "wamid.R4").await;

    let database = Database::from(db.store.clone());
    let tenants = tenants_of(&db.config);
    let policy = RetentionPolicy { default: &db.config.retention, tenants: &tenants };
    let now = OffsetDateTime::now_utc();
    let within = database.purge(policy, now, PurgeMode::Purge).await.expect("a pass");
    assert_eq!(within.texts(), PurgedTexts::default(), "nothing is 90 days old");

    let later = now + Duration::from_secs(91 * 86_400);
    let counted = database.purge(policy, later, PurgeMode::DryRun).await.expect("a dry run");
    assert_eq!(counted.records(), PurgedRecords::default(), "records are kept 396 days");
    // The command line's dry run as of then says the same, per tenant.
    let folder = tempfile::tempdir().expect("a folder");
    let as_of = later.format(&time::format_description::well_known::Rfc3339).expect("RFC 3339");
    let printed = run(chatgate(folder.path()).env("CHATGATE_DATABASE_URL", &db.url).args([
        "purge",
        "--dry-run",
        "--as-of",
        &as_of,
    ]));
    assert!(printed.status.success(), "{}", stderr(&printed));
    let said = String::from_utf8_lossy(&printed.stdout).into_owned();
    let demo = format!(
        "demo: texts of {} message(s), {} reply(ies), {} prompt(s); 0 command(s)",
        counted.texts().messages,
        counted.texts().replies,
        counted.texts().prompts
    );
    assert!(said.contains(&demo), "{said}");
    let refused = run(chatgate(folder.path()).args(["purge", "--as-of", &as_of]));
    assert!(!refused.status.success() && stderr(&refused).contains("--dry-run"), "{}", stderr(&refused));
    assert!(payload_of(db, "wamid.R1").await.contains("order status 4242"), "a dry run writes nothing");
    let purged = database.purge(policy, later, PurgeMode::Purge).await.expect("a pass");
    assert_eq!(purged, counted, "the dry run counted what the pass overwrote");
    let total = purged.texts();
    assert_eq!((total.messages, total.prompts), (3, 1), "the question, the refund and its yes; its prompt");
    assert!(total.replies >= 3, "the answer, the prompt, the refund's outcome: {total:?}");
    for id in ["wamid.R1", "wamid.R2", "wamid.R3"] {
        assert_eq!(payload_of(db, id).await, EXPIRED_PAYLOAD, "{id}");
    }
    // The refund still waiting for its confirmation keeps its message, its prompt and its reply.
    assert!(payload_of(db, "wamid.R4").await.contains("refund 4243"));
    let kept = "SELECT COUNT(*) FROM outbox WHERE command_id = $1 AND payload = '{\"expired\":true}'";
    assert_eq!(db.count(kept, &waiting.to_string()).await, 0);
    let prompt = "SELECT COUNT(*) FROM confirmations WHERE command_id = $1 AND prompt = '{\"expired\":true}'";
    assert_eq!(db.count(prompt, &waiting.to_string()).await, 0);
    // Recorded in the tenant's chain, which still verifies; a second pass has nothing left.
    let recorded = "SELECT COUNT(*) FROM evidence WHERE chain_id = $1 AND kind = 'retention.purged'";
    assert_eq!(db.count(recorded, "demo").await, 1);
    let audit = db.store.evidence().verify().await.expect("verified");
    assert!(audit.first_break.is_none(), "{:?}", audit.first_break);
    let again = database.purge(policy, later, PurgeMode::Purge).await.expect("a pass");
    assert_eq!(again.texts(), PurgedTexts::default());
    // A provider's redelivery of a message whose text is gone is still known: no command again.
    let commands = "SELECT COUNT(*) FROM commands WHERE tenant_id = $1";
    let before = db.count(commands, "demo").await;
    assert_eq!(meta.text("wamid.R1", CUSTOMER, "order status 4242").await.status(), 200);
    assert_eq!(db.count(commands, "demo").await, before);
    app.stop().await.expect("stop");
}

/// Passes as of 91 days on (every text then past its retention) run back to back while webhooks
/// arrive: every message acknowledged is admitted once, and the texts go only once their
/// commands end.
async fn a_purge_running_while_webhooks_arrive_loses_nothing(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let database = Database::from(db.store.clone());
    let (retention, tenants) = (db.config.retention.clone(), tenants_of(&db.config));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let purging = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let policy = RetentionPolicy { default: &retention, tenants: &tenants };
            let mut passes = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || passes == 0 {
                let later = OffsetDateTime::now_utc() + Duration::from_secs(91 * 86_400);
                database.purge(policy, later, PurgeMode::Purge).await.expect("a pass");
                passes += 1;
            }
            passes
        })
    };
    let meta = Meta::new(&app, db);
    let mut acknowledged = Vec::new();
    for n in 0..60 {
        let id = format!("wamid.P{n}");
        assert_eq!(meta.text(&id, CUSTOMER, &format!("order status {n}")).await.status(), 200);
        acknowledged.push(id);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let passes = purging.await.expect("the purge ends");
    crate::helpers::each_admitted_once(db, &acknowledged).await;
    let known = "SELECT COUNT(*) FROM inbound_messages WHERE provider_message_id LIKE $1 AND command_id IS NOT NULL";
    assert_eq!(db.count(known, "wamid.P%").await, 60, "each message made its command ({passes} passes ran)");
    app.stop().await.expect("stop");
}

/// Why `config` (with the shipped registry) does not start.
fn refusal(config: chatgate::config::Config) -> String {
    let Err(refused) = chatgate::service::Settings::with_shipped_registry(config) else { panic!("started") };
    refused.to_string()
}

/// At start (and on reload, which checks the same files), a retention shorter than the dedupe
/// window or a command's TTL is refused, naming the setting and the window.
#[test]
fn a_retention_shorter_than_a_window_is_refused_naming_it() {
    let shipped = || {
        chatgate::config::Config::parse(
            std::path::Path::new("chatgate.toml"),
            chatgate::config::SHIPPED_CONFIG,
            &|_| None,
        )
        .expect("the shipped configuration")
    };
    let mut config = shipped();
    config.retention.texts = Duration::from_secs(3_600);
    let refused = refusal(config);
    assert!(
        refused.contains("retention.texts (1h) is shorter than idempotency.default_window_secs (1day)"),
        "{refused}"
    );
    let mut config = shipped();
    config.retention.texts = Duration::from_secs(2 * 86_400);
    config.idempotency.default_window_secs = 3_600;
    let refused = refusal(config);
    let named = refused.contains("retention.texts (2days) is shorter than command `");
    assert!(named && refused.contains("'s dedupe_window (3days)"), "the 72-hour windows: {refused}");
    assert!(chatgate::service::Settings::with_shipped_registry(shipped()).is_ok(), "90 days is long enough");

    // Records are kept at least as long as texts; a tenant's own retention is held to the same.
    let mut config = shipped();
    config.retention.records = 30 * 86_400 * Duration::from_secs(1);
    let refused = refusal(config);
    assert!(refused.contains("retention.records (30days) is shorter than retention.texts (90days)"), "{refused}");
    let own = |retention: &str| {
        let directory = chatgate::config::SHIPPED_DIRECTORY
            .replace("[tenants.demo]", &format!("[tenants.demo]\nretention = {{ {retention} }}"));
        let commands = chatgate::config::SHIPPED_COMMANDS;
        chatgate::service::Settings::with_files(shipped(), commands, &directory).map(|_| ()).map_err(|e| e.to_string())
    };
    let refused = own("records = \"2d\"").expect_err("two days");
    assert!(refused.contains("tenants.demo.retention.records (2days) is shorter than"), "{refused}");
    let refused = own("texts = \"forever\"").expect_err("no duration");
    assert!(refused.contains("tenants.demo.retention.texts: `forever` is not a duration"), "{refused}");
    let refused = own("logs = \"30d\"").expect_err("no such part");
    assert!(refused.contains("`logs` is not `texts` or `records`"), "{refused}");
    assert_eq!(own("texts = \"30d\", records = \"7y\""), Ok(()));

    // The pace: a batch of nothing would never end a pass; a share of none would never start one.
    let checked = |config: chatgate::config::Config| config.validate().map_err(|e| e.to_string());
    let mut config = shipped();
    config.retention.batch = 0;
    assert!(checked(config).expect_err("no batch").contains("retention.batch must be greater than 0"));
    for share in [0.0, -1.0, 1.5, f64::NAN] {
        let mut config = shipped();
        config.retention.share = share;
        let refused = checked(config).expect_err("no share");
        assert!(refused.contains("retention.share must be above 0 and at most 1"), "{share}: {refused}");
    }
    assert_eq!(checked(shipped()), Ok(()));
}
