//! Golden files: a result's exact bytes checked against a file under `e2e/fixtures/`.
//!
//! `UPDATE_GOLDEN=1` writes the files from the run instead of checking them (then read the diff
//! before committing it: the file is the contract the test holds the Worker to).

use std::path::PathBuf;

fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/binary/e2e/fixtures")
        .join(name)
}

/// Asserts that `actual` is byte for byte the golden file `name`.
pub fn assert_golden(name: &str, actual: &[u8]) {
    let path = path(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "golden file {} cannot be read ({e}); UPDATE_GOLDEN=1 writes it",
            path.display()
        )
    });
    if expected == actual {
        return;
    }
    let (expected, actual) = (
        String::from_utf8_lossy(&expected),
        String::from_utf8_lossy(actual),
    );
    let line = expected
        .lines()
        .zip(actual.lines())
        .position(|(e, a)| e != a)
        .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
    panic!(
        "the result differs from golden file {} from line {}:\n  expected: {:?}\n  actual:   {:?}\n\
         whole result:\n{actual}",
        path.display(),
        line + 1,
        expected.lines().nth(line),
        actual.lines().nth(line),
    );
}
