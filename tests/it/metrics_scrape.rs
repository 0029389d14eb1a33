//! Issues 27.9 and 44.2: a scrape of `/metrics` costs the same whatever the tables hold — it reads
//! the figures kept as things change (a few rows), the oldest waiting outbox row of each kind and up
//! to 10,000 orphaned commands through indexes, and the database at most once a second however
//! many scrapes come — and `/metrics` can be protected by a bearer token or moved to an address of
//! its own.

use reqwest::StatusCode;

use crate::helpers::{Backend, TestDb, spawn_app_with};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_scrape_reads_a_bounded_range_at_most_once_a_second() {
    let db = TestDb::new(Backend::Sqlite).await.expect("sqlite");
    for sql in chatgate::store::SNAPSHOT_QUERIES {
        let steps = db.plan(sql, 1).await;
        // `agents` holds a row per configured agent; `figures` a few per figure (its minutes are
        // forgotten after the hour a scrape adds up): neither grows with traffic. `orphans` and
        // `waiting` (the pending approvals) are the counts' own subqueries, at most 10,000 rows.
        let bounded = ["agents", "figures", "SCAN orphans", "SCAN waiting"];
        let bounded = |step: &&String| bounded.iter().any(|t| step.contains(t));
        let whole = steps.iter().filter(|s| s.starts_with("SCAN") && !bounded(s)).collect::<Vec<_>>();
        assert!(whole.is_empty(), "a scrape reads a whole table: {sql}\n{steps:#?}");
        assert!(!sql.contains("FROM deliveries WHERE"), "a scrape counts no delivery: {sql}");
    }
    let app = spawn_app_with(&db, db.config.clone()).await;
    let scrapes: Vec<_> = (0..40).map(|_| app.client.get(app.url("/metrics")).send()).collect();
    for scrape in futures_util::future::join_all(scrapes).await {
        assert_eq!(scrape.expect("scrape").status(), StatusCode::OK);
    }
    let state = chatgate::http::AppState::new(crate::helpers::test_settings(db.config.clone()), db.store.clone());
    let figures = &state.figures;
    for _ in 0..10 {
        figures.get(&state.database).await.expect("figures");
    }
    assert_eq!(figures.reads(), 1, "ten reads within a second are one");
    app.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_token_protects_the_metrics() {
    let db = TestDb::sqlite().await;
    let mut config = db.config.clone();
    config.metrics.token = chatgate::config::Secret::new("scrape-me");
    let app = spawn_app_with(&db, config).await;
    let without = app.client.get(app.url("/metrics")).send().await.expect("scrape");
    assert_eq!(without.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(without.headers()["content-type"], "application/problem+json");
    let wrong = app.client.get(app.url("/metrics")).bearer_auth("scrape-you").send().await.expect("scrape");
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    let right = app.client.get(app.url("/metrics")).bearer_auth("scrape-me").send().await.expect("scrape");
    assert_eq!(right.status(), StatusCode::OK);
    assert!(right.text().await.expect("text").contains("chatgate_store_up"));
    app.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_can_have_an_address_of_their_own() {
    let config = crate::process::ConfigDir::shipped(|c| c);
    let database = format!("sqlite://{}/chatgate.db", config.dir.path().display());
    let log = config.dir.path().join("gateway.log");
    // The shipped configuration reads `metrics.listen` from the environment.
    let env = vec![
        ("CHATGATE_DATABASE_URL".to_owned(), database),
        ("CHATGATE_METRICS_LISTEN".to_owned(), "127.0.0.1:0".to_owned()),
    ];
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_chatgate"));
    let gateway = crate::process::Gateway::start(bin, &config.path(), &env, Some(log.clone())).await.expect("gateway");
    let text = std::fs::read_to_string(&log).expect("log");
    let apart = text.lines().find_map(|l| l.split("metrics listening addr=").nth(1)).expect("the metrics address");
    let apart = apart.split_whitespace().next().expect("address").to_owned();
    let client = reqwest::Client::new();
    let main = client.get(gateway.url("/metrics")).send().await.expect("main");
    assert_eq!(main.status(), StatusCode::NOT_FOUND, "not on the main address");
    let own = client.get(format!("http://{apart}/metrics")).send().await.expect("own");
    assert_eq!(own.status(), StatusCode::OK);
    let text = own.text().await.expect("text");
    assert!(text.contains("chatgate_store_up"));
    // A gateway that has done nothing yet shows the series alerts name, at 0 (issue 30.3).
    for series in [
        "chatgate_confirmations_expired_total 0",
        "chatgate_webhooks_total{channel=\"whatsapp\",outcome=\"bad_signature\"} 0",
        "chatgate_dispatch_attempts_total{executor=\"orders\",outcome=\"failed\"} 0",
        "chatgate_unknown_sender_refusals_unsent_total{tenant=\"demo\"} 0",
    ] {
        assert!(text.lines().any(|l| l == series), "{series} is not there at 0");
    }
}

/// Issue 30.3: Prometheus's conventions — every family with `# HELP` and `# TYPE`, no gauge named
/// as if it were `rate()`, the series alerts name there from the first scrape (at 0), and the
/// agents gauge agreeing with `/v1/agents`. CI runs `promtool check metrics` on a scrape too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_family_is_described_present_from_the_start_and_agrees_with_the_api() {
    let db = TestDb::sqlite().await;
    let app = spawn_app_with(&db, db.config.clone()).await;
    let text = app.client.get(app.url("/metrics")).send().await.expect("scrape").text().await.expect("text");
    let named = |prefix: &str| -> std::collections::BTreeSet<String> {
        text.lines().filter_map(|l| l.strip_prefix(prefix)?.split_whitespace().next().map(str::to_owned)).collect()
    };
    let (typed, described) = (named("# TYPE "), named("# HELP "));
    assert!(typed.iter().all(|f| described.contains(f)), "without help: {:?}", typed.difference(&described));
    assert!(typed.iter().all(|f| !f.ends_with("_rate")), "a gauge named like rate(): {typed:?}");
    for family in chatgate::service::telemetry::catalog::FAMILIES {
        let histogram = family.kind == chatgate::service::telemetry::catalog::Kind::Histogram;
        assert!(histogram || typed.contains(family.name), "{} is missing from the start", family.name);
    }
    // The counters other tests of this process move are there; at 0 in a fresh process below.
    for series in [
        "chatgate_confirmations_expired_total ",
        "chatgate_webhooks_total{channel=\"hooks\",outcome=\"unknown_app\"} ",
        "chatgate_delivery_timeouts_total{class=\"execution_timeout\"} ",
        "chatgate_completeness_ack_ratio ",
    ] {
        assert!(text.lines().any(|l| l.starts_with(series)), "{series}is not there");
    }
    let token = crate::helpers::api_token(&db, "demo", "ops", "agents:read");
    let agents: serde_json::Value = app
        .client
        .get(app.url("/v1/agents"))
        .bearer_auth(token)
        .send()
        .await
        .expect("agents")
        .json()
        .await
        .expect("json");
    let listed = agents["agents"].as_array().expect("agents listed");
    let idle = listed.iter().filter(|a| a["state"] == "idle").count();
    assert!(idle > 0, "{agents}");
    assert!(text.lines().any(|l| l == format!("chatgate_agents{{state=\"idle\"}} {idle}")), "idle agents: {idle}");
    app.stop().await.expect("stop");
}

/// The metric names `docs/REFERENCE.md`'s `/metrics` row documents (`chatgate_{a,b}_ratio`
/// expanded).
fn documented_metrics() -> std::collections::BTreeSet<String> {
    let reference = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/REFERENCE.md")).expect("doc");
    let row = reference.lines().find(|l| l.starts_with("| `GET /metrics`")).expect("the /metrics row");
    let mut names = std::collections::BTreeSet::new();
    for (at, _) in row.match_indices("`chatgate_") {
        let name: String = row[at + 1..].chars().take_while(|c| *c != '`' && *c != '{').collect();
        let rest = &row[at + 1 + name.len()..];
        match rest.strip_prefix('{').and_then(|r| r.split_once('}')) {
            // `chatgate_completeness_{ack,result,error}_ratio`: a brace right after `_` is a set.
            Some((choices, tail)) if name.ends_with('_') => {
                let tail: String = tail.chars().take_while(|c| *c != '`').collect();
                names.extend(choices.split(',').map(|choice| format!("{name}{}{tail}", choice.trim())));
            }
            _ => {
                names.insert(name);
            }
        }
    }
    names
}

/// Issue 44.9: a gateway that has done nothing yet exports every documented family and every
/// family of the catalog with a sample (histograms with their empty buckets), so that dashboards and
/// alerts exist before the first incident; `promtool check metrics` (Prometheus's own linter, which
/// `.ci/run` installs) finds nothing to say about it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_metric_is_exported_from_the_first_scrape() {
    let db = TestDb::sqlite().await;
    let app = spawn_app_with(&db, db.config.clone()).await;
    let text = app.client.get(app.url("/metrics")).send().await.expect("scrape").text().await.expect("text");
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).expect("Prometheus text");
    let sampled: std::collections::BTreeSet<&str> = scrape
        .samples
        .iter()
        .map(|s| s.metric.trim_end_matches("_bucket").trim_end_matches("_sum").trim_end_matches("_count"))
        .collect();
    let catalog = chatgate::service::telemetry::catalog::FAMILIES.iter().map(|f| f.name.to_owned());
    let documented = documented_metrics();
    assert!(documented.len() >= 40, "the row names the families: {documented:?}");
    let missing: Vec<String> =
        documented.into_iter().chain(catalog).filter(|n| !sampled.contains(n.as_str())).collect();
    assert!(missing.is_empty(), "documented but not exported before their first event: {missing:?}");
    match std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Ok(mut promtool) => {
            use std::io::Write;
            promtool.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("to promtool");
            let checked = promtool.wait_with_output().expect("promtool");
            let said =
                format!("{}{}", String::from_utf8_lossy(&checked.stdout), String::from_utf8_lossy(&checked.stderr));
            assert!(checked.status.success() && said.trim().is_empty(), "promtool check metrics: {said}");
        }
        Err(_) => eprintln!("skipped promtool: not installed (.ci/run installs Debian's prometheus)"),
    }
    app.stop().await.expect("stop");
}
