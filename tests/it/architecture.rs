//! The house rules, read from the code itself (docs/ARCHITECTURE.md): every `crate::` path in
//! `src/` points to the same layer or one below it; the domain does no I/O; only the HTTP layer
//! makes responses; every module says what lives in it; no file passes 400 lines and no function
//! 60 (tests aside); no line passes 120 columns. Each rule is also tried on a snippet that breaks it, so that the checks
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

fn source_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src is readable").flatten() {
        let path = entry.path();
        if path.is_dir() {
            source_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// A file without its unit tests.
fn until_tests(text: &str) -> Vec<&str> {
    text.split("#[cfg(test)]").next().unwrap_or_default().lines().collect()
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
            depth += code[j].matches('{').count() as i64 - code[j].matches('}').count() as i64;
            opened |= code[j].contains('{');
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
    for file in &files {
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
    let commented = "//! Called by `crate::http` and `crate::workers`.\nfn f() {}\n";
    assert!(violations(Path::new("store/x.rs"), commented).is_empty(), "comments are not imports");
    let io = "fn read() { let _ = std::fs::read(\"x\"); }\n";
    assert_eq!(violations(Path::new("domain/x.rs"), io), ["domain/x.rs: the domain names `std::fs`"]);
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
