//! Issue 28: the directory as data, through the operator API. People made, found, changed,
//! deactivated and deleted, roles set and removed, each change evidence in the tenant's chain
//! (audit verify holds); a person added through the API writes at once and one deactivated is a
//! stranger; a role for senders nobody listed; the file seeds and the database wins.

use reqwest::StatusCode;
use serde_json::{Value, json};

use chatgate::domain::command::TenantId;
use chatgate::http::server::AppState;
use chatgate::service::directory::{ChangedBy, Changing, SeedReport};

use crate::helpers::{
    CUSTOMER, Meta, TestApp, TestDb, api_token, on_both_backends, spawn_app_with, spawn_app_with_files, test_settings,
};

on_both_backends!(
    operators_manage_people_and_roles_and_every_change_is_evidence,
    a_person_added_through_the_api_writes_at_once_and_one_deactivated_is_a_stranger,
    strangers_write_in_the_tenants_role_for_them_and_may_read_but_not_refund,
    the_file_seeds_the_directory_and_the_database_wins_once_the_api_changed_a_row,
    the_file_is_applied_once_at_start_and_not_held_after,
);

pub const DIRECTORY_SCOPES: &str = "directory:read directory:write audit:read commands:read";

pub struct Api<'a> {
    pub app: &'a TestApp,
    pub token: String,
}

impl<'a> Api<'a> {
    pub fn new(app: &'a TestApp, db: &TestDb) -> Self {
        Self { app, token: api_token(db, "demo", "ops-1", DIRECTORY_SCOPES) }
    }

