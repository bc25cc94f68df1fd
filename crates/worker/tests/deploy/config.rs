//! The Worker's configuration and metrics as its documents give them: the variables of the
//! configuration table (`docs/configuration.md`) and the metrics of the metrics table
//! (`docs/metrics.md`), the documented source; the `binary` test's `deploy::` checks the metrics
//! against a running Worker.

use std::collections::BTreeSet;

use crate::tools::root;

/// The configuration reference: the table of every variable.
const CONFIGURATION: &str = "docs/configuration.md";

/// The metrics reference: the table of every metric.
const METRICS: &str = "docs/metrics.md";

/// The rows of the table of `document` whose header row starts with `| <first> |`.
fn table_rows(document: &str, first: &str) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(root().join(document))
        .unwrap_or_else(|e| panic!("{document}: {e}"));
    let header = format!("| {first} |");
    let start = text
        .find(&header)
        .unwrap_or_else(|| panic!("{document} has no table headed {header:?}"));
    text[start..]
        .lines()
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            line.trim_matches('|')
                .split(" | ")
                .map(|cell| cell.trim().to_owned())
                .collect()
        })
        .collect()
}

/// The backticked words of a cell.
fn quoted(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

/// The variables of the configuration table. A name written `_X` continues the row's
/// first name, whose first two words it shares (`OBJECT_STORAGE_ENDPOINT`, `_REGION`).
/// `DATASOURCE_<NAME>_*` and each `DATASOURCE_<NAME>_<FIELD>` are returned as the prefix
/// `DATASOURCE_`.
pub fn documented_variables() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for row in table_rows(CONFIGURATION, "variable") {
        let words = quoted(&row[0]);
        let Some(first) = words.first() else { continue };
        for word in &words {
            let name = if word.starts_with('_') {
                let stem: Vec<&str> = first.splitn(3, '_').take(2).collect();
                format!("{}{word}", stem.join("_"))
            } else if let Some((prefix, _)) = word.split_once("<NAME>_") {
                prefix.to_owned()
            } else {
                (*word).to_owned()
            };
            names.insert(name);
        }
    }
    assert!(
        names.len() > 40,
        "{CONFIGURATION}'s table gave only {names:?}"
    );
    names
}

/// The default the configuration table gives `name` (the first backticked word of its default
/// column: `268435456` of "`268435456` (256 MiB)").
pub fn documented_default(name: &str) -> String {
    let row = table_rows(CONFIGURATION, "variable")
        .into_iter()
        .find(|row| quoted(&row[0]).first() == Some(&name))
        .unwrap_or_else(|| panic!("{CONFIGURATION}'s table has no row for {name}"));
    quoted(&row[1])
        .first()
        .unwrap_or_else(|| panic!("{CONFIGURATION} gives {name} no default: {row:?}"))
        .to_string()
}

/// Whether `name` is a variable the Worker reads: in the table, a `DATASOURCE_<NAME>_<FIELD>`
/// group, or `RUST_MIN_STACK` (the configuration document's "Stack").
pub fn is_worker_variable(name: &str, known: &BTreeSet<String>) -> bool {
    known.contains(name)
        || name == "RUST_MIN_STACK"
        || (name.starts_with("DATASOURCE_") && name.matches('_').count() >= 2)
}

/// The metrics of the metrics table, with their type.
pub fn documented_metrics() -> Vec<(String, String)> {
    let metrics: Vec<(String, String)> = table_rows(METRICS, "metric")
        .into_iter()
        .map(|row| (quoted(&row[0])[0].to_owned(), row[1].clone()))
        .collect();
    assert!(
        metrics.len() > 20,
        "{METRICS}'s table gave only {metrics:?}"
    );
    metrics
}

/// The metric names a PromQL expression selects (`name{...}`).
pub fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = expr.as_bytes();
    for (at, _) in expr.match_indices('{') {
        let end = at;
        let mut start = end;
        while start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
            start -= 1;
        }
        if start < end {
            names.insert(expr[start..end].to_owned());
        }
    }
    names
}

#[test]
fn the_documented_tables_parse() {
    let variables = documented_variables();
    for name in [
        "OBJECT_STORAGE_REGION",
        "OBJECT_STORAGE_SECRET_KEY",
        "RABBITMQ_PORT_AMQP",
        "DATASOURCE_",
        "SHUTDOWN_GRACE_SEC",
    ] {
        assert!(
            variables.contains(name),
            "{name} not read from {CONFIGURATION}"
        );
    }
    assert!(!is_worker_variable("RABBITMQ_PASSWORD", &variables));
    assert!(is_worker_variable("DATASOURCE_CRM_HOST", &variables));
    let metrics = documented_metrics();
    assert!(metrics.contains(&("fetcher_jobs_total".to_owned(), "counter".to_owned())));
    assert_eq!(
        metric_names("sum by (a) (rate(x_total{a=\"b\"}[5m])) / y{}"),
        BTreeSet::from(["x_total".to_owned(), "y".to_owned()])
    );
}
