//! The house follows the flow (issue 34): `job/` reads top-down, each module importing only
//! modules below it in [`ORDER`]: the entries (a delivery, the sweeper), then admit and run, then
//! the endings, then what follows a commit, then what every step shares. A new module must take
//! its place in the order, or this fails.

use std::collections::BTreeSet;
use std::path::Path;

/// The modules of `job/`, top-down.
const ORDER: &[&str] = &[
    // The entries.
    "deliver",
    "sweeper",
    // Admit, claim and run.
    "claim",
    "run",
    "produce",
    "claimed",
    "sealing",
    "executions",
    "slots",
    // The endings: a delivery refused or failed unrun, a run's end, a cancel's end.
    "rejects",
    "authenticate",
    "finish",
    "cancel",
    // After the commit.
    "after_commit",
    "deletion",
    // What every step shares.
    "events",
    "core",
    "inbound",
    "wakeups",
    "spans",
    "ports",
];

/// The sibling modules a source file imports (`use super::x`, `use super::{x, y::z}`), its
/// own tests aside.
fn imports(source: &str) -> BTreeSet<String> {
    let code = source.split("#[cfg(test)]").next().unwrap_or(source);
    let mut found = BTreeSet::new();
    for statement in code.split(';') {
        // After any attributes or visibility: `#[allow(..)] pub(crate) use super::x`.
        let Some((before, path)) = statement.trim().rsplit_once("use super::") else {
            continue;
        };
        if !(before.is_empty() || before.ends_with(char::is_whitespace)) {
            continue;
        }
        let names = match path.strip_prefix('{') {
            Some(group) => top_level(group.strip_suffix('}').unwrap_or(group)),
            None => vec![path],
        };
        for name in names {
            let module = name.trim().split("::").next().unwrap_or("").trim();
            if !module.is_empty() && module != "*" && module != "self" {
                found.insert(module.to_owned());
            }
        }
    }
    found
}

/// `a, b::{c, d}, e` split at its top-level commas.
fn top_level(group: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&group[start..]);
    parts
}

#[test]
fn no_module_of_job_imports_one_above_it() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/job");
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("src/job") {
        let path = entry.expect("entry").path();
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_none_or(|e| e != "rs") || name == "mod" {
            continue;
        }
        let rank = ORDER
            .iter()
            .position(|m| *m == name)
            .unwrap_or_else(|| panic!("job/{name}.rs has no place in ORDER"));
        let source = std::fs::read_to_string(&path).expect("source");
        for imported in imports(&source) {
            // Items of `job/mod.rs` itself (re-exports) are not a module.
            let Some(other) = ORDER.iter().position(|m| *m == imported) else {
                continue;
            };
            assert!(
                other > rank,
                "job/{name}.rs imports {imported}, which is above it in the flow"
            );
        }
        seen.push(name.to_owned());
    }
    assert_eq!(
        seen.len(),
        ORDER.len(),
        "every module of ORDER exists: {seen:?}"
    );
}

#[test]
fn the_reader_finds_grouped_and_nested_imports() {
    let source = "use super::core::{JobCore, Requeue};\n\
                  use super::{authenticate, claim::{x, y}, run};\n\
                  #[allow(unused_imports)]\npub(crate) use super::events;\n\
                  use crate::metrics;\n#[cfg(test)]\nmod tests { use super::finish; }";
    let found: Vec<String> = imports(source).into_iter().collect();
    assert_eq!(found, ["authenticate", "claim", "core", "events", "run"]);
}
