//! `deploy/prometheus/rules.yml`: valid for promtool, every alert unit-tested firing and not
//! firing, every alert with a runbook, and only metrics the Worker (or RabbitMQ) exports.

use std::collections::BTreeSet;

use crate::tools::{promtool, root, run, text, yaml_documents};

#[test]
fn promtool_accepts_the_rules() {
    let output = run(promtool()
        .args(["check", "rules"])
        .arg(root().join("deploy/prometheus/rules.yml")));
    let said = text(&output);
    println!("{said}");
    assert!(output.status.success(), "promtool check rules:\n{said}");
    assert!(said.contains("SUCCESS"), "{said}");
}

#[test]
fn promtool_unit_tests_pass() {
    let output = run(promtool()
        .args(["test", "rules", "rules.test.yml"])
        .current_dir(root().join("deploy/prometheus")));
    let said = text(&output);
    println!("{said}");
    assert!(output.status.success(), "promtool test rules:\n{said}");
}

/// The alerts of rules.yml, with their annotations.
fn alerts() -> Vec<serde_json::Value> {
    let docs = yaml_documents(&root().join("deploy/prometheus/rules.yml"));
    docs[0]["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|group| group["rules"].as_array().expect("rules").clone())
        .filter(|rule| rule.get("alert").is_some())
        .collect()
}

#[test]
fn every_alert_has_a_runbook_and_a_test_that_fires_and_one_that_does_not() {
    let tests = yaml_documents(&root().join("deploy/prometheus/rules.test.yml"));
    let mut fires = BTreeSet::new();
    let mut silent = BTreeSet::new();
    for case in tests[0]["tests"].as_array().expect("tests") {
        for check in case["alert_rule_test"].as_array().expect("alert_rule_test") {
            let name = check["alertname"].as_str().expect("alertname").to_owned();
            let expected = check["exp_alerts"].as_array().map_or(0, Vec::len);
            if expected > 0 {
                fires.insert(name);
            } else {
                silent.insert(name);
            }
        }
    }
    let alerts = alerts();
    assert!(alerts.len() >= 9, "{} alerts", alerts.len());
    for alert in alerts {
        let name = alert["alert"].as_str().expect("alert name");
        let runbook = alert["annotations"]["runbook"].as_str().unwrap_or("");
        assert!(
            runbook.starts_with(&format!("docs/operations.md#{}:", name.to_lowercase())),
            "{name}'s runbook: {runbook:?}"
        );
        let operations =
            std::fs::read_to_string(root().join("docs/operations.md")).expect("docs/operations.md");
        assert!(
            operations.contains(&format!("### {name}")),
            "docs/operations.md has no section for {name}"
        );
        assert!(fires.contains(name), "no test where {name} fires");
        assert!(silent.contains(name), "no test where {name} stays silent");
    }
}

#[test]
fn the_rules_use_only_metrics_that_exist() {
    let exported = crate::config::documented_metrics();
    let rabbitmq = [
        "rabbitmq_detailed_queue_messages_ready",
        "rabbitmq_detailed_queue_messages",
        "rabbitmq_detailed_queue_consumers",
    ];
    for alert in alerts() {
        let expr = alert["expr"].as_str().expect("expr");
        for name in crate::config::metric_names(expr) {
            assert!(
                exported.iter().any(|(metric, _)| *metric == name)
                    || rabbitmq.contains(&name.as_str())
                    || name == "up",
                "{}: {name} is neither exported by the Worker (docs/metrics.md) nor RabbitMQ's",
                alert["alert"]
            );
        }
    }
}

/// The reasons of `fetcher_messages_requeued_total` that the FetcherJobsRequeuedRepeatedly runbook, its
/// alert's annotation and the metrics table (docs/metrics.md) name are the ones the Worker emits.
#[test]
fn the_requeue_runbook_names_the_reasons_the_worker_emits() {
    let emitted: BTreeSet<&str> = worker::job::Requeue::ALL
        .iter()
        .map(|reason| reason.as_str())
        .collect();
    let operations =
        std::fs::read_to_string(root().join("docs/operations.md")).expect("docs/operations.md");
    let start = operations
        .find("### FetcherJobsRequeuedRepeatedly")
        .expect("the runbook");
    let section = &operations[start + 4..];
    let section = &section[..section.find("\n#").unwrap_or(section.len())];
    let documented: BTreeSet<&str> = section
        .lines()
        .filter_map(|line| line.strip_prefix("- `")?.split('`').next())
        .collect();
    assert_eq!(documented, emitted, "the runbook's reasons");

    let alert = alerts()
        .into_iter()
        .find(|alert| alert["alert"] == "FetcherJobsRequeuedRepeatedly")
        .expect("the alert");
    let annotation = alert["annotations"]["runbook"].as_str().expect("runbook");
    let metrics = std::fs::read_to_string(root().join("docs/metrics.md")).expect("docs/metrics.md");
    let row = metrics
        .lines()
        .find(|line| line.starts_with("| `fetcher_messages_requeued_total` |"))
        .expect("the metrics table's row");
    for reason in emitted {
        assert!(
            annotation.contains(reason),
            "the annotation misses {reason}"
        );
        assert!(
            row.contains(&format!("`{reason}`")),
            "docs/metrics.md misses {reason}"
        );
    }
}
