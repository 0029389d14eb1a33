//! The house rules, read from the code itself (docs/ARCHITECTURE.md): every `crate::` path in
//! `src/` points to the same layer or one below it; the domain does no I/O; only the HTTP layer
//! makes responses; every module says what lives in it; no file passes 400 lines and no function
//! 60 (tests aside); no line passes 120 columns; above the service nothing reaches the store but
//! through it; a request body's annotation names the type that reads it (a provider's webhook
//! format aside). Each rule is also tried on a snippet that breaks it, so that the checks
//! themselves are known to bite.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The layers, lowest first. A module may import its own layer and those before it; `channels`
/// and `executors` share a rank and do not import each other.
const LAYERS: &[(&str, u8)] = &[
    ("domain", 0),
    ("config", 1),
    ("store", 2),
    ("service", 3),
    ("channels", 4),
    ("executors", 4),
    ("workers", 5),
    ("http", 6),
    ("cli", 7),
];

/// What the domain may not name: it is pure (no I/O, no web framework, no database).
const NOT_IN_DOMAIN: &[&str] =
    &["axum::", "sqlx::", "reqwest::", "tokio::", "lapin::", "std::fs", "std::net", "tracing::", "metrics::"];

fn rank(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(name, _)| *name == module).map(|(_, rank)| *rank)
}

pub(crate) fn source_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src is readable").flatten() {
        let path = entry.path();
        if path.is_dir() {
            source_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// A file without its unit tests: each item under `#[cfg(test)]` (a `mod tests { .. }`, a
/// `mod tests;`, a helper) is left out, and the file is read on after it.
fn until_tests(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let mut kept = vec![];
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() == "#[cfg(test)]" {
            i = end_of_item(&lines, i + 1) + 1;
            continue;
        }
        kept.push(lines[i]);
        i += 1;
    }
    kept
}

/// The last line of the item that starts at `start` (its attributes first).
fn end_of_item(lines: &[&str], start: usize) -> usize {
    let mut j = start;
    while j < lines.len() && lines[j].trim_start().starts_with("#[") {
        j += 1;
    }
    let (mut depth, mut opened) = (0i64, false);
    while j < lines.len() {
        let code = without_literals(lines[j]);
        depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
        opened |= code.contains('{');
        if (opened && depth <= 0) || (!opened && code.trim_end().ends_with(';')) {
            return j;
        }
        j += 1;
    }
    lines.len().saturating_sub(1)
}

/// A line without the insides of its string and character literals and its trailing comment,
/// so that a `"{"` is not taken for a brace.
fn without_literals(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                while let Some(inner) = chars.next() {
                    match inner {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
                out.push_str("\"\"");
            }
            '\'' if matches!(chars.clone().nth(1), Some('\'')) || chars.peek() == Some(&'\\') => {
                // A character literal ('{', '\n'); a lifetime has no closing quote.
                for inner in chars.by_ref() {
                    if inner == '\'' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'/') => break,
            _ => out.push(c),
        }
    }
    out
}

/// The files that are unit tests themselves: those a parent declares as `#[cfg(test)] mod x;`.
fn test_files(files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut found = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(file).expect("a source file is text");
        let lines: Vec<&str> = text.lines().collect();
        for pair in lines.windows(2).filter(|pair| pair[0].trim() == "#[cfg(test)]") {
            let Some(name) = pair[1].trim().strip_prefix("mod ").and_then(|rest| rest.strip_suffix(';')) else {
                continue;
            };
            let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
            let dir = file.parent().unwrap_or(Path::new("."));
            let folder = if matches!(stem, "mod" | "lib" | "main") { dir.to_owned() } else { dir.join(stem) };
            found.insert(folder.join(format!("{name}.rs")));
            found.insert(folder.join(name).join("mod.rs"));
        }
    }
    found
}

/// A file's code without its unit tests and without comments (doc comments name other layers).
fn code_of(text: &str) -> Vec<&str> {
    until_tests(text).into_iter().filter(|line| !line.trim_start().starts_with("//")).collect()
}

/// The top-level module a file under `src/` belongs to (`None` for `lib.rs` and `main.rs`).
fn layer_of(relative: &Path) -> Option<String> {
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib" && name != "main").then(|| name.to_owned())
}

/// The modules `code` reaches with `crate::x` paths, including `use crate::{x, y::z}` groups.
fn imported(code: &[&str]) -> BTreeSet<String> {
    let text = code.join("\n");
    let mut found = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = group.split('}').next().unwrap_or_default();
            found.extend(group.split(',').filter_map(|item| first_word(item.trim())));
        } else if let Some(word) = first_word(rest) {
            found.insert(word);
        }
    }
    found
}

fn first_word(text: &str) -> Option<String> {
    let word: String = text.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    (!word.is_empty()).then_some(word)
}

