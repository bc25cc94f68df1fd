//! The engine talks to datasources only: its dependency tree must never reach the broker, the
//! object store, the HTTP server or the outbox.

use std::process::Command;

#[test]
fn the_engine_depends_on_no_broker_storage_or_http_crate() {
    let output = Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "engine",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo tree");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tree = String::from_utf8_lossy(&output.stdout);
    let crates: Vec<&str> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert!(crates.contains(&"sqlx"), "the tree looks wrong:\n{tree}");
    for denied in [
        "lapin",
        "aws-sdk-s3",
        "aws-config",
        "axum",
        "outbox",
        "publisher",
    ] {
        assert!(
            !crates.contains(&denied),
            "engine depends on {denied}:\n{tree}"
        );
    }
}
