//! Issue 28.7: a person's data erased on request. A person writes (a question, a refund they
//! confirm, a word that is no command), is answered, then erased with the operator's step-up
//! proof: no table holds their number, their name or their messages' text any more (every text
//! column of every table searched), their commands and outcomes stay under the erased id, and
//! the evidence chain still verifies.

use reqwest::StatusCode;
use serde_json::json;

use crate::directory_api::Api;
use crate::fake_graph::{FakeGraph, sending_through, text_of};
use crate::helpers::{Backend, Meta, TestDb, on_both_backends, spawn_app_with, test_settings};

on_both_backends!(an_erased_person_leaves_no_number_or_text_and_the_chain_verifies);

const NUMBER: &str = "15557654321";
const NAME: &str = "Zed Quokka";
const TEXTS: &[&str] = &["order status 4242", "refund 4242 9.99", "hello, here is my secret wombat"];

/// Every (table, column) that holds text.
async fn text_columns(db: &TestDb) -> Vec<(String, String)> {
    let mut conn = db.raw().await;
    let sql = match if db.url.starts_with("postgres") { Backend::Postgres } else { Backend::Sqlite } {
        Backend::Sqlite => {
            "SELECT m.name AS t, p.name AS c FROM sqlite_master m JOIN pragma_table_info(m.name) p
             WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name <> '_sqlx_migrations'
               AND (p.type LIKE '%TEXT%' OR p.type LIKE '%CHAR%')"
        }
        Backend::Postgres => {
            "SELECT table_name::text AS t, column_name::text AS c FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name <> '_sqlx_migrations'
               AND data_type IN ('text', 'character varying')"
        }
    };
    let rows = sqlx::query(sql).fetch_all(&mut conn).await.expect("columns");
    rows.iter().map(|row| (sqlx::Row::get::<String, _>(row, "t"), sqlx::Row::get::<String, _>(row, "c"))).collect()
}

/// Where `needle` is still written: `table.column` for each.
async fn traces_of(db: &TestDb, needle: &str) -> Vec<String> {
    let mut found = vec![];
    let mut conn = db.raw().await;
    for (table, column) in text_columns(db).await {
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE {column} LIKE $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(format!("%{needle}%"))
            .fetch_one(&mut conn)
            .await
            .expect("search");
        if sqlx::Row::get::<i64, _>(&row, 0) > 0 {
            found.push(format!("{table}.{column}"));
        }
    }
    found
}

async fn an_erased_person_leaves_no_number_or_text_and_the_chain_verifies(db: &TestDb) {
    let graph = FakeGraph::start().await;
    let app = spawn_app_with(db, sending_through(&db.config, &graph)).await;
    let (api, meta) = (Api::new(&app, db), Meta::new(&app, db));
    let person = json!({"id": NUMBER, "name": NAME, "roles": ["customer"], "addresses": {"whatsapp": NUMBER}});
    assert_eq!(api.post("/v1/directory/actors", person).await.0, StatusCode::CREATED);
    for (n, text) in TEXTS.iter().enumerate() {
        assert_eq!(meta.text(&format!("wamid.E{n}"), NUMBER, text).await.status(), 200);
    }
    // They confirm the refund (the one confirmation waiting: a bare yes).
    let prompts = graph.wait_for(3, std::time::Duration::from_secs(10)).await;
    assert!(prompts.iter().any(|r| text_of(&r.body).starts_with("Please confirm")), "a prompt");
    assert_eq!(meta.text("wamid.E9", NUMBER, "yes").await.status(), 200);
    let refund = crate::helpers::command_of_message(db, "wamid.E1").await;
    assert_eq!(crate::helpers::settled(db, refund).await, "executed");
    graph.wait_for(5, std::time::Duration::from_secs(10)).await;
    for needle in [NUMBER, NAME].iter().chain(TEXTS) {
        assert!(!traces_of(db, needle).await.is_empty(), "`{needle}` is written before the erasure");
    }

    // Without a step-up proof: refused, with what to mint; with one, erased; nothing left.
    let (status, problem) = api.post(&format!("/v1/directory/actors/{NUMBER}/erasure"), json!({})).await;
    assert_eq!(
        (status, problem["code"].clone()),
        (StatusCode::UNAUTHORIZED, json!("insufficient_user_authentication"))
    );
    let tenant = crate::helpers::tenant("demo");
    let (command, key) = chatgate::service::directory::erasure_binding(&tenant, NUMBER);
    let now = time::OffsetDateTime::now_utc();
    let token = test_settings(db.config.clone()).security.stepup.mint("ops-1", command, &key, now).expect("step-up");
    let erase = app.client.post(app.url(&format!("/v1/directory/actors/{NUMBER}/erasure"))).bearer_auth(&api.token);
    let erased = erase.header("step-up", &token).send().await.expect("erase");
    assert_eq!(erased.status(), StatusCode::OK);
    let report: serde_json::Value = erased.json().await.expect("report");
    assert_eq!((report["commands"].clone(), report["messages"].clone()), (json!(2), json!(4)), "{report}");
    for needle in [NUMBER, NAME].iter().chain(TEXTS) {
        assert_eq!(traces_of(db, needle).await, Vec::<String>::new(), "`{needle}` is still written");
    }
    // The replies to them keep no text either.
    let erased_id = report["erased_id"].as_str().expect("id").to_owned();
    let mut conn = db.raw().await;
    let replies = sqlx::query("SELECT payload FROM outbox WHERE kind = 'message' AND destination LIKE $1")
        .bind(format!("%{erased_id}%"))
        .fetch_all(&mut conn)
        .await
        .expect("replies");
    assert!(replies.len() >= 4, "the answers, the prompt, the confirmation");
    assert!(replies.iter().all(|r| sqlx::Row::get::<String, _>(r, "payload") == chatgate::store::ERASED_PAYLOAD));
    // Their commands and outcomes stay, under the erased id; the chain verifies.
    let kept = db.store.commands().get(&tenant, refund).await.expect("read").expect("the refund");
    assert_eq!(
        (kept.lifecycle.state.as_str(), kept.envelope.actor_id.as_str()),
        ("executed", report["erased_id"].as_str().expect("id"))
    );
    let (_, audit) = api.get("/v1/audit/verify").await;
    assert_eq!(audit["intact"], true, "{audit}");
    assert_eq!(api.get(&format!("/v1/directory/actors/{NUMBER}")).await.0, StatusCode::NOT_FOUND);
    app.stop().await.expect("stop");
}