/// Every rule broken by `code` in the file at `relative` (a path under `src/`).
fn violations(relative: &Path, text: &str) -> Vec<String> {
    let shown = relative.display();
    let mut found = vec![];
    let code = code_of(text);
    let Some(layer) = layer_of(relative) else { return found };
    let Some(own) = rank(&layer) else {
        return vec![format!("{shown}: `{layer}` is not a layer (docs/ARCHITECTURE.md lists them)")];
    };
    for other in imported(&code) {
        match rank(&other) {
            Some(theirs) if other != layer && theirs >= own => {
                found.push(format!("{shown}: `{layer}` imports `{other}`, which is not below it"))
            }
            _ => {}
        }
    }
    if layer == "domain" {
        for name in NOT_IN_DOMAIN.iter().filter(|name| code.iter().any(|line| line.contains(*name))) {
            found.push(format!("{shown}: the domain names `{name}`"));
        }
    }
    // Above the service, the store is reached through the service only (`service::database`, its
    // façades): no layer there names the store's module or asks for a repository handle.
    if own > rank("service").unwrap_or_default() {
        if code.iter().any(|line| line.contains("crate::store")) {
            found.push(format!("{shown}: `{layer}` names `crate::store`; the service is the door to the store"));
        }
        if code.iter().any(|line| without_literals(line).contains(".store()")) {
            found.push(format!("{shown}: `{layer}` calls `.store()`; the service is the door to the store"));
        }
    }
    // Every channel takes the same narrow handle — the ingress and the configuration — never the
    // whole bag of services the HTTP layer holds.
    if layer == "channels" && code.iter().any(|line| line.contains("Services")) {
        found.push(format!("{shown}: a channel names `Services`; it takes `&Ingress` and `&Config`"));
    }
    // A request body's schema is derived from the type that reads it — a provider's webhook too
    // (its envelope's type). Only the hook bridge's bodies are described apart: they are checked
    // field by field in OpenClaw's words, and which agents they may name is configuration.
    let described_apart = relative == Path::new("http/routes/webhooks/hooks.rs");
    if !described_apart && body_of_value(&code) {
        found.push(format!("{shown}: a request body annotated as `Value` or `String`; annotate its type"));
    }
    if layer != "http" && code.iter().any(|line| line.contains("IntoResponse")) {
        found.push(format!("{shown}: only the http layer makes responses (`IntoResponse`)"));
    }
    // Lengths count comments too: a room is as long as it reads.
    let whole = until_tests(text);
    if whole.len() > 400 {
        found.push(format!("{shown}: {} lines (at most 400)", whole.len()));
    }
    for (name, lines) in long_functions(&whole) {
        found.push(format!("{shown}: fn {name} has {lines} lines"));
    }
    // rustfmt keeps code within 120 columns but leaves long strings and attributes alone.
    for (number, line) in text.lines().enumerate().filter(|(_, line)| line.chars().count() > 120) {
        found.push(format!("{shown}:{}: {} columns (at most 120)", number + 1, line.chars().count()));
    }
    found
}

/// Whether a `request_body(...)` annotation says its content is a JSON `Value` or bare text (a
/// form's fields unnamed).
fn body_of_value(code: &[&str]) -> bool {
    const UNTYPED: [&str; 3] = ["serde_json::Value", "Value", "String"];
    let code = code.join("\n");
    code.match_indices("request_body(").any(|(at, _)| {
        let annotation = code[at..].split(')').next().unwrap_or_default();
        UNTYPED.iter().any(|untyped| annotation.contains(&format!("content = {untyped},")))
            || UNTYPED.iter().any(|untyped| annotation.trim_end().ends_with(&format!("content = {untyped}")))
    }) || UNTYPED.iter().any(|untyped| code.contains(&format!("request_body = {untyped}\n")))
}

/// Functions of more than 60 lines, from `fn` to its closing brace.
fn long_functions(code: &[&str]) -> Vec<(String, usize)> {
    let mut long = vec![];
    let mut i = 0;
    while i < code.len() {
        let line = code[i].trim_start();
        let starts = ["fn ", "pub fn ", "async fn ", "pub async fn ", "pub(crate) fn ", "pub(crate) async fn "]
            .iter()
            .find_map(|prefix| line.strip_prefix(prefix).or_else(|| line.strip_prefix(&format!("const {prefix}"))));
        let Some(signature) = starts.filter(|_| !line.trim_end().ends_with(';')) else {
            i += 1;
            continue;
        };
        let (mut depth, mut opened, mut j) = (0i64, false, i);
        while j < code.len() {
            let line = without_literals(code[j]);
            depth += line.matches('{').count() as i64 - line.matches('}').count() as i64;
            opened |= line.contains('{');
            if opened && depth <= 0 {
                break;
            }
            j += 1;
        }
        if j - i + 1 > 60 {
            long.push((first_word(signature).unwrap_or_default(), j - i + 1));
        }
        i = if opened { j + 1 } else { i + 1 };
    }
    long
}

