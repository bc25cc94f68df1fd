//! Every `contract §N` and `lifecycle §N` the repository's code and documents cite names a
//! section of the copy kept in `docs/` (`WORKER-CONTRACT.md`, `LIFECYCLE.md`), and the known
//! answers they cite are in `tests/vectors/`: the project stands alone.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `## N.` section numbers of a document.
fn sections(document: &str) -> BTreeSet<u32> {
    let text = std::fs::read_to_string(root().join(document))
        .unwrap_or_else(|e| panic!("{document} must be in the repository: {e}"));
    text.lines()
        .filter_map(|line| line.strip_prefix("## "))
        .filter_map(|title| title.split('.').next()?.trim().parse().ok())
        .collect()
}

/// The repository's own text files: sources, documents, scripts (not `target/`, not `.git`).
fn files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if !matches!(name.as_ref(), "target" | ".git" | "node_modules") {
                files(&path, found);
            }
        } else if [".rs", ".md", ".sh", ".toml", ".yaml", ".yml", "Makefile"]
            .iter()
            .any(|ext| name.ends_with(ext))
        {
            found.push(path);
        }
    }
}

/// Every `<word> §N` in `text`, and the `§M` of a list after it (`contract §3, §8`).
fn cited(text: &str, word: &str) -> Vec<u32> {
    let mut numbers = Vec::new();
    let needle = format!("{word} §");
    for (at, _) in text.match_indices(&needle) {
        let mut rest = &text[at + needle.len()..];
        loop {
            let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            let Ok(number) = rest[..digits].parse() else {
                break;
            };
            numbers.push(number);
            match rest[digits..].strip_prefix(", §") {
                Some(more) => rest = more,
                None => break,
            }
        }
    }
    numbers
}

#[test]
fn every_section_the_tree_cites_is_in_the_repositorys_copy() {
    let contract = sections("docs/WORKER-CONTRACT.md");
    let lifecycle = sections("docs/LIFECYCLE.md");
    assert!(
        contract.contains(&8) && lifecycle.contains(&3),
        "documents are read"
    );
    let mut found = Vec::new();
    files(&root(), &mut found);
    assert!(
        found.len() > 50,
        "the tree is walked: {} files",
        found.len()
    );
    let mut missing = Vec::new();
    let mut citations = 0;
    for path in &found {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        for (word, known) in [("contract", &contract), ("lifecycle", &lifecycle)] {
            for number in cited(&text, word) {
                citations += 1;
                if !known.contains(&number) {
                    missing.push(format!("{}: {word} §{number}", path.display()));
                }
            }
        }
        assert!(
            !text.contains(concat!("..", "/shared/")),
            "{} points outside the repository",
            path.display()
        );
    }
    assert!(citations > 50, "citations are found: {citations}");
    assert!(missing.is_empty(), "cited but not in docs/: {missing:#?}");
}

#[test]
fn the_citation_reader_reads_lists() {
    assert_eq!(
        cited("see contract §3, §8 and more", "contract"),
        vec![3, 8]
    );
    assert_eq!(cited("(contract §7)", "contract"), vec![7]);
    assert_eq!(cited("contract §10.", "contract"), vec![10]);
    assert!(cited("the contract says", "contract").is_empty());
}

#[test]
fn the_known_answers_are_in_the_repository() {
    for name in [
        "go-json.json",
        "keys.json",
        "redaction.json",
        "sealed.json",
        "signatures.json",
    ] {
        let path = root().join("tests/vectors").join(name);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{} must exist: {e}", path.display()));
        serde_json_free_check(&text, name);
    }
}

/// A vector file is JSON-looking text (testkit carries no JSON parser; the crates' vector tests
/// parse and check every answer).
fn serde_json_free_check(text: &str, name: &str) {
    let trimmed = text.trim();
    assert!(
        trimmed.starts_with('{') || trimmed.starts_with('['),
        "{name} is not JSON"
    );
}