    pub async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut request = self.app.client.request(method, self.app.url(path)).bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("request");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.send(reqwest::Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    pub async fn patch(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(reqwest::Method::PATCH, path, Some(body)).await
    }
}

async fn changes(db: &TestDb) -> i64 {
    db.count("SELECT COUNT(*) FROM evidence WHERE kind = $1", "directory.changed").await
}

async fn operators_manage_people_and_roles_and_every_change_is_evidence(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let api = Api::new(&app, db);
    let seeded = changes(db).await;
    assert!(seeded > 0, "the file's roles and people are evidence too");
    let ana =
        json!({"id": "c-1042", "name": "Ana", "roles": ["customer"], "addresses": {"whatsapp": "+55 11 99999-0000"}});
    let (status, made) = api.post("/v1/directory/actors", ana.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!((made["version"].clone(), made["addresses"]["whatsapp"][0].clone()), (json!(1), json!("5511999990000")));
    assert_eq!(api.post("/v1/directory/actors", ana).await.0, StatusCode::CONFLICT, "the id is taken");
    // Found by name (any part, any case), by number and by id.
    for q in ["ana", "+55 11 99999-0000", "c-1042"] {
        let (_, page) = api.get(&format!("/v1/directory/actors?q={}", urlencode(q))).await;
        assert_eq!(page["actors"][0]["id"], "c-1042", "{q}: {page}");
    }
    let (_, customers) = api.get("/v1/directory/actors?role=customer&limit=1").await;
    assert_eq!(customers["actors"].as_array().map(Vec::len), Some(1));
    assert!(customers["next_cursor"].is_string(), "two customers, a page of one: {customers}");
    // Changed at the version read; a stale `If-Match` is refused and changes nothing.
    let stale =
        app.client.patch(app.url("/v1/directory/actors/c-1042")).bearer_auth(&api.token).header("if-match", "\"7\"");
    let stale = stale.json(&json!({"name": "Ana Maria"})).send().await.expect("patch");
    assert_eq!(stale.status(), StatusCode::PRECONDITION_FAILED);
    let (status, renamed) =
        api.patch("/v1/directory/actors/c-1042", json!({"name": "Ana Maria", "locale": "pt-BR"})).await;
    assert_eq!(
        (status, renamed["version"].clone(), renamed["locale"].clone()),
        (StatusCode::OK, json!(2), json!("pt-BR"))
    );
    // Refused with a reason, nothing stored: an unknown role, someone else's number, a bad body.
    let (status, problem) = api.patch("/v1/directory/actors/c-1042", json!({"roles": ["ghost"]})).await;
    assert_eq!((status, problem["code"].clone()), (StatusCode::UNPROCESSABLE_ENTITY, json!("invalid_person")));
    let taken = json!({"addresses": {"whatsapp": CUSTOMER}});
    let (status, problem) = api.patch("/v1/directory/actors/c-1042", taken).await;
    assert_eq!((status, problem["code"].clone()), (StatusCode::CONFLICT, json!("address_taken")), "{problem}");
    assert_eq!(api.patch("/v1/directory/actors/c-1042", json!({"rolez": []})).await.0, StatusCode::BAD_REQUEST);
    assert_eq!(api.patch("/v1/directory/actors/c-1042", json!([null, null])).await.0, StatusCode::BAD_REQUEST);
    assert_eq!(api.get("/v1/directory/actors/c-1042").await.1["version"], 2, "the refusals changed nothing");
    let (_, off) = api.patch("/v1/directory/actors/c-1042", json!({"active": false})).await;
    assert_eq!(off["active"], false);
    // Roles: set, not a deployment's scope, not removed while held.
    let scopes = json!({"scopes": ["orders:read"]});
    assert_eq!(
        api.send(reqwest::Method::PUT, "/v1/directory/roles/guest", Some(scopes)).await.0,
        StatusCode::NO_CONTENT
    );
    let admin = json!({"scopes": ["agents:admin"]});
    assert_eq!(
        api.send(reqwest::Method::PUT, "/v1/directory/roles/boss", Some(admin)).await.0,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(api.send(reqwest::Method::DELETE, "/v1/directory/roles/customer", None).await.0, StatusCode::CONFLICT);
    assert_eq!(api.send(reqwest::Method::DELETE, "/v1/directory/roles/guest", None).await.0, StatusCode::NO_CONTENT);
    assert_eq!(api.send(reqwest::Method::DELETE, "/v1/directory/actors/c-1042", None).await.0, StatusCode::NO_CONTENT);
    assert_eq!(api.get("/v1/directory/actors/c-1042").await.0, StatusCode::NOT_FOUND);
    // Made, renamed, deactivated, deleted; a role set and removed: six changes, each evidence.
    assert_eq!(changes(db).await - seeded, 6);
    let (_, audit) = api.get("/v1/audit/verify").await;
    assert_eq!(audit["intact"], true, "{audit}");
    // Reading takes `directory:read`, changing `directory:write`.
    let reader = Api { app: &app, token: api_token(db, "demo", "ops-2", "directory:read") };
    assert_eq!(reader.get("/v1/directory/actors").await.0, StatusCode::OK);
    assert_eq!(reader.post("/v1/directory/actors", json!({"id": "x-1"})).await.0, StatusCode::FORBIDDEN);
    app.stop().await.expect("stop");
}

async fn a_person_added_through_the_api_writes_at_once_and_one_deactivated_is_a_stranger(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let (api, meta) = (Api::new(&app, db), Meta::new(&app, db));
    let person = json!({"id": "c-7", "name": "Bea", "roles": ["customer"], "addresses": {"whatsapp": "15557770007"}});
    assert_eq!(api.post("/v1/directory/actors", person).await.0, StatusCode::CREATED);
    assert_eq!(meta.text("wamid.D1", "15557770007", "order status 41").await.status(), 200);
    let id = crate::helpers::command_of_message(db, "wamid.D1").await;
    assert_eq!(crate::helpers::settled(db, id).await, "executed");
    let (_, command) = Api { app: &app, token: api.token.clone() }.get(&format!("/v1/commands/{id}")).await;
    assert_eq!(command["envelope"]["actor_id"], "c-7", "{command}");
    api.patch("/v1/directory/actors/c-7", json!({"active": false})).await;
    assert_eq!(meta.text("wamid.D2", "15557770007", "order status 41").await.status(), 200);
    let status = db.count(
        "SELECT COUNT(*) FROM inbound_messages WHERE provider_message_id = $1 AND status = 'refused_unknown_sender'",
        "wamid.D2",
    );
    assert_eq!(status.await, 1, "a deactivated person is a stranger");
    app.stop().await.expect("stop");
}

async fn strangers_write_in_the_tenants_role_for_them_and_may_read_but_not_refund(db: &TestDb) {
    let directory = crate::helpers::test_directory()
        .replace("unknown_sender = \"refuse\"", "unknown_sender = { role = \"guest\" }")
        .replace("[tenants.demo.roles]\n", "[tenants.demo.roles]\nguest = [\"orders:read\"]\n");
    let commands = chatgate::config::SHIPPED_COMMANDS;
    let app = spawn_app_with_files(db, db.config.clone(), commands, &directory).await;
    let meta = Meta::new(&app, db);
    assert_eq!(meta.text("wamid.G1", "15558880008", "order status 41").await.status(), 200);
    let read = crate::helpers::command_of_message(db, "wamid.G1").await;
    assert_eq!(crate::helpers::settled(db, read).await, "executed", "anyone may ask where an order is");
    assert_eq!(meta.text("wamid.G2", "15558880008", "refund 41 5.00").await.status(), 200);
    let refund = crate::helpers::command_of_message(db, "wamid.G2").await;
    assert_eq!(crate::helpers::settled(db, refund).await, "rejected", "nobody unknown may refund");
    let command = db.store.commands().get(&crate::helpers::tenant("demo"), read).await.expect("read").expect("command");
    assert_eq!(command.envelope.actor_id.as_str(), "unknown:whatsapp:15558880008");
    app.stop().await.expect("stop");
}

async fn the_file_seeds_the_directory_and_the_database_wins_once_the_api_changed_a_row(db: &TestDb) {
    let app = spawn_app_with(db, db.config.clone()).await;
    let api = Api::new(&app, db);
    let (_, seeded) = api.get(&format!("/v1/directory/actors/{CUSTOMER}")).await;
    assert_eq!((seeded["source"].clone(), seeded["name"].clone()), (json!("file"), json!("Demo customer")));
    api.patch(&format!("/v1/directory/actors/{CUSTOMER}"), json!({"name": "Renamed by the API"})).await;
    app.stop().await.expect("stop");
    // The file changes both seeded people; on the next start it updates the one it still owns.
    let directory = crate::helpers::test_directory()
        .replace("name = \"Demo customer\"", "name = \"Customer, from the file\"")
        .replace("name = \"Demo admin\"", "name = \"Admin, from the file\"");
    let commands = chatgate::config::SHIPPED_COMMANDS;
    let app = crate::helpers::respawn_app_with_files(db.config.clone(), commands, &directory).await;
    let api = Api::new(&app, db);
    let (_, customer) = api.get(&format!("/v1/directory/actors/{CUSTOMER}")).await;
    assert_eq!((customer["source"].clone(), customer["name"].clone()), (json!("api"), json!("Renamed by the API")));
    let (_, admin) = api.get(&format!("/v1/directory/actors/{}", crate::helpers::ADMIN)).await;
    assert_eq!((admin["source"].clone(), admin["name"].clone()), (json!("file"), json!("Admin, from the file")));
    api.patch("/v1/directory/actors/15550000003", json!({"name": "Supervisor, by the API"})).await;
    app.stop().await.expect("stop");
    // The file no longer lists either supervisor: the one it still owns goes, the API's stays.
    let directory = directory
        .replace("[tenants.demo.actors.15550000003]\nname = \"Demo supervisor\"\nroles = [\"supervisor\"]\n", "")
        .replace("[tenants.demo.actors.15550000004]\nname = \"Second supervisor\"\nroles = [\"supervisor\"]\n", "");
    assert!(!directory.contains("15550000003") && !directory.contains("15550000004"), "both left the file");
    let app = crate::helpers::respawn_app_with_files(db.config.clone(), commands, &directory).await;
    let api = Api::new(&app, db);
    let (status, kept) = api.get("/v1/directory/actors/15550000003").await;
    assert_eq!((status, kept["source"].clone()), (StatusCode::OK, json!("api")), "the database's row stays: {kept}");
    let (status, removed) = api.get("/v1/directory/actors/15550000004").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the file's row it no longer lists goes: {removed}");
    app.stop().await.expect("stop");
}

pub fn urlencode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// The file is applied as the gateway starts and not held after (10,000 people are megabytes):
/// a second `prepare` of the same gateway has nothing left to apply, so a person deleted
/// meanwhile stays deleted until the file is read again (a restart, a reload).
async fn the_file_is_applied_once_at_start_and_not_held_after(db: &TestDb) {
    let now = time::OffsetDateTime::now_utc();
    let state = AppState::new(test_settings(db.config.clone()), db.store.clone());
    let first = state.services.prepare(now).await.expect("the file is applied");
    assert!(first.people_written > 0, "a fresh database takes the file's people: {first:?}");
    let demo = TenantId::parse("demo").expect("tenant id");
    let people = &state.services.policy.people;
    let who = Changing { tenant: &demo, by: ChangedBy::Operator("ops-1".into()), at: now };
    people.delete(&who, CUSTOMER, None).await.expect("the file's customer is deleted");

    let again = state.services.prepare(now).await.expect("nothing to apply is no failure");
    assert_eq!(again, SeedReport::default());
    assert!(people.get(&demo, CUSTOMER).await.expect("read").is_none(), "the file was not applied again");
}