#[test]
fn every_import_points_down_and_the_rooms_stay_small() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![];
    source_files(&src, &mut files);
    assert!(files.len() > 50, "the source files were found ({})", files.len());
    let mut broken = vec![];
    let tests = test_files(&files);
    for file in files.iter().filter(|file| !tests.contains(*file)) {
        let relative = file.strip_prefix(&src).expect("under src");
        let text = std::fs::read_to_string(file).expect("a source file is text");
        broken.extend(violations(relative, &text));
    }
    assert!(broken.is_empty(), "the layering is broken:\n{}", broken.join("\n"));
}

#[test]
fn every_module_says_what_lives_in_it_and_what_it_may_import() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut silent = vec![];
    for (layer, _) in LAYERS {
        let module = src.join(layer).join("mod.rs");
        let text = std::fs::read_to_string(&module).expect("each layer is a folder with a mod.rs");
        let header: Vec<&str> = text.lines().take_while(|l| l.starts_with("//!")).collect();
        let says_imports = header.iter().any(|l| l.contains("Imports") || l.contains("imports"));
        if header.is_empty() || !says_imports {
            silent.push(format!("{layer}/mod.rs"));
        }
    }
    assert!(silent.is_empty(), "these modules do not say what they hold and may import: {silent:?}");
}

#[test]
fn the_checks_bite_on_code_that_breaks_the_rules() {
    let store = Path::new("store/commands.rs");
    let upward = "use crate::domain::command::TenantId;\nuse crate::service::engine::Engine;\n";
    assert_eq!(violations(store, upward), ["store/commands.rs: `store` imports `service`, which is not below it"]);
    let grouped = "use crate::{domain, http::Problem};\n";
    assert_eq!(violations(Path::new("service/x.rs"), grouped).len(), 1, "a `use crate::{{..}}` group is read");
    let sideways = "use crate::executors::executor::Executor;\n";
    assert_eq!(violations(Path::new("channels/x.rs"), sideways).len(), 1, "channels and executors stay apart");
    let in_tests = "fn f() {}\n#[cfg(test)]\nmod tests { use crate::http::AppState; }\n";
    assert!(violations(Path::new("domain/x.rs"), in_tests).is_empty(), "unit tests may reach anywhere");
    // An item-level `#[cfg(test)]` leaves out that item only: what follows is still read.
    let after_tests = "#[cfg(test)]\nfn helper() {\n    let _ = \"{\";\n}\nuse crate::service::ooc::GATEWAY;\n";
    assert_eq!(violations(Path::new("domain/x.rs"), after_tests).len(), 1, "read past a test item");
    let braces_in_strings = format!("fn f() {{\n    let _ = \"{{{{\";\n}}\n{}", "fn g() {}\n".repeat(70));
    assert!(violations(Path::new("service/x.rs"), &braces_in_strings).is_empty(), "a \"{{\" is not a brace");
    let commented = "//! Called by `crate::http` and `crate::workers`.\nfn f() {}\n";
    assert!(violations(Path::new("store/x.rs"), commented).is_empty(), "comments are not imports");
    let io = "fn read() { let _ = std::fs::read(\"x\"); }\n";
    assert_eq!(violations(Path::new("domain/x.rs"), io), ["domain/x.rs: the domain names `std::fs`"]);
    let door = "use crate::store::StoredCommand;\n";
    assert_eq!(violations(Path::new("http/x.rs"), door).len(), 1, "the store named above the service");
    assert!(violations(Path::new("service/x.rs"), door).is_empty(), "the service may name it");
    let handle = "fn f(e: &Engine) { let _ = e.store().commands(); }\n";
    assert_eq!(violations(Path::new("workers/x.rs"), handle).len(), 1, "a repository asked for above the service");
    let atomic = "fn f(flag: &AtomicBool) { flag.store(true, Ordering::Relaxed); }\n";
    assert!(violations(Path::new("workers/x.rs"), atomic).is_empty(), "an atomic's store is not the store");
    let bag = "pub async fn receive(state: &Services, body: &[u8]) {}\n";
    assert_eq!(violations(Path::new("channels/x/mod.rs"), bag).len(), 1, "a channel taking the services' bag");
    assert!(violations(Path::new("http/x.rs"), bag).is_empty(), "the HTTP layer holds it");
    let untyped =
        "#[utoipa::path(post, path = \"/x\",\n    request_body(\n        content = serde_json::Value,\n    ))]\n";
    assert_eq!(violations(Path::new("http/routes/x.rs"), untyped).len(), 1, "a body annotated as `Value`");
    assert_eq!(violations(Path::new("http/routes/webhooks/x.rs"), untyped).len(), 1, "a provider's format too");
    assert!(violations(Path::new("http/routes/webhooks/hooks.rs"), untyped).is_empty(), "the hook bridge's");
    let form = "#[utoipa::path(post, path = \"/x\", request_body(content = String, content_type = \"form\"))]\n";
    assert_eq!(violations(Path::new("http/routes/webhooks/x.rs"), form).len(), 1, "a form's fields unnamed");
    let typed = "#[utoipa::path(post, path = \"/x\", request_body(content = RecoveryBody))]\n";
    assert!(violations(Path::new("http/routes/x.rs"), typed).is_empty(), "a body annotated with its type");
    let response = "use axum::response::IntoResponse;\n";
    assert_eq!(violations(Path::new("channels/x.rs"), response).len(), 1);
    assert!(violations(Path::new("http/x.rs"), response).is_empty());
    let long = format!("fn long() {{\n{}}}\n", "    let _ = 1;\n".repeat(60));
    assert_eq!(violations(Path::new("service/x.rs"), &long), ["service/x.rs: fn long has 62 lines"]);
    let wide = format!("const X: &str = \"{}\";\n", "x".repeat(120));
    assert_eq!(violations(Path::new("store/x.rs"), &wide), ["store/x.rs:1: 139 columns (at most 120)"]);
    let big = "const X: u8 = 1;\n".repeat(401);
    assert_eq!(violations(Path::new("service/x.rs"), &big).len(), 1, "a file over 400 lines");
    assert_eq!(violations(Path::new("api/x.rs"), "fn f() {}\n").len(), 1, "an unknown top-level module");
}

