//! The house's dependency rules, checked over `cargo tree -e normal`: each crate of the
//! workspace reaches only the crates of ours its layer allows, and none of the heavy clients it
//! has no business with. A rule broken by a new dependency fails here, naming the crate.

use std::process::Command;

/// What each crate may not depend on, directly or not; `expect` is one crate its tree must hold,
/// so that a broken `cargo tree` cannot pass as an empty one.
const RULES: &[(&str, &str, &[&str])] = &[
    (
        "contract",
        "serde_json",
        &[
            "crypto",
            "engine",
            "storage",
            "outbox",
            "publisher",
            "repairer",
            "worker",
            "lapin",
            "sqlx",
            "aws-sdk-s3",
            "axum",
            "tokio",
            "opentelemetry",
        ],
    ),
    (
        "crypto",
        "aes-gcm",
        &[
            "contract",
            "engine",
            "storage",
            "outbox",
            "publisher",
            "repairer",
            "worker",
            "lapin",
            "sqlx",
            "aws-sdk-s3",
            "axum",
            "opentelemetry",
        ],
    ),
    (
        "engine",
        "sqlx",
        &[
            "storage",
            "outbox",
            "publisher",
            "repairer",
            "worker",
            "lapin",
            "aws-sdk-s3",
            "aws-config",
            "axum",
            "opentelemetry",
        ],
    ),
    (
        // Pools only: both state stores' and the sources' share it.
        "sqlpool",
        "sqlx",
        &[
            "contract",
            "crypto",
            "engine",
            "storage",
            "outbox",
            "publisher",
            "repairer",
            "worker",
            "lapin",
            "aws-sdk-s3",
            "axum",
            "opentelemetry",
        ],
    ),
    (
        "storage",
        "aws-sdk-s3",
        &[
            "crypto",
            "engine",
            "outbox",
            "publisher",
            "repairer",
            "worker",
            "lapin",
            "sqlx",
            "axum",
            "opentelemetry",
        ],
    ),
    (
        "outbox",
        "sqlx",
        &[
            "engine",
            "storage",
            "publisher",
            "repairer",
            "worker",
            "lapin",
            "aws-sdk-s3",
            "axum",
            "opentelemetry",
        ],
    ),
    (
        "publisher",
        "lapin",
        &[
            "engine",
            "storage",
            "outbox",
            "repairer",
            "worker",
            "sqlx",
            "aws-sdk-s3",
            "axum",
            "opentelemetry",
        ],
    ),
    (
        // `engine` is allowed: the Manager's connections resolve into its `ConnectionConfig`,
        // as the PostgreSQL `connections` table does inside it.
        "mongostate",
        "mongodb",
        &[
            "storage",
            "publisher",
            "repairer",
            "worker",
            "lapin",
            "aws-sdk-s3",
            "axum",
            "opentelemetry",
        ],
    ),
    (
        // `engine` is reached through `mongostate` (the Manager mode's rows, relayed here), which
        // uses its connection types only; the repairer itself never extracts.
        "repairer",
        "outbox",
        &["storage", "worker", "aws-sdk-s3", "axum", "opentelemetry"],
    ),
    (
        "cli",
        "storage",
        &[
            "sqlx",
            "axum",
            "metrics-exporter-prometheus",
            "engine",
            "outbox",
            "publisher",
            "repairer",
            "worker",
            "opentelemetry",
        ],
    ),
    (
        // Traces are the Worker's alone, and go over OTLP/HTTP on the hyper already in the
        // tree: no gRPC stack, no second HTTP client (and its TLS).
        "worker",
        "opentelemetry-otlp",
        &["tonic", "reqwest", "openssl"],
    ),
];

/// The names of every crate in `package`'s normal dependency tree.
fn tree(package: &str) -> Vec<String> {
    let output = Command::new(env!("CARGO"))
        .args(["tree", "-p", package, "-e", "normal", "--prefix", "none"])
        .arg("--offline")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo tree");
    assert!(
        output.status.success(),
        "cargo tree -p {package} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_crate_depends_only_on_what_its_layer_allows() {
    let mut broken = Vec::new();
    for (package, expect, denied) in RULES {
        let crates = tree(package);
        assert!(
            crates.iter().any(|c| c == expect),
            "{package}'s tree has no {expect}: {crates:?}"
        );
        for name in *denied {
            if crates.iter().any(|c| c == name) {
                broken.push(format!("{package} depends on {name}"));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}
