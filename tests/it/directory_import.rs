//! Issue 28.2: the bulk import and the export. JSON lines and CSV upsert line by line: a line
//! that is not valid is reported with its number and nothing of it is stored, the rest is; the
//! same file twice changes nothing (no write, no evidence); what the export writes, the import
//! reads back unchanged.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::directory_api::{Api, DIRECTORY_SCOPES};
use crate::helpers::{TestApp, TestDb, api_token, on_both_backends, spawn_app_with};

on_both_backends!(
    an_import_twice_changes_nothing_and_bad_lines_are_reported_by_number,
    csv_imports_and_the_export_reads_back
);

pub async fn import(app: &TestApp, token: &str, content_type: &str, body: String) -> (StatusCode, Value) {
    let request = app.client.post(app.url("/v1/directory/import")).bearer_auth(token);
    let response = request.header("content-type", content_type).body(body).send().await.expect("import");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn people(db: &TestDb) -> i64 {
    db.count("SELECT COUNT(*) FROM directory_people WHERE tenant_id = $1", "demo").await
}

async fn changes(db: &TestDb) -> i64 {
    db.count("SELECT COUNT(*) FROM evidence WHERE kind = $1", "directory.changed").await
}

async fn an_import_twice_changes_nothing_and_bad_lines_are_reported_by_number(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let token = api_token(db, "demo", "ops-1", DIRECTORY_SCOPES);
    let lines = [
        r#"{"id": "c-1042", "name": "Ana", "roles": ["customer"], "addresses": {"whatsapp": "5511999990000"}}"#,
        r#"{"id": "c-1043", "name": "Bruno", "roles": ["customer"]"#,
        r#"{"id": "c-1044", "name": "Carla", "roles": ["customer"], "addresses": {"phone": "+44 20 7946 0000"}}"#,
        "",
        r#"{"id": "c-1045", "name": "Duda", "roles": ["ghost"]}"#,
        r#"{"id": "c-1046", "name": "Eva", "addresses": {"whatsapp": "15550000001"}}"#,
        r#"{"id": "c-1047", "name": "Fabio", "locale": "pt-BR"}"#,
    ];
    let (before, evidence_before) = (people(db).await, changes(db).await);
    let (status, report) = import(&app, &token, "application/x-ndjson", lines.join("\n")).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!((report["created"].clone(), report["refused"].clone()), (json!(3), json!(3)), "{report}");
    let refused: Vec<u64> =
        report["problems"].as_array().expect("problems").iter().filter_map(|p| p["line"].as_u64()).collect();
    assert_eq!(refused, [2, 5, 6], "{report}");
    assert!(report["problems"][1]["problem"].as_str().is_some_and(|p| p.contains("ghost")), "{report}");
    assert!(report["problems"][2]["problem"].as_str().is_some_and(|p| p.contains("15550000001")), "{report}");
    assert_eq!(people(db).await - before, 3, "nothing of a refused line is stored");
    let api = Api::new(&app, db);
    assert_eq!(api.get("/v1/directory/actors/c-1043").await.0, StatusCode::NOT_FOUND);
    let after_first = changes(db).await;
    assert!(after_first > evidence_before, "the import is evidence");
    // The same file again: nothing changes, nothing is written.
    let (_, again) = import(&app, &token, "application/x-ndjson", lines.join("\n")).await;
    assert_eq!(
        (again["created"].clone(), again["updated"].clone(), again["unchanged"].clone()),
        (json!(0), json!(0), json!(3))
    );
    assert_eq!(changes(db).await, after_first, "no evidence for a change that did not happen");
    assert_eq!(api.get("/v1/directory/actors/c-1042").await.1["version"], 1);
    // A file none of whose lines can be imported is a 422 naming them; not JSON lines nor CSV, a 415.
    let (status, problem) = import(&app, &token, "application/x-ndjson", "{}\nnot json\n[\"c-77\"]\n".into()).await;
    assert_eq!(
        (status, problem["problems"][1]["line"].clone(), problem["problems"][2]["line"].clone()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!(2), json!(3)),
        "{problem}"
    );
    assert_eq!(import(&app, &token, "application/json", lines[0].into()).await.0, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let (_, audit) = api.get("/v1/audit/verify").await;
    assert_eq!(audit["intact"], true);
    app.stop().await.expect("stop");
}

async fn csv_imports_and_the_export_reads_back(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let token = api_token(db, "demo", "ops-1", DIRECTORY_SCOPES);
    let csv = "id,name,roles,whatsapp,active\nc-1,\"Silva, Ana\",customer;admin,+55 11 98888-0001,yes\nc-2,Bo,customer,,no\nc-3,Cy,customer,123,\n";
    let (status, report) = import(&app, &token, "text/csv; charset=utf-8", csv.into()).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!((report["created"].clone(), report["refused"].clone()), (json!(2), json!(1)), "{report}");
    assert_eq!(report["problems"][0]["line"], 4, "a number of three digits is not one");
    let api = Api::new(&app, db);
    let (_, ana) = api.get("/v1/directory/actors/c-1").await;
    assert_eq!((ana["name"].clone(), ana["roles"].clone()), (json!("Silva, Ana"), json!(["customer", "admin"])));
    assert_eq!(api.get("/v1/directory/actors/c-2").await.1["active"], false);
    let (status, problem) = import(&app, &token, "text/csv", "id,fax\nc-9,1\n".into()).await;
    assert_eq!((status, problem["code"].clone()), (StatusCode::UNPROCESSABLE_ENTITY, json!("invalid_header")));
    // The export, imported again, changes nothing.
    let export = app.client.get(app.url("/v1/directory/export")).bearer_auth(&token).send().await.expect("export");
    assert_eq!(export.headers()["content-type"], "application/x-ndjson");
    let exported = export.text().await.expect("lines");
    let total = people(db).await;
    assert_eq!(exported.lines().count() as i64, total, "{exported}");
    let (_, again) = import(&app, &token, "application/x-ndjson", exported).await;
    assert_eq!((again["unchanged"].clone(), again["refused"].clone()), (json!(total), json!(0)), "{again}");
    app.stop().await.expect("stop");
}