/// The modules directly inside `layer` (its files and folders, `mod.rs` aside) and, for each, the
/// others it names (`crate::layer::x`, or `super::x` from a file directly in the layer's folder).
fn modules_inside(src: &Path, layer: &str) -> std::collections::BTreeMap<String, BTreeSet<String>> {
    let folder = src.join(layer);
    let names: BTreeSet<String> = std::fs::read_dir(&folder)
        .expect("a layer folder")
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let module = name.strip_suffix(".rs").map(str::to_owned).or_else(|| e.path().is_dir().then_some(name));
            module.filter(|m| m != "mod")
        })
        .collect();
    let mut edges = std::collections::BTreeMap::new();
    for name in &names {
        let (file, dir) = (folder.join(format!("{name}.rs")), folder.join(name));
        let mut files = vec![];
        if file.is_file() {
            files.push(file);
        } else {
            source_files(&dir, &mut files);
        }
        let mut named = BTreeSet::new();
        for path in files.iter().filter(|p| !p.ends_with("tests.rs")) {
            let text = std::fs::read_to_string(path).expect("source");
            let code = code_of(&text).join("\n");
            let mut words: Vec<String> = vec![];
            for (at, _) in code.match_indices(&format!("crate::{layer}::")) {
                words.extend(first_word(&code[at + layer.len() + 9..]));
            }
            if path.parent() == Some(folder.as_path()) {
                words.extend(code.match_indices("super::").filter_map(|(at, _)| first_word(&code[at + 7..])));
            }
            named.extend(words.into_iter().filter(|w| w != name && names.contains(w)));
        }
        edges.insert(name.clone(), named);
    }
    edges
}

/// A cycle among `edges`, if there is one (as the modules on it).
fn a_cycle(edges: &std::collections::BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        at: &str,
        edges: &std::collections::BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|p| p == at) {
            return Some(path[start..].to_vec());
        }
        if !done.insert(at.to_owned()) {
            return None;
        }
        path.push(at.to_owned());
        let found = edges.get(at).into_iter().flatten().find_map(|next| visit(next, edges, path, done));
        path.pop();
        found
    }
    let mut done = BTreeSet::new();
    edges.keys().find_map(|start| visit(start, edges, &mut vec![], &mut done))
}

/// Inside each layer the modules import one another in one direction: a reader can read them in
/// an order, each using only those before it (issue 27.12).
#[test]
fn inside_each_layer_the_modules_have_an_order() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut circles = vec![];
    for (layer, _) in LAYERS {
        if let Some(cycle) = a_cycle(&modules_inside(&src, layer)) {
            circles.push(format!("{layer}: {}", cycle.join(" -> ")));
        }
    }
    assert!(circles.is_empty(), "modules that import each other: {circles:?}");
    let mut looped = std::collections::BTreeMap::new();
    looped.insert("a".to_owned(), BTreeSet::from(["b".to_owned()]));
    looped.insert("b".to_owned(), BTreeSet::from(["a".to_owned()]));
    assert!(a_cycle(&looped).is_some(), "the check bites on a circle");
}
