//! Issue 27.13: docs/REFERENCE.md and the OpenAPI document say the same thing. Every operation
//! the document describes has a row in the reference and every row names an operation the
//! document describes; the scope a row names is the scope the document requires; the problem
//! document's schema lists every member a problem carries; the hook bridge and the metrics say
//! how a caller proves itself; the evidence row names the fields an artifact has.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE"];

fn document() -> Value {
    let config = chatgate::config::Config::default();
    chatgate::http::openapi::document(&config.hooks)
}

fn reference() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/REFERENCE.md")).expect("the reference")
}

/// The rows of the reference's "HTTP endpoints" table: (every `METHOD /path` its first cell
/// names, the row's text).
fn rows(reference: &str) -> Vec<(Vec<(String, String)>, String)> {
    let table = reference.split("## HTTP endpoints").nth(1).expect("the endpoints section");
    let table = table.split("\n\n").find(|block| block.contains("| --- |")).expect("the table");
    let mut rows = vec![];
    for line in table.lines().filter(|l| l.starts_with("| `")) {
        let first = line.split(" | ").next().unwrap_or_default();
        let mut endpoints = vec![];
        let mut method = String::new();
        let mut base = String::new();
        for span in first.split('`').skip(1).step_by(2) {
            let (m, path) = match span.split_once(' ') {
                Some((m, path)) if METHODS.contains(&m) => (m.to_owned(), path.to_owned()),
                // `/resume` after `POST /v1/agents/{agent}/pause`: the same method, a sibling.
                _ => (method.clone(), format!("{}{span}", base.rsplit_once('/').map_or("", |(parent, _)| parent))),
            };
            let path = path.split('?').next().unwrap_or_default().to_owned();
            // `/webhooks/whatsapp[/{app}]`: both.
            for path in match path.split_once('[') {
                Some((head, rest)) => vec![head.to_owned(), format!("{head}{}", rest.trim_end_matches(']'))],
                None => vec![path],
            } {
                endpoints.push((m.clone(), path.clone()));
                base = path;
            }
            method = m;
        }
        rows.push((endpoints, line.to_owned()));
    }
    rows
}

fn operations(document: &Value) -> BTreeSet<(String, String)> {
    let mut found = BTreeSet::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("an item").keys() {
            found.insert((method.to_uppercase(), path.clone()));
        }
    }
    found
}

#[test]
fn every_operation_has_its_row_and_every_row_its_operation() {
    let (document, reference) = (document(), reference());
    let described = operations(&document);
    let rows = rows(&reference);
    let referenced: BTreeSet<(String, String)> =
        rows.iter().flat_map(|(endpoints, _)| endpoints.clone()).filter(|(_, p)| !p.starts_with("/console")).collect();
    let missing: Vec<_> = described.difference(&referenced).collect();
    assert!(missing.is_empty(), "operations without a row in docs/REFERENCE.md: {missing:?}");
    let unknown: Vec<_> = referenced.difference(&described).collect();
    assert!(unknown.is_empty(), "rows of docs/REFERENCE.md the OpenAPI document does not describe: {unknown:?}");
}

#[test]
fn each_row_names_the_scope_the_document_requires() {
    let (document, reference) = (document(), reference());
    for (endpoints, row) in rows(&reference) {
        for (method, path) in endpoints.iter().filter(|(_, p)| !p.starts_with("/console")) {
            let operation = &document["paths"][path][method.to_lowercase()];
            let scopes: Vec<&str> = operation["security"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|requirement| requirement["bearer"].as_array())
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            for scope in &scopes {
                assert!(row.contains(&format!("scope `{scope}`")), "{method} {path} requires `{scope}`: {row}");
            }
            if scopes.is_empty() {
                assert!(!row.contains("scope `"), "{method} {path} requires no scope, its row names one: {row}");
            }
        }
    }
}

#[test]
fn the_problem_schema_lists_every_member_a_problem_carries() {
    let document = document();
    let properties = document["components"]["schemas"]["Problem"]["properties"].as_object().expect("Problem");
    let mut members: BTreeSet<String> =
        ["type", "title", "status", "detail", "code", "request_id"].map(String::from).into();
    let mut files = vec![];
    crate::architecture::source_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
    for file in files {
        let text = std::fs::read_to_string(&file).expect("source");
        for (at, _) in text.match_indices(".with(\"") {
            let name: String = text[at + 7..].chars().take_while(|c| *c != '"').collect();
            members.insert(name);
        }
    }
    let missing: Vec<_> = members.iter().filter(|m| !properties.contains_key(m.as_str())).collect();
    assert!(missing.is_empty(), "members problems carry that the Problem schema lacks: {missing:?}");
}

#[test]
fn the_hook_bridge_and_the_metrics_say_how_a_caller_proves_itself() {
    let document = document();
    for (path, item) in document["paths"].as_object().expect("paths") {
        if path.starts_with("/hooks/") || path == "/metrics" {
            for (method, operation) in item.as_object().expect("item") {
                assert!(operation["security"].as_array().is_some_and(|s| !s.is_empty()), "{method} {path}");
            }
        }
    }
    let schemes = document["components"]["securitySchemes"].as_object().expect("schemes");
    for scheme in ["bearer", "hooks_token", "hooks_header", "metrics_token"] {
        assert!(schemes.contains_key(scheme), "{scheme}");
    }
}

#[test]
fn the_evidence_row_names_the_fields_an_artifact_has() {
    let (document, reference) = (document(), reference());
    let row = rows(&reference)
        .into_iter()
        .find(|(endpoints, _)| endpoints.iter().any(|(_, p)| p == "/v1/commands/{id}/evidence"))
        .expect("the evidence row")
        .1;
    let artifact = document["components"]["schemas"]["Artifact"]["properties"].as_object().expect("Artifact");
    for field in artifact.keys() {
        assert!(row.contains(&format!("`{field}`")), "the evidence row does not name `{field}`: {row}");
    }
}

#[test]
fn every_reference_in_the_document_resolves() {
    let document = document();
    let mut refs = vec![];
    fn collect(value: &Value, refs: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(target)) = map.get("$ref") {
                    refs.push(target.clone());
                }
                map.values().for_each(|v| collect(v, refs));
            }
            Value::Array(items) => items.iter().for_each(|v| collect(v, refs)),
            _ => {}
        }
    }
    collect(&document, &mut refs);
    assert!(!refs.is_empty());
    let broken: Vec<&String> =
        refs.iter().filter(|r| r.strip_prefix('#').is_none_or(|p| document.pointer(p).is_none())).collect();
    assert!(broken.is_empty(), "references to nothing: {broken:?}");
}
